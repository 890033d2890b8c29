//! A cancellation token: fired once with a reason; everyone waiting on it wakes.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::error::OwnerError;

#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    reason: Mutex<Option<OwnerError>>,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the token; the first reason wins.
    pub fn cancel(&self, reason: OwnerError) {
        {
            let mut slot = self
                .inner
                .reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.is_some() {
                return;
            }
            *slot = Some(reason);
        }
        self.inner.notify.notify_waiters();
    }

    pub fn reason(&self) -> Option<OwnerError> {
        self.inner
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.reason().is_some()
    }

    /// `Err(reason)` once fired, so `cancel.check()?` reads naturally.
    pub fn check(&self) -> Result<(), OwnerError> {
        match self.reason() {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    /// Resolves with the reason once the token fires (at once if it already has).
    pub async fn cancelled(&self) -> OwnerError {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Register before checking, so a cancel between the check and the await is not lost.
            notified.as_mut().enable();
            if let Some(reason) = self.reason() {
                return reason;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_reason_wins_and_wakes_waiters() {
        let cancel = Cancel::new();
        let waiter = {
            let cancel = cancel.clone();
            tokio::spawn(async move { cancel.cancelled().await })
        };
        tokio::task::yield_now().await;
        cancel.cancel(OwnerError::cancelled("first"));
        cancel.cancel(OwnerError::cancelled("second"));
        let reason = waiter.await.expect("waiter joins");
        assert_eq!(reason, OwnerError::cancelled("first"));
        assert!(cancel.check().is_err());
        assert_eq!(cancel.cancelled().await, OwnerError::cancelled("first"));
    }
}
