//! A guest helper's last words: the end of its stderr, bounded, kept for the error that says why
//! it is gone (the egress gateway's, the session supervisor's), since the engine keeps none of
//! it (the `none` log driver).

use std::sync::{Mutex, PoisonError};

/// The most of the stderr kept: last words, never traffic (the helpers write none there).
pub const KEPT_BYTES: usize = 4 * 1_024;

/// The last stderr bytes of one helper.
#[derive(Default)]
pub struct LastWords {
    tail: Mutex<Vec<u8>>,
}

impl LastWords {
    /// Appends `bytes`, keeping only the last `KEPT_BYTES`.
    pub fn keep(&self, bytes: &[u8]) {
        let mut tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = &bytes[bytes.len().saturating_sub(KEPT_BYTES)..];
        let excess = (tail.len() + bytes.len()).saturating_sub(KEPT_BYTES);
        tail.drain(..excess);
        tail.extend_from_slice(bytes);
    }

    /// What was kept, as text (lossy), trimmed.
    pub fn last(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exactly_the_last_bytes() {
        let words = LastWords::default();
        words.keep(b"native-sandbox gateway: serving on 10.9.0.2\n");
        assert_eq!(words.last(), "native-sandbox gateway: serving on 10.9.0.2");
        words.keep(&vec![b'a'; KEPT_BYTES - 3]);
        words.keep(b"end");
        let last = words.last();
        assert_eq!(last.len(), KEPT_BYTES);
        assert!(last.ends_with("aaaend") && last.starts_with('a'));
        words.keep(&vec![b'b'; KEPT_BYTES * 2]);
        assert_eq!(words.last(), "b".repeat(KEPT_BYTES));
    }
}
