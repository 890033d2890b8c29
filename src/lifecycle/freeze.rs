//! Pausing and resuming a sandbox's running process (the agentproto provider's `pause()` and
//! its resume on `connect` or on traffic after an idle pause). The driver's work runs as its
//! own task, so an engine that answers late still finishes it; the caller observes it within a
//! deadline.

use std::time::Duration;

use futures::future::BoxFuture;

use super::error::OwnerError;
use super::observe::{enter, observe, Observed};

/// Which way a freeze goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreezeTo {
    Paused,
    Running,
}

impl FreezeTo {
    fn what(self) -> &'static str {
        match self {
            FreezeTo::Paused => "pausing the sandbox",
            FreezeTo::Running => "resuming the sandbox",
        }
    }
}

/// Enters `work` (the driver's pause or resume) and observes it for at most `limit`.
pub async fn observe_freeze(
    work: BoxFuture<'static, Result<(), OwnerError>>,
    to: FreezeTo,
    limit: Duration,
) -> Result<(), OwnerError> {
    match observe(enter(work), Some(limit), &[], to.what()).await {
        Observed::Settled(result) => result,
        Observed::Interrupted(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test(start_paused = true)]
    async fn a_freeze_the_driver_never_finishes_is_given_up_at_the_limit() {
        let work = futures::future::pending::<Result<(), OwnerError>>().boxed();
        let started = tokio::time::Instant::now();
        let result = observe_freeze(work, FreezeTo::Paused, Duration::from_millis(250)).await;
        let error = result.expect_err("a pending freeze must not settle");
        assert!(error.to_string().contains("pausing the sandbox"), "{error}");
        assert_eq!(started.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test]
    async fn the_driver_s_answer_is_the_result() {
        let refused = async { Err(OwnerError::state("nothing to pause")) }.boxed();
        let result = observe_freeze(refused, FreezeTo::Running, Duration::from_secs(5)).await;
        assert_eq!(result, Err(OwnerError::state("nothing to pause")));
        let done = async { Ok(()) }.boxed();
        assert_eq!(
            observe_freeze(done, FreezeTo::Paused, Duration::from_secs(5)).await,
            Ok(())
        );
    }
}
