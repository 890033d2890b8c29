//! What unit tests across the crate share.

use std::time::Duration;

/// `future`'s output, or a failed test naming `what` after 5 s: a regression fails rather than
/// hangs.
pub async fn settles<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not settle"))
}
