//! What unit tests across the crate share.

use std::path::PathBuf;
use std::time::Duration;

/// `future`'s output, or a failed test naming `what` after 5 s: a regression fails rather than
/// hangs.
pub async fn settles<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not settle"))
}

/// A fresh, empty directory of this test process's own under the temporary directory, named
/// for `label` (the test removes it at its end).
pub fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("native-sandbox-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}
