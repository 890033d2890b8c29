//! The one native process of a sandbox: its recipe and the owner's side of its streams.

pub mod command_options;
pub mod external;
pub mod io;
pub mod output_pump;
pub mod signal_name;
pub mod spec;
pub mod staged;
pub mod stall;
pub mod stdin_lane;
pub mod supervised;

/// Semaphore permits for `n` bytes of staging (a staging larger than the semaphore's maximum is
/// clamped where the semaphore is made).
fn permits(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// What one staged piece of output holds beyond its bytes, at most: its slot in the staging's
/// channel (a `staged::Received`) and its allocation's header and rounding.
pub(crate) const PIECE_BOOKKEEPING: usize = 128;

/// The output staging's permits for a piece of `len` bytes: its bytes and its bookkeeping, so a
/// guest writing many tiny pieces (alternating 1-byte writes to stdout and stderr arrive as one
/// piece each) cannot make the staging hold far more memory than its budget. Never more than
/// the whole `staging`, so every piece finds room once the staging is empty.
fn output_permits(len: usize, staging: u64) -> u32 {
    let staging = usize::try_from(staging).unwrap_or(usize::MAX);
    permits(len.saturating_add(PIECE_BOOKKEEPING).min(staging))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_costs_its_bytes_and_its_bookkeeping_never_more_than_the_staging() {
        assert_eq!(output_permits(1, 1 << 20), 129);
        assert_eq!(output_permits(65_536, 1 << 20), 65_664);
        assert_eq!(output_permits(1, 64), 64);
        assert_eq!(output_permits(65_536, 1_000), 1_000);
        assert_eq!(output_permits(usize::MAX, u64::MAX), u32::MAX);
    }

    #[test]
    fn the_bookkeeping_covers_a_channel_slot_and_an_allocation_header() {
        // A slot of the staging's unbounded channel holds one `Received` (plus its block's
        // share of a header); a piece's bytes are one allocation of their own (the allocator
        // adds up to 32 bytes of header and rounding to a small one).
        assert!(std::mem::size_of::<staged::Received>() + 32 + 32 <= PIECE_BOOKKEEPING);
    }
}
