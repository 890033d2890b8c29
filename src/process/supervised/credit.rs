//! Credit given back to the supervisor in batches: a stream's reader takes bytes a piece at a
//! time (a command that writes 4 KiB at a time makes 4 KiB frames), and a credit frame per
//! piece would cost the connection a frame, the engine a relay and the supervisor two reads for
//! every piece of output.
//!
//! Invariant: at most `RETURN_AT - 1` bytes taken are owed at any time, so a supervisor whose
//! output the reader has taken all of always has at least `CREDIT - RETURN_AT + 1` bytes of
//! credit: it never waits on credit the host keeps back.

use super::CREDIT;

/// Bytes taken past which their credit goes back at once.
pub const RETURN_AT: u32 = CREDIT / 4;

/// Credit taken by a stream's reader and not given back yet.
#[derive(Debug, Default)]
pub struct Owed {
    bytes: u32,
}

impl Owed {
    /// `taken` more bytes were read: the credit to give back now, if the owed bytes reached
    /// `RETURN_AT`.
    pub fn took(&mut self, taken: u32) -> Option<u32> {
        self.bytes = self.bytes.saturating_add(taken);
        if self.bytes < RETURN_AT {
            return None;
        }
        Some(std::mem::take(&mut self.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_pieces_are_given_back_together_once_they_reach_the_threshold() {
        let mut owed = Owed::default();
        let piece = 4096;
        let mut given = Vec::new();
        for _ in 0..(2 * RETURN_AT / piece) {
            given.extend(owed.took(piece));
        }
        assert_eq!(given, vec![RETURN_AT, RETURN_AT]);
    }

    #[test]
    fn a_piece_at_least_the_threshold_goes_back_whole_with_what_was_owed() {
        let mut owed = Owed::default();
        assert_eq!(owed.took(10), None);
        assert_eq!(owed.took(RETURN_AT), Some(RETURN_AT + 10));
        assert_eq!(owed.took(1), None);
    }

    #[test]
    fn what_stays_owed_leaves_the_supervisor_most_of_its_credit() {
        let mut owed = Owed::default();
        let mut kept = 0u32;
        for taken in [1, 4095, 65_536, 7, RETURN_AT - 1, 3] {
            kept += taken;
            if let Some(back) = owed.took(taken) {
                kept -= back;
            }
            assert!(kept < RETURN_AT, "{kept} bytes owed");
        }
    }
}
