//! The controller's side of the reaper: one reaper process per controller process, started at
//! the first `in_process` sandbox's first checkpoint and linked by a pipe to its stdin.
//!
//! Invariants:
//! - A sandbox's record reaches the pipe before the effect it announces: `register` resolves
//!   only once the writer wrote the line (bounded by `WRITE_BOUND`), and the pipe keeps what
//!   was written even if this process dies the next instant.
//! - The link remembers every registered sandbox until `forget`; a reaper that is replaced (it
//!   died, or the runtime that wrote to it shut down) is told all of them again before anything
//!   newer, so no replacement ever knows less than its predecessor.
//! - The state lock is never held across an `.await`: writes go through the writer task's
//!   channel, and callers only wait for its acknowledgement.
//! - The reaper runs in a process group of its own, so a terminal's Ctrl-C (SIGINT to the
//!   foreground group) ends the controller but never the reaper.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::super::options::Engine;
use super::wire::{encode, Message};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::SandboxRecoveryRecord;

/// How long a checkpoint waits for its record to reach the reaper's pipe (the reaper started,
/// if it was not running) before the start fails: a write to a live reaper takes microseconds.
pub const WRITE_BOUND: Duration = Duration::from_secs(10);

/// How long a reaper that died waits before its replacement starts (only while sandboxes are
/// registered; a reaper that cannot run does not spin).
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// The command that runs a reaper: the Node.js executable and the package's reaper script.
pub type ReaperCommand = Vec<String>;

pub struct ReaperLink {
    command: ReaperCommand,
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// Every engine a registered sandbox may live on, by index (lines already encoded).
    engines: Vec<(Engine, String)>,
    /// Every registered sandbox's latest record line, by sandbox id.
    live: BTreeMap<String, String>,
    /// The running writer task's queue; `None` until the first registration, or after the
    /// writer ended with nothing registered.
    writer: Option<mpsc::UnboundedSender<Outgoing>>,
}

struct Outgoing {
    line: String,
    written: Option<oneshot::Sender<Result<(), String>>>,
}

/// A backend's handle on the process's reaper: the link and the engine its sandboxes live on.
#[derive(Clone)]
pub struct ReaperEntry {
    link: Arc<ReaperLink>,
    engine: u32,
}

/// The process's link, made with the first backend's command (every backend of a process runs
/// the same package's reaper).
pub fn shared(command: ReaperCommand) -> Arc<ReaperLink> {
    static LINK: OnceLock<Arc<ReaperLink>> = OnceLock::new();
    Arc::clone(LINK.get_or_init(|| {
        Arc::new(ReaperLink {
            command,
            state: Mutex::new(LinkState::default()),
        })
    }))
}

impl ReaperLink {
    fn state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry for sandboxes on `engine` (resolved: never `Engine::Default`).
    pub fn entry(self: &Arc<Self>, engine: Engine) -> Result<ReaperEntry, OwnerError> {
        let mut state = self.state();
        if let Some(index) = state.engines.iter().position(|(e, _)| *e == engine) {
            return Ok(ReaperEntry {
                link: Arc::clone(self),
                engine: index as u32,
            });
        }
        let index = state.engines.len() as u32;
        let line = encode(&Message::Engine {
            index,
            engine: engine.clone(),
        })
        .ok_or_else(|| OwnerError::driver("the reaper needs the engine resolved"))?;
        state.engines.push((engine, line.clone()));
        if let Some(writer) = &state.writer {
            // A writer that ended replays every engine to its successor.
            let _ = writer.send(Outgoing {
                line,
                written: None,
            });
        }
        Ok(ReaperEntry {
            link: Arc::clone(self),
            engine: index,
        })
    }

    /// The writer's queue, starting a writer (and with it a reaper) when none runs. Must be
    /// called with the state locked, so what the new writer replays and what is queued after
    /// it are in order.
    fn writer(self: &Arc<Self>, state: &mut LinkState) -> mpsc::UnboundedSender<Outgoing> {
        if let Some(writer) = &state.writer {
            if !writer.is_closed() {
                return writer.clone();
            }
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        state.writer = Some(sender.clone());
        tokio::spawn(run_writer(Arc::downgrade(self), receiver));
        sender
    }

    /// Everything a new reaper is told first: the engines, then every registered sandbox.
    fn replay(&self) -> Vec<String> {
        let state = self.state();
        state
            .engines
            .iter()
            .map(|(_, line)| line.clone())
            .chain(state.live.values().cloned())
            .collect()
    }
}

impl ReaperEntry {
    /// Tells the reaper `record` (before the effect it announces) and waits until it is in the
    /// pipe, within `WRITE_BOUND`.
    pub async fn register(&self, record: &SandboxRecoveryRecord) -> Result<(), OwnerError> {
        let line = encode(&Message::Sandbox {
            engine: self.engine,
            record: record.clone(),
        })
        .ok_or_else(|| OwnerError::driver("the reaper's record could not be encoded"))?;
        let (written, acknowledged) = oneshot::channel();
        {
            let mut state = self.link.state();
            state.live.insert(record.sandbox_id.clone(), line.clone());
            let writer = self.link.writer(&mut state);
            // A writer that ended between `writer()` and here replays `live` to its successor,
            // which this line is part of; the acknowledgement below then reports the failure.
            let _ = writer.send(Outgoing {
                line,
                written: Some(written),
            });
        }
        let failed = |why: String| {
            OwnerError::driver(format!(
                "the reaper did not take the sandbox's record ({why}); set reaper: false to run without one"
            ))
        };
        match tokio::time::timeout(WRITE_BOUND, acknowledged).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(why))) => Err(failed(why)),
            Ok(Err(_)) => Err(failed("the reaper's writer ended".into())),
            Err(_) => Err(failed(format!(
                "not written within {} s",
                WRITE_BOUND.as_secs()
            ))),
        }
    }

    /// The sandbox was destroyed: the reaper forgets it (never waited for: a reaper that does
    /// not hear it finds nothing of the sandbox to remove).
    pub fn forget(&self, sandbox_id: &str) {
        let mut state = self.link.state();
        if state.live.remove(sandbox_id).is_none() {
            return;
        }
        if let (Some(writer), Some(line)) = (
            &state.writer,
            encode(&Message::Forget {
                sandbox_id: sandbox_id.to_owned(),
            }),
        ) {
            let _ = writer.send(Outgoing {
                line,
                written: None,
            });
        }
    }
}

/// Starts a reaper and writes to it until the link has nothing more to say; a reaper that dies
/// while sandboxes are registered is replaced (after `RESTART_DELAY`) and told everything again.
async fn run_writer(
    link: std::sync::Weak<ReaperLink>,
    mut receiver: mpsc::UnboundedReceiver<Outgoing>,
) {
    loop {
        let Some(strong) = link.upgrade() else { return };
        let command = strong.command.clone();
        let replay = strong.replay();
        drop(strong);
        let ended = match start(command).await {
            Ok(reaper) => serve(reaper, replay, &mut receiver).await,
            Err(why) => {
                crate::debug::line(&format!("reaper could not start: {why}"));
                fail_queued(&mut receiver, &why);
                Ended::Died
            }
        };
        if matches!(ended, Ended::LinkClosed) {
            return;
        }
        let Some(strong) = link.upgrade() else { return };
        {
            let mut state = strong.state();
            if state.live.is_empty() {
                // Nothing to protect: the next registration starts a new writer.
                state.writer = None;
                return;
            }
        }
        drop(strong);
        tokio::time::sleep(RESTART_DELAY).await;
    }
}

enum Ended {
    /// The link dropped its queue: this process is ending.
    LinkClosed,
    /// The reaper died or could not be written to.
    Died,
}

struct Running {
    child: Child,
    stdin: pipe::Sender,
    stdout: pipe::Receiver,
}

/// Starts the reaper (the spawn is a blocking system call, so it runs off the async threads).
async fn start(command: ReaperCommand) -> Result<Running, String> {
    let child = tokio::task::spawn_blocking(move || spawn(&command))
        .await
        .map_err(|e| e.to_string())??;
    let mut child = child;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the reaper's pipes were not made".into());
    };
    let stdin = pipe::Sender::from_owned_fd(stdin.into()).map_err(|e| e.to_string())?;
    let stdout = pipe::Receiver::from_owned_fd(stdout.into()).map_err(|e| e.to_string())?;
    crate::debug::line(&format!("reaper started (pid {})", child.id()));
    Ok(Running {
        child,
        stdin,
        stdout,
    })
}

fn spawn(command: &[String]) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    let (program, arguments) = command
        .split_first()
        .ok_or_else(|| "no reaper command".to_owned())?;
    Command::new(program)
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Its account of what it removed is debug output, seen only when asked for (this
        // process's stderr is passed explicitly: Node marks its own close-on-exec).
        .stderr(stderr_for_reaper())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{program}: {e}"))
}

fn stderr_for_reaper() -> Stdio {
    use std::os::fd::AsFd;
    if !crate::debug::enabled() {
        return Stdio::null();
    }
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

async fn serve(
    mut reaper: Running,
    replay: Vec<String>,
    receiver: &mut mpsc::UnboundedReceiver<Outgoing>,
) -> Ended {
    let mut first = String::new();
    for line in replay {
        first.push_str(&line);
        first.push('\n');
    }
    let ended = async {
        if reaper.stdin.write_all(first.as_bytes()).await.is_err() {
            return Ended::Died;
        }
        // Its one word: it runs (the addon loaded, its stdin read). A reaper that cannot run
        // fails the registrations waiting on it, rather than leaving them unprotected.
        match tokio::time::timeout(WRITE_BOUND, ready(&mut reaper.stdout)).await {
            Ok(true) => {}
            _ => return Ended::Died,
        }
        // Then it never writes again: its stdout ends only when it does.
        let mut probe = [0u8; 64];
        loop {
            tokio::select! {
                next = receiver.recv() => {
                    let Some(Outgoing { mut line, written }) = next else { return Ended::LinkClosed };
                    line.push('\n');
                    let result = reaper.stdin.write_all(line.as_bytes()).await.map_err(|e| e.to_string());
                    let failed = result.is_err();
                    if let Some(written) = written {
                        let _ = written.send(result);
                    }
                    if failed {
                        return Ended::Died;
                    }
                }
                read = reaper.stdout.read(&mut probe) => {
                    if matches!(read, Ok(0) | Err(_)) {
                        return Ended::Died;
                    }
                }
            }
        }
    }
    .await;
    if matches!(ended, Ended::Died) {
        crate::debug::line("reaper ended");
        fail_queued(receiver, "the reaper ended");
        // Collects its exit status (no zombie); a reaper still running is never waited for.
        let _ = reaper.child.try_wait();
    }
    ended
}

/// Reads the reaper's `ready` line.
async fn ready(stdout: &mut pipe::Receiver) -> bool {
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while said.len() <= READY.len() {
        match stdout.read(&mut byte).await {
            Ok(1) if byte[0] == b'\n' => return said == READY,
            Ok(1) => said.push(byte[0]),
            _ => return false,
        }
    }
    false
}

/// What a reaper writes once it runs (`src/binding/reaper.rs`).
pub const READY: &[u8] = b"ready";

/// Fails the acknowledgements already queued (their lines are replayed to the next reaper).
fn fail_queued(receiver: &mut mpsc::UnboundedReceiver<Outgoing>, why: &str) {
    while let Ok(Outgoing { written, .. }) = receiver.try_recv() {
        if let Some(written) = written {
            let _ = written.send(Err(why.to_owned()));
        }
    }
}
