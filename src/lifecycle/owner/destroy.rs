//! Destroy: stops (joining any entered stop), waits for a cancelled transfer's release, then
//! releases storage. Entered once and joined, as a stop; only a failed destroy is entered afresh.

use std::sync::Arc;

use super::SandboxOwner;
use crate::lifecycle::error::{CleanupOperation, OwnerError};
use crate::lifecycle::observe::{enter, Actual};
use crate::lifecycle::state::{Operation, State};

impl SandboxOwner {
    /// Stops, then releases storage.
    pub async fn destroy(&self) -> Result<(), OwnerError> {
        match self.begin_destroy_call() {
            Some(actual) => {
                self.observe_cleanup(actual, CleanupOperation::Destroy)
                    .await
            }
            None => Ok(()),
        }
    }

    /// Enters (or joins) destruction synchronously; `None` when already destroyed.
    pub fn begin_destroy_call(&self) -> Option<Actual<()>> {
        let mut core = self.core();
        if core.state == State::Destroyed {
            return None;
        }
        core.state = State::Destroying;
        if let Some(actual) = &core.destroy {
            return Some(actual.clone());
        }
        let stopped = self.begin_stop(&mut core);
        let transfer =
            Self::cancel_transfer_locked(&core, None, "Sandbox storage is being destroyed.");
        core.destroy_attempt += 1;
        let attempt = core.destroy_attempt;
        let owner = self.clone();
        let limit = self.cleanup_limit();
        let actual = enter(async move {
            let result = async {
                stopped.await?;
                owner.await_transfer_release(transfer, limit).await?;
                // As the original: cleanup never checkpoints; the record stays as the start left it.
                Arc::clone(&owner.inner.driver).destroy().await?;
                Ok(())
            }
            .await;
            let mut core = owner.core();
            if core.destroy_attempt == attempt {
                match result {
                    Ok(()) => core.state = State::Destroyed,
                    Err(_) => {
                        core.destroy = None;
                        if core.state != State::Destroyed {
                            core.state = State::Uncertain(Operation::Destroy);
                        }
                    }
                }
            }
            result
        });
        core.destroy = Some(actual.clone());
        Some(actual)
    }
}
