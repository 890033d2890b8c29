//! Observation: how long a caller waits for entered work, never a claim that the work ended.
//! Entered work runs as its own task and stays owned whatever the observer does.

use std::future::Future;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};

use super::cancel::Cancel;
use super::error::{OperationCode, OwnerError};

/// Entered work, joinable by any number of observers.
pub type Actual<T> = Shared<BoxFuture<'static, Result<T, OwnerError>>>;

/// Runs `work` as its own task, so it settles even when nobody observes it any more.
pub fn enter<T, F>(work: F) -> Actual<T>
where
    T: Clone + Send + Sync + 'static,
    F: Future<Output = Result<T, OwnerError>> + Send + 'static,
{
    let task = tokio::spawn(work);
    async move {
        task.await.unwrap_or_else(|join| {
            Err(OwnerError::driver(format!(
                "entered work ended abnormally: {join}"
            )))
        })
    }
    .boxed()
    .shared()
}

/// How an observation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed<T> {
    /// The work settled within the observation.
    Settled(Result<T, OwnerError>),
    /// The observer stopped waiting (deadline or cancellation); the work goes on.
    Interrupted(OwnerError),
}

/// Waits for `actual`, at most `limit`, and no longer than any of `cancels` stays unfired.
pub async fn observe<T: Clone>(
    actual: Actual<T>,
    limit: Option<Duration>,
    cancels: &[Cancel],
    what: &str,
) -> Observed<T> {
    let deadline = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => futures::future::pending::<()>().await,
        }
    };
    let cancelled = async {
        if cancels.is_empty() {
            futures::future::pending::<OwnerError>().await
        } else {
            futures::future::select_all(cancels.iter().map(|c| Box::pin(c.cancelled())))
                .await
                .0
        }
    };
    tokio::select! {
        biased;
        settled = actual => Observed::Settled(settled),
        reason = cancelled => Observed::Interrupted(reason),
        () = deadline => Observed::Interrupted(OwnerError::operation(
            OperationCode::DeadlineExceeded,
            format!("{what} was not observed to settle within {} ms; the entered work stays owned", limit.map_or(0, |l| l.as_millis())),
        )),
    }
}

/// Runs `work` for at most `limit`: past it, the work is dropped (so every wait inside it ends)
/// and the result is a `deadline_exceeded` error naming `what`.
pub async fn bounded<T>(
    limit: Duration,
    what: &str,
    work: impl Future<Output = Result<T, OwnerError>>,
) -> Result<T, OwnerError> {
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(OwnerError::operation(
            OperationCode::DeadlineExceeded,
            format!(
                "{what} did not finish within {} ms; it was given up, and a retry enters it again",
                limit.as_millis()
            ),
        )),
    }
}

/// Waits for `duration` exactly, also far beyond what one timer can hold.
pub async fn sleep_exactly(duration: Duration) {
    const STEP: Duration = Duration::from_secs(86_400);
    let until = tokio::time::Instant::now().checked_add(duration);
    loop {
        let now = tokio::time::Instant::now();
        let remaining = match until {
            Some(until) if until > now => until - now,
            Some(_) => return,
            // Past the clock's range: wait in steps for ever.
            None => STEP,
        };
        tokio::time::sleep(remaining.min(STEP)).await;
    }
}
