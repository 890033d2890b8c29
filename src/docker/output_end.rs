//! When a process's attach connection ends, its output has ended only if its process has: the
//! engine ends the connection once the container's process exited and its output was copied. An
//! end while the process still runs (a restarted engine with `live-restore`, a TCP or TLS proxy's
//! idle cut, a NAT dropping the connection) is not the output's end: what the guest writes from
//! then on is lost, so the streams fail with `stream_failure`, naming the lost connection, instead
//! of ending as if the guest had finished.
//!
//! The engine may end the connection a moment before it records the exit, so the process gets
//! `EXIT_GRACE` to be seen not running. A guest that closes both of its output streams and goes on
//! running looks the same as a lost connection, and is reported as one.

use std::time::Duration;

use bollard::query_parameters::WaitContainerOptionsBuilder;
use bollard::Docker;
use futures::StreamExt;

use super::demux::Chunks;
use super::engine::{is_not_found, with_causes};
use crate::lifecycle::error::{OperationCode, OwnerError};

/// How long after its attach connection ended a process may still show as running.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// `output` (the demultiplexed attach connection of container `id`), whose end is checked
/// against the container's state (see the module).
pub fn ended_with_the_process(output: Chunks, docker: Docker, id: String) -> Chunks {
    let checked = futures::stream::unfold(
        (output, Some((docker, id))),
        |(mut output, mut check)| async move {
            match output.next().await {
                Some(Ok(chunk)) => Some((Ok(chunk), (output, check))),
                // A failure is the output's last item already.
                Some(Err(error)) => Some((Err(error), (output, None))),
                None => {
                    let (docker, id) = check.take()?;
                    let lost = lost_connection(&docker, &id).await?;
                    Some((Err(lost), (output, None)))
                }
            }
        },
    );
    checked.boxed()
}

/// `None` when container `id` is not running (or gone) within `EXIT_GRACE`; else why the
/// connection's end is a failure.
async fn lost_connection(docker: &Docker, id: &str) -> Option<OwnerError> {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut wait = docker.wait_container(id, Some(options));
    let why = match tokio::time::timeout(EXIT_GRACE, wait.next()).await {
        Ok(Some(Ok(_))) => return None,
        Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { .. }))) => return None,
        // Removed: the owner's stop or destroy, which ends the streams its own way.
        Ok(Some(Err(e))) if is_not_found(&e) => return None,
        Ok(Some(Err(e))) => format!(
            "and the engine could not be asked whether the process had exited ({})",
            with_causes(&e)
        ),
        Ok(None) => "and the engine did not say whether the process had exited".to_owned(),
        Err(_) => format!(
            "while the process was still running ({} s later): the engine restarted, or a proxy or NAT cut the connection",
            EXIT_GRACE.as_secs()
        ),
    };
    Some(OwnerError::operation(
        OperationCode::StreamFailure,
        format!(
            "the engine's attach connection ended {why}; what the process wrote after that was lost"
        ),
    ))
}
