//! Running the workspace helper: the holder is started with the helper as its entrypoint
//! (`seed.rs`), attached first so none of its output is lost; a holder whose entrypoint is the
//! egress gateway (`gateway.rs`), which runs all along, runs the helper by exec instead, its
//! streams on the exec's start, its exit read from the exec and its stop asked of the helper's
//! `--stop-transfers` mode (the engine cannot signal an exec, and killing the holder would end
//! the gateway). One run at a time per sandbox: a run holds the reservation's helper permit
//! from its start until its exit is known (or its kill was sent), so a late kill of an
//! abandoned run can never reach the next one. Exports (`export_helper.rs`) and imports
//! (`import_helper.rs`) relay its streams.

use std::sync::Arc;
use std::time::Duration;

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::{KillContainerOptionsBuilder, WaitContainerOptionsBuilder};
use bollard::Docker;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::gateway_watch::stopped;
use super::DockerSandbox;
use crate::docker::attach::{attach_streams, Attached};
use crate::docker::demux::demultiplexed;
use crate::docker::engine::{engine_error, is_not_found, with_causes, REQUEST_TIMEOUT};
use crate::docker::seed::HELPER_PATH;
use crate::lifecycle::error::OwnerError;

/// How long the helper may take to exit once its streams ended, and how long killing an
/// abandoned helper may take, before the transfer gives up on it.
pub(super) const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long a transfer waits for the previous run to release the holder: at most four waits of
/// `EXIT_WAIT` and one `STOP_GRACE` (an export's request writer, then the helper's output and
/// exit, then its kill's two signals; an import's relay waits less), with room to spare. A kill
/// beside a gateway takes at most `EXIT_WAIT` and three `STOP_GRACE` instead of two `EXIT_WAIT`
/// and one.
const PERMIT_WAIT: Duration = Duration::from_secs(5 * EXIT_WAIT.as_secs());
/// How long a helper told to stop (SIGTERM) may take to put its modes back and exit.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The helper's stderr kept for the error message when it fails.
pub(super) const STDERR_BYTES: usize = 4 * 1_024;

/// How often an exec's state is asked while waiting for its exit.
const EXEC_POLL: Duration = Duration::from_millis(25);
/// The helper's mode that stops the transfer runs in a gateway holder, given `STOP_GRACE` in
/// milliseconds (`helper/src/stop_transfers.rs`).
const STOP_TRANSFERS: &str = "--stop-transfers";

/// One started run of the helper: its process, its attached streams, and the permit that keeps
/// the next run waiting until this one is over (drop it only once the helper's exit is known or
/// its kill was sent).
pub(super) struct HelperRun {
    pub process: HelperProcess,
    pub attached: Attached,
    pub permit: OwnedSemaphorePermit,
}

/// The permit a reservation's helper runs share: one run at a time.
pub(super) fn helper_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(1))
}

/// What the next run by exec must know of the last one: its exec (to tell whether it is over)
/// and why stopping it failed, if it did. Only read and written between awaits.
#[derive(Default)]
pub(super) struct ExecHistory {
    last: Option<String>,
    stop_failure: Option<String>,
}

pub(super) type SharedExecHistory = Arc<std::sync::Mutex<ExecHistory>>;

/// Where one run's helper runs.
#[derive(Clone)]
pub(super) struct HelperProcess {
    pub docker: Docker,
    pub holder: String,
    /// For a run by exec in a gateway holder: the exec, and the user transfers run as.
    exec: Option<(String, String)>,
    history: SharedExecHistory,
}

/// How a holder runs the helper, from its entrypoint.
#[derive(Debug, PartialEq)]
enum HelperKind {
    /// The helper is the entrypoint: each run starts the holder.
    Entrypoint,
    /// The egress gateway is the entrypoint: each run is an exec beside it.
    Exec,
    /// No helper (a holder made by an earlier version).
    None,
}

fn helper_kind(entrypoint: Option<&[String]>) -> HelperKind {
    match entrypoint {
        Some([path]) if path == HELPER_PATH => HelperKind::Entrypoint,
        Some([path, mode, ..]) if path == HELPER_PATH && mode == super::gateway::GATEWAY_MODE => {
            HelperKind::Exec
        }
        _ => HelperKind::None,
    }
}

impl DockerSandbox {
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
        let kind = helper_kind(
            inspect
                .config
                .as_ref()
                .and_then(|config| config.entrypoint.as_deref()),
        );
        if kind == HelperKind::None {
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
        if kind == HelperKind::Exec {
            if let Some(gone) = stopped(inspect.state.as_ref(), &self.gateway_words) {
                return unavailable(format!(
                    "{}: transfers run beside it, so this sandbox has none from now on (destroy it); {}",
                    gone.summary(),
                    gone.words()
                ));
            }
        }
        // Asked again now that the permit is held: a previous run that gave up on its
        // helper's exit or kill released the permit with the helper perhaps still running
        // (the holder itself, or the last exec beside a gateway, which runs all along).
        let (last_exec, stop_failure) = match self.exec_history.lock() {
            Ok(history) => (history.last.clone(), history.stop_failure.clone()),
            Err(_) => (None, None),
        };
        let previous = HelperProcess {
            docker: docker.clone(),
            holder: holder.clone(),
            exec: last_exec.map(|exec| (exec, self.settings.user.clone())),
            history: self.exec_history.clone(),
        };
        let no_previous_exec = kind == HelperKind::Exec && previous.exec.is_none();
        if !no_previous_exec && !previous.stopped_within(EXIT_WAIT).await {
            return unavailable(format!(
                "the previous transfer's helper did not stop within {} s{}",
                EXIT_WAIT.as_secs(),
                stop_failure.map_or(String::new(), |why| format!(" (stopping it: {why})"))
            ));
        }
        let started = match kind {
            HelperKind::Exec => self.start_exec(&holder).await,
            _ => start_entrypoint(&self.settings.dialer, &docker, &holder)
                .await
                .map(|attached| (attached, None)),
        };
        let (attached, exec) = match started {
            Ok(started) => started,
            Err(why) => return unavailable(why),
        };
        if let Ok(mut history) = self.exec_history.lock() {
            *history = ExecHistory {
                last: exec.clone(),
                stop_failure: None,
            };
        }
        Ok(Some(HelperRun {
            process: HelperProcess {
                docker,
                holder,
                exec: exec.map(|exec| (exec, self.settings.user.clone())),
                history: self.exec_history.clone(),
            },
            attached,
            permit,
        }))
    }

    /// Runs the helper by exec in a gateway holder, its streams attached from its start.
    async fn start_exec(&self, holder: &str) -> Result<(Attached, Option<String>), String> {
        let docker = &self.settings.docker;
        let exec = tokio::time::timeout(
            REQUEST_TIMEOUT,
            docker.create_exec(
                holder,
                CreateExecOptions {
                    cmd: Some(vec![HELPER_PATH]),
                    attach_stdin: Some(true),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    user: Some(self.settings.user.as_str()),
                    ..Default::default()
                },
            ),
        )
        .await
        .map_err(|_| {
            "running the workspace helper beside the egress gateway: no answer".to_owned()
        })?
        .map_err(|e| {
            format!(
                "running the workspace helper beside the egress gateway: {}",
                with_causes(&e)
            )
        })?;
        let hijacked = self
            .settings
            .dialer
            .start_exec(&exec.id, REQUEST_TIMEOUT)
            .await
            .map_err(|e| format!("starting the workspace helper: {}", with_causes(&e)))?;
        Ok((
            Attached {
                output: demultiplexed(hijacked.output),
                input: Box::pin(hijacked.input),
            },
            Some(exec.id),
        ))
    }
}

/// Attaches to the holder, then starts it: its entrypoint is the helper.
async fn start_entrypoint(
    dialer: &crate::docker::dialer::Dialer,
    docker: &Docker,
    holder: &str,
) -> Result<Attached, String> {
    let attached = attach_streams(dialer, holder)
        .await
        .map_err(|e| format!("attaching to the workspace helper: {}", with_causes(&e)))?;
    docker
        .start_container(holder, None)
        .await
        .map_err(|e| format!("starting the workspace helper: {}", with_causes(&e)))?;
    Ok(attached)
}

impl HelperProcess {
    /// Whether the helper is not running within `bound` (an error reads as not stopped; an exec
    /// the engine no longer knows is over).
    async fn stopped_within(&self, bound: Duration) -> bool {
        match &self.exec {
            None => stopped_within(&self.docker, &self.holder, bound).await,
            Some((exec, _)) => matches!(
                exec_exit(&self.docker, exec, bound).await,
                Ok(Some(_)) | Err(ExecGone)
            ),
        }
    }

    /// The helper's exit status once it is not running, within `bound`: `Ok(None)` past it.
    async fn exit_code(&self, bound: Duration) -> Result<Option<i64>, String> {
        match &self.exec {
            None => container_exit(&self.docker, &self.holder, bound).await,
            Some((exec, _)) => exec_exit(&self.docker, exec, bound)
                .await
                .map_err(|ExecGone| "the engine no longer knows its exec".to_owned()),
        }
    }

    /// Stops an abandoned helper: SIGTERM, then SIGKILL when it still runs `STOP_GRACE` later;
    /// each engine call bounded by `EXIT_WAIT` (a holder already gone or stopped is fine).
    pub async fn kill(&self) {
        match &self.exec {
            None => kill_entrypoint(&self.docker, &self.holder).await,
            Some((exec, user)) => {
                // The helper's `--stop-transfers` sends both signals itself, `STOP_GRACE`
                // apart, and ends once no transfer run is left (or gives up another
                // `STOP_GRACE` later); its failure is kept for the next run's error.
                let bound = EXIT_WAIT + 2 * STOP_GRACE;
                let failure = match tokio::time::timeout(bound, self.stop_transfers(user)).await {
                    Ok(Ok(())) => None,
                    Ok(Err(why)) => Some(why),
                    Err(_) => Some(format!("no end within {} s", bound.as_secs())),
                };
                if let Ok(mut history) = self.history.lock() {
                    history.stop_failure = failure;
                }
                // Whatever the stop said, the run's own exec says whether it is over; the
                // next run asks again (`start_helper`).
                let _ = exec_exit(&self.docker, exec, STOP_GRACE).await;
            }
        }
    }

    /// Runs the helper's `--stop-transfers` beside the gateway, to its end.
    async fn stop_transfers(&self, user: &str) -> Result<(), String> {
        let grace = STOP_GRACE.as_millis().to_string();
        let run = run_mode(
            &self.docker,
            &self.holder,
            user,
            &[STOP_TRANSFERS, &grace],
            0,
        )
        .await?;
        if run.code == 0 {
            return Ok(());
        }
        Err(format!(
            "exit status {}: {}",
            run.code,
            String::from_utf8_lossy(&run.stderr).trim()
        ))
    }
}

/// What a helper mode run by exec said: its exit status, its stdout (as much as asked) and
/// its stderr (up to `STDERR_BYTES`).
pub(super) struct ModeRun {
    pub code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs the helper with `args` by exec in `holder` as `user`, to its end, keeping at most
/// `stdout_max` bytes of its stdout; the caller bounds the whole run (its exit, once its output
/// ended, within `EXIT_WAIT`). An error says which step failed.
pub(super) async fn run_mode(
    docker: &Docker,
    holder: &str,
    user: &str,
    args: &[&str],
    stdout_max: usize,
) -> Result<ModeRun, String> {
    let cmd = std::iter::once(HELPER_PATH)
        .chain(args.iter().copied())
        .collect();
    let created = docker
        .create_exec(
            holder,
            CreateExecOptions {
                cmd: Some(cmd),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                user: Some(user),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("creating its exec: {}", with_causes(&e)))?;
    let started = docker
        .start_exec(&created.id, None)
        .await
        .map_err(|e| format!("starting its exec: {}", with_causes(&e)))?;
    let StartExecResults::Attached { mut output, .. } = started else {
        return Err("its exec was not attached".into());
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    while let Some(item) = output.next().await {
        match item {
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                let room = stdout_max.saturating_sub(stdout.len());
                stdout.extend_from_slice(&message[..message.len().min(room)]);
            }
            Ok(bollard::container::LogOutput::StdErr { message }) => {
                keep_stderr(&mut stderr, &message)
            }
            Ok(_) => {}
            Err(e) => return Err(format!("reading its output: {}", with_causes(&e))),
        }
    }
    match exec_exit(docker, &created.id, EXIT_WAIT).await {
        Ok(Some(code)) => Ok(ModeRun {
            code,
            stdout,
            stderr,
        }),
        Ok(None) => Err("its exit is unknown".into()),
        Err(ExecGone) => Err("the engine no longer knows its exec".into()),
    }
}

/// The engine no longer knows the exec (it forgets exited ones after a while).
#[derive(Debug)]
struct ExecGone;

/// The exit code of exec `id` once it is not running, asked every `EXEC_POLL` within `bound`:
/// `Ok(None)` past it or when the engine cannot be asked.
async fn exec_exit(docker: &Docker, id: &str, bound: Duration) -> Result<Option<i64>, ExecGone> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match tokio::time::timeout_at(deadline, docker.inspect_exec(id)).await {
            Err(_) => return Ok(None),
            Ok(Err(e)) if is_not_found(&e) => return Err(ExecGone),
            Ok(Err(_)) => {}
            // Not running yet (the engine answers the start before it runs the process) has
            // no exit code: asked again.
            Ok(Ok(inspect)) if inspect.running != Some(true) && inspect.exit_code.is_some() => {
                return Ok(inspect.exit_code);
            }
            Ok(Ok(_)) => {}
        }
        if tokio::time::Instant::now() + EXEC_POLL >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(EXEC_POLL).await;
    }
}

/// Whether `holder` is not running within `bound` (an error reads as not stopped).
async fn stopped_within(docker: &Docker, holder: &str, bound: Duration) -> bool {
    matches!(container_exit(docker, holder, bound).await, Ok(Some(_)))
}

/// The exit status of `holder` once it is not running, within `bound`: `Ok(None)` past it.
async fn container_exit(
    docker: &Docker,
    holder: &str,
    bound: Duration,
) -> Result<Option<i64>, String> {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut waits = docker.wait_container(holder, Some(options));
    match tokio::time::timeout(bound, waits.next()).await {
        Ok(Some(Ok(exit))) => Ok(Some(exit.status_code)),
        // bollard reports a non-zero exit as an error carrying the code.
        Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => {
            Ok(Some(code))
        }
        Ok(Some(Err(e))) => Err(with_causes(&e)),
        Ok(None) | Err(_) => Ok(None),
    }
}

/// Why the helper failed, once it exited; `None` when it exited 0. A helper that does not exit
/// within `EXIT_WAIT` is killed.
pub(super) async fn exit_failure(process: &HelperProcess, stderr: &[u8]) -> Option<String> {
    let code = match process.exit_code(EXIT_WAIT).await {
        Ok(Some(code)) => code,
        Err(why) => return Some(format!("the workspace helper's exit is unknown: {why}")),
        Ok(None) => {
            process.kill().await;
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
    process: &HelperProcess,
    rest: impl std::future::Future<Output = ()>,
) {
    let deadline = tokio::time::Instant::now() + EXIT_WAIT;
    let stopped = tokio::time::timeout_at(deadline, rest).await.is_ok()
        && process
            .stopped_within(deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await;
    if !stopped {
        process.kill().await;
    }
}

/// Stops a holder whose entrypoint is the helper: SIGTERM, then SIGKILL when it still runs
/// `STOP_GRACE` later; each engine call bounded by `EXIT_WAIT`.
async fn kill_entrypoint(docker: &Docker, holder: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_entrypoint_says_how_the_helper_runs() {
        let bare = strings(&[HELPER_PATH]);
        let gateway = strings(&[HELPER_PATH, super::super::gateway::GATEWAY_MODE, "--subnet"]);
        let other_mode = strings(&[HELPER_PATH, "--egress-report"]);
        let other = strings(&["/bin/sh"]);
        assert_eq!(helper_kind(Some(&bare)), HelperKind::Entrypoint);
        assert_eq!(helper_kind(Some(&gateway)), HelperKind::Exec);
        assert_eq!(helper_kind(Some(&other_mode)), HelperKind::None);
        assert_eq!(helper_kind(Some(&other)), HelperKind::None);
        assert_eq!(helper_kind(Some(&[])), HelperKind::None);
        assert_eq!(helper_kind(None), HelperKind::None);
    }
}
