//! Attaching to a process container: its output demultiplexed into the owner's chunks, its
//! leader's fate, and attaching again to a reattachable process after its controller is gone.

use bollard::query_parameters::WaitContainerOptionsBuilder;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bollard::Docker;
use futures::future::FutureExt;
use futures::StreamExt;
use tokio::io::AsyncWrite;

use super::demux::{demultiplexed, Chunks};
use super::dialer::{AttachError, Dialer};
use super::engine::{engine_error, is_not_found, with_causes, REQUEST_TIMEOUT};
use super::exit_status::leader_fate;
use super::objects::provable_container;
use super::oom_events::oom_event_published;
use super::output_end::ended_with_the_process;
use crate::lifecycle::driver::{output_of_chunks, ProcessChannels, ProcessExit};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Role, SandboxRecoveryRecord};

/// How soon, and at most how rarely, a lost wait for the leader's exit is asked again.
pub const EXIT_WAIT_FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(200);
pub const EXIT_WAIT_LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// A container's attached streams: its output as the owner's chunks, in the order the guest
/// wrote them, and its stdin.
pub struct Attached {
    pub output: Chunks,
    /// Shutting it down delivers EOF to the guest.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

/// Attaches to all three streams of container `id` from now on, over a connection of the
/// owner's own (see `dialer.rs`), within the engine's request timeout.
pub async fn attach_streams(dialer: &Dialer, id: &str) -> Result<Attached, AttachError> {
    let hijacked = dialer.attach(id, REQUEST_TIMEOUT).await?;
    Ok(Attached {
        output: demultiplexed(hijacked.output),
        input: Box::pin(hijacked.input),
    })
}

/// An attach failure as the owner reports it: `what` was being attached.
pub fn attach_error(what: &str, error: &AttachError) -> OwnerError {
    OwnerError::driver(format!("attaching to {what}: {}", with_causes(error)))
}

/// The exit code of container `id` once it is not running: `None` when it no longer exists.
/// A lost engine connection is asked again with backoff until `give_up` says stop.
pub async fn wait_exit_code<F, Fut>(docker: &Docker, id: &str, give_up: F) -> Option<i64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut backoff = EXIT_WAIT_FIRST_RETRY;
    loop {
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        match docker.wait_container(id, Some(options)).next().await {
            Some(Ok(response)) => return Some(response.status_code),
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                return Some(code)
            }
            Some(Err(e)) if is_not_found(&e) => return None,
            _ => {}
        }
        if give_up().await {
            return None;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(EXIT_WAIT_LAST_RETRY);
    }
}

/// The leader's fate from its exit code and whether the kernel killed for memory: the
/// container's state says so, or, for a leader killed by SIGKILL, the engine's `oom` event for it
/// (see `oom_events.rs`). An engine that cannot be asked leaves the exit as its code says.
pub async fn fate_of(docker: &Docker, id: &str, code: i64) -> ProcessExit {
    memory_kill_told(docker, id, leader_fate(code, false)).await
}

/// `fate`, or `OutOfMemory` when it is a `SIGKILL` and the engine says the kernel killed in
/// container `id` for memory (its state, or its `oom` event within the grace). A supervised
/// command's wait status is judged the same way: its container runs on, and the engine's word
/// may come just after the supervisor's.
pub async fn memory_kill_told(docker: &Docker, id: &str, fate: ProcessExit) -> ProcessExit {
    let ProcessExit::Signaled(signal) = &fate else {
        return fate;
    };
    if signal != "SIGKILL" {
        return fate;
    }
    let state = docker
        .inspect_container(id, None)
        .await
        .ok()
        .and_then(|inspect| inspect.state);
    match state {
        Some(state) if state.oom_killed == Some(true) => ProcessExit::OutOfMemory,
        Some(state) if oom_event_published(docker, id, &state).await => ProcessExit::OutOfMemory,
        _ => fate,
    }
}

/// Attaches again to the process container `record` proves is its own. The process must still
/// run (paused or not) and must have been started reattachable (its stdin open across
/// attachments); otherwise a state error says which. Output written while nobody was attached
/// is not replayed. Once `stopped` is set (the owner removed compute), the leader's fate is
/// `Unavailable` and a lost wait is not asked again.
pub async fn attach_again(
    docker: Docker,
    dialer: &Dialer,
    record: &SandboxRecoveryRecord,
    stopped: Arc<AtomicBool>,
) -> Result<ProcessChannels, OwnerError> {
    let Some(id) = provable_container(&docker, record, Role::Compute).await? else {
        return Err(OwnerError::state(
            "the sandbox's process is gone: it has no process container",
        ));
    };
    let inspect = docker
        .inspect_container(&id, None)
        .await
        .map_err(|e| engine_error("inspecting the process container", e))?;
    if inspect.state.and_then(|s| s.running) != Some(true) {
        return Err(OwnerError::state(
            "the sandbox's process is gone: its container is not running",
        ));
    }
    let config = inspect.config.unwrap_or_default();
    if config.open_stdin != Some(true) || config.stdin_once != Some(false) {
        return Err(OwnerError::state(
            "the sandbox's process was not started reattachable: its stdin closed with its first attachment",
        ));
    }
    let attached = attach_streams(dialer, &id)
        .await
        .map_err(|e| attach_error("the process", &e))?;
    let output = ended_with_the_process(attached.output, docker.clone(), id.clone());
    let exit = async move {
        let code = wait_exit_code(&docker, &id, || {
            let stopped = Arc::clone(&stopped);
            async move { stopped.load(Ordering::SeqCst) }
        })
        .await;
        match code {
            Some(code) if !stopped.load(Ordering::SeqCst) => fate_of(&docker, &id, code).await,
            _ => ProcessExit::Unavailable,
        }
    }
    .boxed();
    Ok(ProcessChannels {
        input: attached.input,
        output: output_of_chunks(output),
        exit,
    })
}
