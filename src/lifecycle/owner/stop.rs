//! Stop: fences admissions and stops the complete workload, keeping storage; and the observation
//! of every cleanup (stop or destroy) within `deadlines.cleanupMs`. A stop is entered once and
//! joined: concurrent calls and retries wait on the same work until it settles, so a driver never
//! sees two stops at once; only a failed stop is entered afresh.

use std::sync::{Arc, PoisonError};

use super::{Core, SandboxOwner};
use crate::lifecycle::error::{CleanupOperation, OwnerError};
use crate::lifecycle::observe::{bounded, enter, observe, Actual, Observed};
use crate::lifecycle::state::{Operation, State};

/// The original's reason for whatever a stop interrupts (process startup, an import).
const COMPUTE_STOPPING: &str = "Sandbox compute is stopping.";

impl SandboxOwner {
    /// Fences admissions and stops the complete workload, keeping storage. Concurrent calls
    /// join the entered stop; a failed one leaves this owner able to retry.
    pub async fn stop(&self) -> Result<(), OwnerError> {
        match self.begin_stop_call() {
            Some(actual) => self.observe_cleanup(actual, CleanupOperation::Stop).await,
            None => Ok(()),
        }
    }

    /// Enters (or joins) a stop synchronously; `None` when compute is already stopped.
    pub fn begin_stop_call(&self) -> Option<Actual<()>> {
        let mut core = self.core();
        if matches!(core.state, State::Stopped | State::Destroyed) {
            return None;
        }
        Some(self.begin_stop(&mut core))
    }

    /// Observes an entered stop or destroy within `deadlines.cleanupMs`. An observer that gives
    /// up leaves the work running (it still settles the state when it ends) and joined: a retry
    /// observes the same work again; only work that failed is entered afresh (`stop_attempt` and
    /// `destroy_attempt` tell a failed attempt's late settling from the new one's).
    pub async fn observe_cleanup(
        &self,
        actual: Actual<()>,
        operation: CleanupOperation,
    ) -> Result<(), OwnerError> {
        let what = match operation {
            CleanupOperation::Stop => "sandbox stop",
            CleanupOperation::Destroy => "sandbox destruction",
        };
        // An observation that expires leaves the work entered, and joined: as the original's
        // owner, a retry waits on the same stop or destroy until it settles (a failed one is
        // entered afresh), so a driver never sees two stops at once.
        let cause = match observe(actual, Some(self.cleanup_limit()), &[], what).await {
            Observed::Settled(Ok(())) => return Ok(()),
            Observed::Settled(Err(cause)) | Observed::Interrupted(cause) => cause,
        };
        self.fence(match operation {
            CleanupOperation::Stop => Operation::Stop,
            CleanupOperation::Destroy => Operation::Destroy,
        });
        // The original's texts; the details are in the cause.
        let message = match operation {
            CleanupOperation::Stop => "Sandbox compute cleanup did not settle successfully.",
            CleanupOperation::Destroy => "Sandbox destruction did not settle successfully.",
        };
        Err(OwnerError::Cleanup {
            operation,
            message: message.into(),
            cause: Arc::new(cause),
        })
    }

    /// Stops the workload because of `why` (a stream limit the process crossed): it is the
    /// execution's end (`execution_end`), unless the execution already ended for another reason.
    pub fn stop_for(&self, why: OwnerError) {
        if let Some(execution) = &self.core().execution {
            execution.cancel(why);
        }
        self.stop_in_background();
    }

    pub(super) fn stop_in_background(&self) {
        let owner = self.clone();
        tokio::spawn(async move {
            // The failure stays visible through state and the next stop or destroy call.
            let _ = owner.stop().await;
        });
    }

    /// Enters (or joins) the physical stop. Must be called with the core locked.
    pub(super) fn begin_stop(&self, core: &mut Core) -> Actual<()> {
        if let Some(actual) = &core.stop {
            return actual.clone();
        }
        if core.state != State::Destroying {
            core.state = State::Stopping;
        }
        self.inner
            .startup_cancel
            .cancel(OwnerError::cancelled(COMPUTE_STOPPING));
        if let Some(execution) = core.execution.take() {
            execution.cancel(OwnerError::cancelled(COMPUTE_STOPPING));
            core.execution_end = execution.reason();
        }
        if let Some(sessions) = core.sessions.take() {
            sessions.cancel(OwnerError::cancelled(COMPUTE_STOPPING));
        }
        let import = Self::cancel_transfer_locked(core, Some(Operation::Import), COMPUTE_STOPPING);
        let startup = core.startup.clone();
        let process_start = core.process.as_ref().and_then(|p| p.start.clone());
        let io = core.process.as_ref().and_then(|p| p.io.clone());
        core.stop_attempt += 1;
        let attempt = core.stop_attempt;
        let owner = self.clone();
        let limit = self.cleanup_limit();
        let actual = enter(async move {
            let physical = async {
                if let Some(process_start) = process_start {
                    // Cancelled above: it settles at its next checkpoint. Channels nobody took
                    // any more are dropped here, which closes them.
                    let settled = bounded(limit, "the cancelled process start", async {
                        Ok(process_start.await)
                    })
                    .await?;
                    if let Ok(channels) = settled {
                        drop(
                            channels
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take(),
                        );
                    }
                }
                if let Some(io) = &io {
                    // An engine holds a killed container while its attached output is unread.
                    io.stopping();
                }
                // The driver's own stop is its work: it is awaited, not abandoned (an observer
                // may give up on it; a retry joins it).
                Arc::clone(&owner.inner.driver).stop().await?;
                if let Some(io) = io {
                    // Compute is gone: what the engine still sends is delivered (within a bound),
                    // then every pending read and write is unblocked.
                    io.close_after_stop().await;
                }
                // As the original: the cancelled import's work settles after the driver's stop
                // began (a source that never settles holds the stop's settlement, never the
                // stop of the workload itself).
                owner.await_transfer_release(import, limit).await?;
                if let Some(startup) = startup {
                    // Entered startup must settle before compute counts as stopped.
                    bounded(limit, "the cancelled startup", async { Ok(startup.await) })
                        .await?
                        .ok();
                }
                Ok(())
            }
            .await;
            let mut core = owner.core();
            if core.stop_attempt == attempt {
                match physical {
                    Ok(()) => {
                        if !matches!(core.state, State::Destroying | State::Destroyed) {
                            core.state = State::Stopped;
                        }
                    }
                    Err(_) => {
                        core.stop = None;
                        if !matches!(core.state, State::Destroying | State::Destroyed) {
                            core.state = State::Uncertain(Operation::Stop);
                        }
                    }
                }
            }
            physical
        });
        core.stop = Some(actual.clone());
        actual
    }
}
