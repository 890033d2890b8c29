//! Freeze: the owner's pause and resume of the running process, admitted only while compute is
//! ready and the process has started, observed within the cleanup deadline (the observation
//! itself is `lifecycle::freeze`).

use super::SandboxOwner;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::freeze::{observe_freeze, FreezeTo};
use crate::lifecycle::state::State;

impl SandboxOwner {
    /// Pauses or resumes the running process: only while compute is ready and the process has
    /// started (a stop or destroy that comes later still removes a paused sandbox). Observed
    /// within the cleanup deadline.
    pub async fn freeze(&self, to: FreezeTo) -> Result<(), OwnerError> {
        {
            let core = self.core();
            let started = core.process.as_ref().is_some_and(|slot| slot.started);
            if core.state != State::Ready || !started {
                return Err(OwnerError::state(
                    "only a ready sandbox whose process has started can be paused or resumed",
                ));
            }
        }
        let driver = self.driver();
        let work = match to {
            FreezeTo::Paused => driver.pause(),
            FreezeTo::Running => driver.resume(),
        };
        observe_freeze(work, to, self.cleanup_limit()).await
    }
}
