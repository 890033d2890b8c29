//! Running the workspace helper: the holder is started with the helper as its entrypoint
//! (`seed.rs`), attached first so none of its output is lost. One run at a time per sandbox: a
//! run holds the reservation's helper permit from its start until its exit is known (or its kill
//! was sent), so a late kill of an abandoned run can never reach the next one. Exports
//! (`export_helper.rs`) and imports (`import_helper.rs`) relay its streams.

use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::{KillContainerOptionsBuilder, WaitContainerOptionsBuilder};
use bollard::Docker;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::DockerReservation;
use crate::docker::attach::{attach_streams, Attached};
use crate::docker::engine::{engine_error, with_causes};
use crate::docker::seed::HELPER_PATH;
use crate::lifecycle::error::OwnerError;

/// How long the helper may take to exit once its streams ended, and how long killing an
/// abandoned helper may take, before the transfer gives up on it.
pub(super) const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long a transfer waits for the previous run to release the holder: at most four waits of
/// `EXIT_WAIT` and one `STOP_GRACE` (an export's request writer, then the helper's output and
/// exit, then its kill's two signals; an import's relay waits less), with room to spare.
const PERMIT_WAIT: Duration = Duration::from_secs(5 * EXIT_WAIT.as_secs());
/// How long a helper told to stop (SIGTERM) may take to put its modes back and exit.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The helper's stderr kept for the error message when it fails.
pub(super) const STDERR_BYTES: usize = 4 * 1_024;

/// One started run of the helper: its holder, its attached streams, and the permit that keeps
/// the next run waiting until this one is over (drop it only once the helper's exit is known or
/// its kill was sent).
pub(super) struct HelperRun {
    pub docker: Docker,
    pub holder: String,
    pub attached: Attached,
    pub permit: OwnedSemaphorePermit,
}

/// The permit a reservation's helper runs share: one run at a time.
pub(super) fn helper_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(1))
}

impl DockerReservation {
    /// Starts the helper in the holder, attached, or `None` when this holder has no helper (one
    /// made by an earlier version: the caller then asks the engine's archive endpoint). A holder
    /// with the helper that cannot run it now (busy past `PERMIT_WAIT`, a previous run still
    /// going, an engine that cannot attach or start it) is the transfer's error after that one
    /// wait: never another way round (the engine's endpoint reads as root and follows parent
    /// links), never a second wait.
    pub(super) async fn start_helper(&self) -> Result<Option<HelperRun>, OwnerError> {
        let holder = self.holder().await?;
        let docker = self.settings.docker.clone();
        let inspect = docker
            .inspect_container(&holder, None)
            .await
            .map_err(|e| engine_error("inspecting the workspace holder", e))?;
        let runs_helper = inspect
            .config
            .as_ref()
            .and_then(|config| config.entrypoint.as_deref())
            == Some(&[HELPER_PATH.to_owned()][..]);
        if !runs_helper {
            return Ok(None);
        }
        let unavailable = |why: String| Err(OwnerError::driver(why));
        // Transfers run one at a time, but the previous one's helper may still be exiting or
        // being killed: its relay holds the permit until then.
        let Ok(Ok(permit)) =
            tokio::time::timeout(PERMIT_WAIT, self.helper_permit.clone().acquire_owned()).await
        else {
            return unavailable(format!(
                "the previous transfer's helper was not over within {} s",
                PERMIT_WAIT.as_secs()
            ));
        };
        // Asked again now that the permit is held: a previous run that gave up on its
        // helper's exit or kill released the permit with the helper perhaps still running.
        if !stopped_within(&docker, &holder, EXIT_WAIT).await {
            return unavailable(format!(
                "the previous transfer's helper did not stop within {} s",
                EXIT_WAIT.as_secs()
            ));
        }
        let attached = match attach_streams(&self.settings.dialer, &holder).await {
            Ok(attached) => attached,
            Err(e) => {
                return unavailable(format!(
                    "attaching to the workspace helper: {}",
                    with_causes(&e)
                ))
            }
        };
        if let Err(e) = docker.start_container(&holder, None).await {
            return unavailable(format!(
                "starting the workspace helper: {}",
                with_causes(&e)
            ));
        }
        Ok(Some(HelperRun {
            docker,
            holder,
            attached,
            permit,
        }))
    }
}

/// Whether `holder` is not running within `bound` (an error reads as not stopped).
async fn stopped_within(docker: &Docker, holder: &str, bound: Duration) -> bool {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut waits = docker.wait_container(holder, Some(options));
    matches!(
        tokio::time::timeout(bound, waits.next()).await,
        Ok(Some(
            Ok(_) | Err(bollard::errors::Error::DockerContainerWaitError { .. })
        ))
    )
}

/// Why the helper failed, once it exited; `None` when it exited 0. A helper that does not exit
/// within `EXIT_WAIT` is killed.
pub(super) async fn exit_failure(docker: &Docker, holder: &str, stderr: &[u8]) -> Option<String> {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut waits = docker.wait_container(holder, Some(options));
    let code = match tokio::time::timeout(EXIT_WAIT, waits.next()).await {
        Ok(Some(Ok(exit))) => exit.status_code,
        // bollard reports a non-zero exit as an error carrying the code.
        Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => code,
        Ok(Some(Err(e))) => {
            return Some(format!(
                "the workspace helper's exit is unknown: {}",
                with_causes(&e)
            ))
        }
        Ok(None) | Err(_) => {
            kill(docker, holder).await;
            return Some("the workspace helper did not exit after its streams ended".into());
        }
    };
    (code != 0).then(|| {
        let said = String::from_utf8_lossy(stderr);
        match said.trim() {
            "" => format!("the workspace helper failed (exit status {code})"),
            said => format!("the workspace helper failed (exit status {code}): {said}"),
        }
    })
}

/// Waits for a helper whose work is whole (its caller already has the outcome) to end its
/// output (`rest`, read to its end) and stop; how it exits no longer matters. Both within one
/// `EXIT_WAIT`: past it, the helper is killed (within another).
pub(super) async fn exit_of_finished(
    docker: &Docker,
    holder: &str,
    rest: impl std::future::Future<Output = ()>,
) {
    let deadline = tokio::time::Instant::now() + EXIT_WAIT;
    let stopped = tokio::time::timeout_at(deadline, rest).await.is_ok()
        && stopped_within(
            docker,
            holder,
            deadline.saturating_duration_since(tokio::time::Instant::now()),
        )
        .await;
    if !stopped {
        kill(docker, holder).await;
    }
}

/// Stops an abandoned helper: SIGTERM, then SIGKILL when it still runs `STOP_GRACE` later; each
/// engine call bounded by `EXIT_WAIT` (a holder already gone or stopped is fine).
pub(super) async fn kill(docker: &Docker, holder: &str) {
    // SIGTERM first: the helper puts back the modes it widened to read entries their owner had
    // closed, then exits (`helper/src/restore.rs`); SIGKILL once `STOP_GRACE` is over.
    let signal = |name: &str| KillContainerOptionsBuilder::default().signal(name).build();
    let asked = tokio::time::timeout(
        EXIT_WAIT,
        docker.kill_container(holder, Some(signal("SIGTERM"))),
    )
    .await;
    if matches!(asked, Ok(Ok(()))) && stopped_within(docker, holder, STOP_GRACE).await {
        return;
    }
    let _ = tokio::time::timeout(
        EXIT_WAIT,
        docker.kill_container(holder, Some(signal("SIGKILL"))),
    )
    .await;
}

/// Keeps at most `STDERR_BYTES` of the helper's stderr.
pub(super) fn keep_stderr(kept: &mut Vec<u8>, message: &[u8]) {
    let room = STDERR_BYTES.saturating_sub(kept.len());
    kept.extend_from_slice(&message[..message.len().min(room)]);
}
