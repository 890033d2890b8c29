//! The process container's supervisor: the guest helper's `--supervise` mode, made on the first
//! command or file call, spoken to over one attached connection (`process::supervised::Link`).
//! It is the process container's entry (its PID 1) when no reserved process made that container
//! first, else an exec beside the process; either way it is started as root with only CAP_SETUID
//! and CAP_SETGID, to take an identity of its own (the helper's `identity.rs`). Every command runs in that one container (its limits,
//! user, hardening and network are the sandbox's), each in a process group of its own; the
//! supervisor's stdin closes with its connection, so a controller that goes ends every command.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bollard::exec::CreateExecOptions;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use session_frames::Spawn;

use super::compute::{supervisor_capabilities, Launch, ENTRY_START_USER};
use super::DockerSandbox;
use crate::docker::attach::{attach_error, memory_kill_told, Attached};
use crate::docker::demux::demultiplexed;
use crate::docker::engine::{engine_error, is_not_running, REQUEST_TIMEOUT};
use crate::docker::layout::{fixed_environment, HOME, TMPDIR, WORKSPACE};
use crate::docker::seed::HELPER_PATH;
use crate::docker::supervised_image::ensure_supervised_image;
use crate::guest_layout::with_fixed_environment;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{ProcessChannels, ProcessExit};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::process::supervised::{frames_of, CommandControl, Link, Spawned};

/// The running supervisor: its container and the connection to it.
#[derive(Clone)]
pub(crate) struct Supervisor {
    pub id: String,
    pub link: Link,
}

impl DockerSandbox {
    /// The live supervisor, made (or made again, once its connection is gone) on demand.
    pub(super) async fn supervisor(
        self: &Arc<Self>,
        cancel: &Cancel,
    ) -> Result<Supervisor, OwnerError> {
        let mut gate = self.compute_gate.lock().await;
        if let Some(live) = gate.as_ref().filter(|live| live.link.gone().is_none()) {
            return Ok(live.clone());
        }
        let made = self.start_supervisor(cancel).await?;
        *gate = Some(made.clone());
        // Checked with the gate held: a stop that began before this sees the supervisor kept
        // here once it takes the gate (`close_supervisor`), or this sees the stop.
        if self.stop_begun.load(Ordering::SeqCst) {
            made.link.close(stopped());
            return Err(stopped());
        }
        Ok(made)
    }

    /// At a stop, once compute was killed: the supervisor's connection is ended from the host's
    /// side, so its commands and file calls settle whatever the engine does with the connection.
    /// Waits for a supervisor's start in flight at most `bound`.
    pub(super) async fn close_supervisor(&self, bound: std::time::Duration) {
        if let Ok(mut gate) = tokio::time::timeout(bound, self.compute_gate.lock()).await {
            if let Some(supervisor) = gate.take() {
                supervisor.link.close(stopped());
            }
        }
    }

    /// The supervisor as the process container's entry, or, when the reserved process is that
    /// entry already, by exec beside it (it then ends with the process's container). Called
    /// with the gate held.
    async fn start_supervisor(self: &Arc<Self>, cancel: &Cancel) -> Result<Supervisor, OwnerError> {
        let (helper, compute) = {
            let state = self.state.lock().await;
            (state.helper, state.compute.clone())
        };
        let helper =
            helper.ok_or_else(|| OwnerError::state("the process needs a started sandbox"))?;
        let (id, attached) = match compute {
            Some(id) => {
                let attached = self.exec_supervisor(&id).await?;
                (id, attached)
            }
            None => {
                let image =
                    ensure_supervised_image(&self.settings.docker, &self.settings.image_id, helper)
                        .await?;
                let (user, cap_add, arguments) = entry_supervisor(&self.settings.user);
                let launch = Launch {
                    image,
                    user,
                    cap_add,
                    entrypoint: vec![HELPER_PATH.to_owned()],
                    cmd: arguments,
                    env: environment(&[]),
                    cwd: WORKSPACE.to_owned(),
                    stdin_once: true,
                    entry_is_init: true,
                };
                let id = self.create_compute(launch, cancel).await?;
                let attached = self.attach_and_start(&id, cancel).await?;
                (id, attached)
            }
        };
        Ok(Supervisor {
            id,
            link: Link::new(attached.input, frames_of(attached.output)),
        })
    }

    /// Runs the supervisor by exec in the running process container `id` (beside a reserved
    /// process, or where a supervisor whose connection was lost was the entry), started as the
    /// entry supervisor is: that container was started as root with the two capabilities too
    /// (`process.rs`), which the engine gives an exec as root there.
    async fn exec_supervisor(&self, id: &str) -> Result<Attached, OwnerError> {
        let docker = &self.settings.docker;
        let (user, _, arguments) = entry_supervisor(&self.settings.user);
        let cmd: Vec<&str> = std::iter::once(HELPER_PATH)
            .chain(arguments.iter().map(String::as_str))
            .collect();
        let env = environment(&[]);
        let created = tokio::time::timeout(
            REQUEST_TIMEOUT,
            docker.create_exec(
                id,
                CreateExecOptions {
                    cmd: Some(cmd),
                    env: Some(env.iter().map(String::as_str).collect()),
                    working_dir: Some(WORKSPACE),
                    attach_stdin: Some(true),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    user: Some(user.as_str()),
                    ..Default::default()
                },
            ),
        )
        .await
        .map_err(|_| {
            OwnerError::driver(
                "starting the session supervisor beside the process: the engine did not answer",
            )
        })?
        .map_err(|e| {
            if is_not_running(&e) {
                // Its entry ended (the reserved process exited, or the supervisor was killed
                // from inside): nothing runs in it again.
                OwnerError::operation(
                    OperationCode::DriverFailure,
                    "the sandbox's process container is no longer running (its process or its \
                     session supervisor ended): no command or file call can run in it; stop and \
                     destroy the sandbox, and start another",
                )
            } else {
                engine_error("starting the session supervisor beside the process", e)
            }
        })?;
        let hijacked = self
            .settings
            .dialer
            .start_exec(&created.id, REQUEST_TIMEOUT)
            .await
            .map_err(|e| attach_error("the session supervisor", &e))?;
        Ok(Attached {
            output: demultiplexed(hijacked.output),
            input: Box::pin(hijacked.input),
        })
    }

    /// Starts `spawn` (its environment after the fixed one) through the supervisor, made first
    /// if need be. A stop that came first is the stop's answer, not the supervisor's.
    pub(super) async fn spawn_supervised(
        self: &Arc<Self>,
        spawn: Spawn,
        cancel: &Cancel,
    ) -> Result<(Supervisor, Spawned), OwnerError> {
        let supervisor = self.supervisor(cancel).await?;
        cancel.check()?;
        match supervisor.link.spawn(with_fixed_environment(spawn)).await {
            Ok(spawned) => Ok((supervisor, spawned)),
            Err(_) if cancel.is_cancelled() || self.state.lock().await.stopped_by_owner => Err(
                OwnerError::cancelled("the sandbox stopped before the command started"),
            ),
            Err(error) => Err(error),
        }
    }

    /// A supervised command's channels as the owner runs them: its output ends, rather than
    /// fails, when the supervisor's connection ends because a stop killed compute (the owner
    /// says why), and its exit is `supervised_exit`'s.
    pub(super) fn owned_channels(
        self: &Arc<Self>,
        supervisor: Supervisor,
        channels: ProcessChannels,
        control: CommandControl,
    ) -> ProcessChannels {
        let stop_begun = Arc::clone(&self.stop_begun);
        let output = channels
            .output
            .take_while(move |event| {
                futures::future::ready(event.is_ok() || !stop_begun.load(Ordering::SeqCst))
            })
            .boxed();
        ProcessChannels {
            input: channels.input,
            output,
            exit: Arc::clone(self).supervised_exit(supervisor.id, channels.exit, control),
        }
    }

    /// A supervised command's fate as the owner reports it: `Unavailable` once a stop removed
    /// compute, a `SIGKILL` the kernel sent for memory `OutOfMemory` (the engine's word is for the
    /// whole container, so one memory kill earlier colours a later SIGKILL the host did not
    /// send), else its wait status.
    fn supervised_exit(
        self: Arc<Self>,
        id: String,
        exit: BoxFuture<'static, ProcessExit>,
        control: CommandControl,
    ) -> BoxFuture<'static, ProcessExit> {
        async move {
            let fate = exit.await;
            if self.state.lock().await.stopped_by_owner {
                return ProcessExit::Unavailable;
            }
            // A SIGKILL the host sent (kill, a deadline, an abort, a stream limit) is its own.
            if control.killed_by_host() {
                return fate;
            }
            memory_kill_told(&self.settings.docker, &id, fate).await
        }
        .boxed()
    }
}

fn stopped() -> OwnerError {
    OwnerError::cancelled("the sandbox stopped: its session supervisor was ended")
}

/// The supervisor as the process container's entry: its user, capabilities and arguments.
fn entry_supervisor(sandbox_user: &str) -> (String, Vec<String>, Vec<String>) {
    let capabilities = supervisor_capabilities(sandbox_user);
    if capabilities.is_empty() {
        return (
            sandbox_user.to_owned(),
            capabilities,
            supervise_arguments(&[]),
        );
    }
    let separate = ["--as-user".to_owned(), sandbox_user.to_owned()];
    (
        ENTRY_START_USER.to_owned(),
        capabilities,
        supervise_arguments(&separate),
    )
}

/// The helper's arguments for supervising: `first`, then the guest's file roots.
fn supervise_arguments(first: &[String]) -> Vec<String> {
    std::iter::once("--supervise".to_owned())
        .chain(first.iter().cloned())
        .chain(["--roots", WORKSPACE, HOME, TMPDIR].map(str::to_owned))
        .collect()
}

/// `KEY=value` pairs: the fixed environment, then `extra`.
pub(super) fn environment(extra: &[(String, String)]) -> Vec<String> {
    fixed_environment()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .chain(extra.iter().map(|(k, v)| format!("{k}={v}")))
        .collect()
}
