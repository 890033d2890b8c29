//! A transfer's running counts, readable while it runs (a caller's `onProgress`, polled by the
//! JavaScript layer): files whose bodies are whole, and body bytes taken so far.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Progress {
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Progress {
    pub fn add_bytes(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_file(&self) {
        self.files.fetch_add(1, Ordering::Relaxed);
    }

    /// `(files, bytes)` now.
    pub fn read(&self) -> (u64, u64) {
        (
            self.files.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let progress = Progress::default();
        progress.add_bytes(10);
        progress.add_bytes(5);
        progress.add_file();
        assert_eq!(progress.read(), (1, 15));
    }
}
