//! Sessions: commands and file calls beside the one process, admitted only while compute is
//! ready. Each runs under the sessions' cancellation, which a stop fires as it begins (nothing is
//! admitted after it), and under its caller's; a command's streams are the same `ProcessIo` as
//! the process's, with the policy's stream limits, and a limit a command crosses ends that
//! command (its process group is killed), never the sandbox.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use session_frames::{Signal, Spawn};

use super::SandboxOwner;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{GuestRoots, OutputStream, ProcessExit, StartedCommand};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::observe::{enter, observe, sleep_exactly, Observed};
use crate::lifecycle::state::State;
use crate::policy::request::StreamLimits;
use crate::process::io::ProcessIo;
use crate::process::supervised::{CommandControl, Link};

/// A started command as its caller holds it.
#[derive(Clone)]
pub struct Command {
    pub pid: u32,
    pub io: Arc<ProcessIo>,
    pub control: CommandControl,
}

/// What ended a command from the host's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Deadline,
    Aborted,
}

/// What `run` collected.
pub struct Collected {
    pub exit: ProcessExit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// How much of a stream `run` asks for at once.
const COLLECT_READ: usize = 256 * 1024;

impl Command {
    /// Ends the command's process group at `deadline` (from now) or when `abort` fires,
    /// whichever comes first before it exits: SIGTERM, then SIGKILL `grace` later unless it
    /// exited meanwhile. The returned cell says what ended it, once something did.
    pub fn watch(
        &self,
        deadline: Option<Duration>,
        grace: Duration,
        abort: Cancel,
    ) -> Arc<Mutex<Option<Ending>>> {
        let ended = Arc::new(Mutex::new(None));
        let cell = Arc::clone(&ended);
        let command = self.clone();
        tokio::spawn(async move {
            let at_deadline = async {
                match deadline {
                    Some(deadline) => sleep_exactly(deadline).await,
                    None => futures::future::pending().await,
                }
            };
            let ending = tokio::select! {
                _ = command.io.exit() => return,
                () = at_deadline => Ending::Deadline,
                _ = abort.cancelled() => Ending::Aborted,
            };
            *cell.lock().unwrap_or_else(PoisonError::into_inner) = Some(ending);
            command.control.signal(Signal::Term);
            tokio::select! {
                _ = command.io.exit() => {}
                () = tokio::time::sleep(grace) => command.control.signal(Signal::Kill),
            }
        });
        ended
    }

    /// Writes `input` then EOF, and collects both streams whole until the command exits. A
    /// stream past `max_per_stream` bytes ends the command (SIGKILL to its group) and fails
    /// with `output_limit`; nothing past the bound is kept.
    pub async fn collect(
        &self,
        input: Vec<u8>,
        max_per_stream: u64,
    ) -> Result<Collected, OwnerError> {
        let feed = async {
            // A command that exits without reading its input is no failure of `run`.
            if !input.is_empty() {
                let _ = self.io.write(&input).await;
            }
            let _ = self.io.end().await;
        };
        let read = |stream: OutputStream| async move {
            let mut bytes = Vec::new();
            while let Some(chunk) = self.io.read(stream, COLLECT_READ).await? {
                if (bytes.len() + chunk.len()) as u64 > max_per_stream {
                    self.control.signal(Signal::Kill);
                    self.io.discard(OutputStream::Stdout).await;
                    self.io.discard(OutputStream::Stderr).await;
                    return Err(OwnerError::operation(
                        OperationCode::OutputLimit,
                        format!(
                            "the command's {} passed maxOutputBytes ({max_per_stream} bytes): the command was ended",
                            stream.name()
                        ),
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(bytes)
        };
        let ((), stdout, stderr) =
            tokio::join!(feed, read(OutputStream::Stdout), read(OutputStream::Stderr));
        let (stdout, stderr) = (stdout?, stderr?);
        Ok(Collected {
            exit: self.io.exit().await,
            stdout,
            stderr,
        })
    }
}

impl SandboxOwner {
    /// Whether this owner's driver runs commands and file calls beside its process.
    pub fn sessions_supported(&self) -> bool {
        self.inner.driver.guest_roots().is_some()
    }

    /// The sessions' cancellation, while compute is ready.
    fn admit_session(&self) -> Result<(Cancel, GuestRoots), OwnerError> {
        let Some(roots) = self.inner.driver.guest_roots() else {
            return Err(OwnerError::Unsupported(
                "this backend runs no commands or file calls beside the sandbox's process (its support.sessions is false)".into(),
            ));
        };
        let mut core = self.core();
        if core.state != State::Ready {
            return Err(OwnerError::state(format!(
                "commands and file calls need a started sandbox whose stop has not begun; it is {}",
                core.state.kind()
            )));
        }
        Ok((core.sessions.get_or_insert_with(Cancel::new).clone(), roots))
    }

    /// Starts `spawn` within `deadlines.startupMs`, under the sessions' and the caller's
    /// cancellation, its streams under `limits`. A start the caller gave up on that still
    /// started is killed when it does.
    pub async fn start_command(
        &self,
        spawn: Spawn,
        limits: StreamLimits,
        caller: Option<Cancel>,
    ) -> Result<Command, OwnerError> {
        let (sessions, _) = self.admit_session()?;
        let driver = Arc::clone(&self.inner.driver);
        let cancel = sessions.clone();
        // Shared observation needs a clonable output: the command goes in a slot.
        let actual = enter(async move {
            driver
                .start_command(spawn, cancel)
                .await
                .map(|started| Arc::new(Mutex::new(Some(started))))
        });
        let mut cancels = vec![sessions];
        cancels.extend(caller);
        let slot = match observe(
            actual.clone(),
            Some(self.startup_limit()),
            &cancels,
            "the command's start",
        )
        .await
        {
            Observed::Settled(settled) => settled?,
            Observed::Interrupted(why) => {
                tokio::spawn(async move {
                    if let Ok(slot) = actual.await {
                        if let Some(started) = take(&slot) {
                            started.control.signal(Signal::Kill);
                        }
                    }
                });
                return Err(why);
            }
        };
        let Some(StartedCommand {
            pid,
            channels,
            control,
        }) = take(&slot)
        else {
            return Err(OwnerError::cancelled(
                "the command's start was already taken",
            ));
        };
        let ends = control.clone();
        let io = ProcessIo::new(
            channels,
            limits,
            Arc::new(move |_limit| ends.signal(Signal::Kill)),
        );
        Ok(Command { pid, io, control })
    }

    /// Runs `call` on the supervisor's connection (made first if need be), under the sessions'
    /// and the caller's cancellation: either fired ends the call with its reason.
    pub async fn file_call<T: Send + 'static>(
        &self,
        caller: Option<Cancel>,
        call: impl FnOnce(Link, GuestRoots) -> BoxFuture<'static, Result<T, OwnerError>>,
    ) -> Result<T, OwnerError> {
        let (sessions, roots) = self.admit_session()?;
        let driver = Arc::clone(&self.inner.driver);
        let cancel = sessions.clone();
        let link = enter(async move { driver.file_link(cancel).await });
        let mut cancels = vec![sessions];
        cancels.extend(caller);
        let link = match observe(
            link,
            Some(self.startup_limit()),
            &cancels,
            "the sandbox's supervisor start",
        )
        .await
        {
            Observed::Settled(settled) => settled?,
            Observed::Interrupted(why) => return Err(why),
        };
        let work = call(link, roots);
        tokio::select! {
            biased;
            why = first_fired(&cancels) => Err(why),
            done = work => done,
        }
    }
}

fn take(slot: &Mutex<Option<StartedCommand>>) -> Option<StartedCommand> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// The reason of the first of `cancels` to fire.
async fn first_fired(cancels: &[Cancel]) -> OwnerError {
    let waits: Vec<_> = cancels
        .iter()
        .map(|cancel| Box::pin(cancel.cancelled()))
        .collect();
    futures::future::select_all(waits).await.0
}
