//! A Docker sandbox's stop (its process container killed; storage stays) and destroy (every
//! object of its record removed, each by its inspected ID).

use bollard::query_parameters::{KillContainerOptionsBuilder, WaitContainerOptionsBuilder};
use futures::StreamExt;

use crate::docker::engine::{engine_error, is_not_found};
use crate::docker::objects::{provable_container, remove_all};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::Role;

use super::DockerSandbox;

/// How long a stop waits for a supervisor's start in flight before it ends the connection:
/// such a start sees the stop itself (its cancellation, the killed container), so this only
/// keeps an engine that does not answer from taking the stop's whole `cleanupMs`.
const SUPERVISOR_START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl DockerSandbox {
    /// Kills compute (the whole process tree goes with its container), then ends the session
    /// supervisor's connection (whatever came of the kill); storage stays.
    pub(super) async fn run_stop(&self) -> Result<(), OwnerError> {
        let stopped = self.stop_compute().await;
        self.close_supervisor(SUPERVISOR_START_WAIT).await;
        stopped
    }

    async fn stop_compute(&self) -> Result<(), OwnerError> {
        self.stop_begun
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let record = {
            let mut state = self.state.lock().await;
            state.stopped_by_owner = true;
            state.record.clone()
        };
        let docker = &self.settings.docker;
        let Some(id) = provable_container(docker, &record, Role::Compute).await? else {
            return Ok(());
        };
        let kill = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        match docker.kill_container(&id, Some(kill)).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            // 409: not running (never started, or already exited).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => {}
            Err(e) => return Err(engine_error("stopping the process container", e)),
        }
        let wait = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        // A killed container stops at once; an engine that never says so fails this stop
        // (retryable) instead of holding it for ever.
        let limit = std::time::Duration::from_millis(self.request.policy.deadlines.cleanup_ms);
        let mut waiting = docker.wait_container(&id, Some(wait));
        match tokio::time::timeout(limit, waiting.next()).await {
            Err(_) => Err(OwnerError::operation(
                crate::lifecycle::error::OperationCode::DeadlineExceeded,
                format!(
                    "the engine did not report the killed process container stopped within {} ms",
                    limit.as_millis()
                ),
            )),
            Ok(Some(Ok(_)))
            | Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { .. })))
            | Ok(None) => Ok(()),
            Ok(Some(Err(e))) if is_not_found(&e) => Ok(()),
            Ok(Some(Err(e))) => Err(engine_error("waiting for the process container to stop", e)),
        }
    }

    pub(super) async fn run_destroy(&self) -> Result<(), OwnerError> {
        let record = self.record().await;
        remove_all(&self.settings.docker, &record).await?;
        if let Some(reaper) = &self.settings.reaper {
            reaper.forget(&record.sandbox_id);
        }
        Ok(())
    }
}
