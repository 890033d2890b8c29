//! Pausing and resuming a sandbox's process container (the engine's cgroup freezer): the
//! processes keep their memory and streams, storage stays, nothing runs until resumed.

use bollard::Docker;

use super::engine::engine_error;
use super::objects::provable_container;
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Role, SandboxRecoveryRecord};

/// Whether the process container should be frozen or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freeze {
    Pause,
    Resume,
}

/// Pauses or resumes the process container `record` proves is its own. Idempotent: a container
/// already in the asked state is left alone. A sandbox without a running process is a state
/// error that names why (no process, or it has ended).
pub async fn set_frozen(
    docker: &Docker,
    record: &SandboxRecoveryRecord,
    want: Freeze,
) -> Result<(), OwnerError> {
    let Some(id) = provable_container(docker, record, Role::Compute).await? else {
        return Err(OwnerError::state(
            "the sandbox has no process container to pause or resume",
        ));
    };
    let inspect = docker
        .inspect_container(&id, None)
        .await
        .map_err(|e| engine_error("inspecting the process container", e))?;
    let state = inspect.state.unwrap_or_default();
    if state.running != Some(true) {
        return Err(OwnerError::state(
            "the sandbox's process has ended; there is nothing to pause or resume",
        ));
    }
    let paused = state.paused == Some(true);
    let asked = match (want, paused) {
        (Freeze::Pause, false) => docker.pause_container(&id).await,
        (Freeze::Resume, true) => docker.unpause_container(&id).await,
        _ => return Ok(()),
    };
    match asked {
        Ok(()) => Ok(()),
        // 409: another pause or resume got there between the inspection and this call.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) if frozen_now(docker, &id).await? == Some(want == Freeze::Pause) => Ok(()),
        Err(e) => Err(engine_error(
            match want {
                Freeze::Pause => "pausing the process container",
                Freeze::Resume => "resuming the process container",
            },
            e,
        )),
    }
}

/// Whether the container is paused now; `None` when it no longer runs (a 409 from a process
/// that ended in between is no success).
async fn frozen_now(docker: &Docker, id: &str) -> Result<Option<bool>, OwnerError> {
    let inspect = docker
        .inspect_container(id, None)
        .await
        .map_err(|e| engine_error("inspecting the process container", e))?;
    let state = inspect.state.unwrap_or_default();
    Ok((state.running == Some(true)).then_some(state.paused == Some(true)))
}
