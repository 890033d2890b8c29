//! The execution: entered once, at process start, from ready compute; from there the execution
//! policy owns the whole workload. With a deadline, a timer stops compute when it fires,
//! however far away it is; a stop ends the timer.

use std::time::Duration;

use super::{Core, SandboxOwner};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::observe::sleep_exactly;
use crate::lifecycle::state::State;
use crate::policy::request::Execution;

impl SandboxOwner {
    /// Process start entry: from here the execution policy owns the whole workload. With a
    /// deadline, compute stops when it fires, however far away it is.
    pub fn enter_execution(&self) -> Result<Cancel, OwnerError> {
        self.enter_execution_locked(&mut self.core())
    }

    pub(super) fn enter_execution_locked(&self, core: &mut Core) -> Result<Cancel, OwnerError> {
        if core.state != State::Ready {
            return Err(OwnerError::state("process startup requires ready compute"));
        }
        if core.execution.is_some() {
            return Err(OwnerError::state("a sandbox admits one process execution"));
        }
        let execution = Cancel::new();
        core.execution = Some(execution.clone());
        if let Execution::Deadline { timeout_ms } = self.inner.request.policy.execution {
            let owner = self.clone();
            let timer = execution.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = timer.cancelled() => {}
                    () = sleep_exactly(Duration::from_millis(timeout_ms)) => {
                        timer.cancel(OwnerError::operation(
                            OperationCode::DeadlineExceeded,
                            "Sandbox execution exceeded its deadline.",
                        ));
                        let _ = owner.stop().await;
                    }
                }
            });
        }
        Ok(execution)
    }
}
