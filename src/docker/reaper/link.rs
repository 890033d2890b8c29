//! The controller's side of the reaper: one reaper process per controller process, started at
//! the first `in_process` sandbox's first checkpoint and linked by a pipe to its stdin.
//!
//! Invariants:
//! - A sandbox's record is in the pipe of a reaper that said it runs before the effect the
//!   record announces: `register` resolves only once the writer wrote the line to such a reaper
//!   (bounded by `WRITE_BOUND`). The pipe keeps what was written even if this process dies the
//!   next instant. (A reaper that dies holding unread lines loses them; its replacement is told
//!   every registered sandbox again once it runs, after `RESTART_DELAY`.)
//! - The link remembers every registered sandbox until `forget`; a reaper that is replaced is
//!   told all of them again, after it said it runs and before anything newer, so no replacement
//!   knows less than its predecessor, and no line reaches a reaper that may have given up.
//! - The state lock is never held across an `.await`: writes go through the writer task's
//!   channel, and callers only wait for its acknowledgement. Every write is bounded by
//!   `WRITE_BOUND`; a reaper that does not take one is killed and waited for.
//! - The reaper runs in a process group of its own (a terminal's Ctrl-C, SIGINT to the
//!   foreground group, never reaches it), with none of this process's descriptors but its three
//!   standard ones (its stderr is this process's), and without `NODE_OPTIONS` (no preload of the
//!   controller's runs in it).
//! - No reaper is started where none can run, and none is started in a loop: a process whose
//!   `process.execPath` cannot run the reaper's script (`ReaperCommand::Unavailable`, found by
//!   `js/reaper-runtime.js`), or that was itself started as a reaper (`REAPER_PROCESS_ENV`: a
//!   bundled application's executable ran the application instead of the script), fails every
//!   registration at once, naming why, and never spawns; after `START_FAILURES_MAX` reapers in a
//!   row that never said they run, the link gives up for the life of the process, and every
//!   later registration fails at once with the last reason.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::super::options::Engine;
use super::wire::{decode, encode, Message, LINE_BYTES_MAX};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::SandboxRecoveryRecord;

/// How long a checkpoint waits for its record to reach a running reaper (the reaper started, if
/// none ran), and how long any single write to a reaper may take: a write to a live reaper takes
/// microseconds, its start well under a second.
pub const WRITE_BOUND: Duration = Duration::from_secs(10);

/// The first wait before a reaper that died (or could not start) is replaced, doubled after each
/// failure up to `RESTART_DELAY_MAX`; registrations made meanwhile fail at once. Only while
/// sandboxes are registered.
const RESTART_DELAY: Duration = Duration::from_secs(1);
const RESTART_DELAY_MAX: Duration = Duration::from_secs(60);

/// Reapers in a row that never said they run (could not be spawned, exited first, or said
/// nothing within `WRITE_BOUND`) before the link gives up for the life of the process.
pub const START_FAILURES_MAX: u32 = 3;

/// Set in every reaper's environment: a process that has it was started as a reaper, so if it
/// registers a sandbox, `process.execPath` ran an application instead of the reaper's script
/// (a bundled or single-executable application the runtime check did not recognise); its own
/// reaper would be the application again.
pub const REAPER_PROCESS_ENV: &str = "NATIVE_SANDBOX_REAPER_PROCESS";

/// What a reaper writes once it runs (`src/docker/reaper/serve.rs`), on a line of its own.
pub const READY: &[u8] = b"ready";
/// Other output a reaper's stdout may carry before `READY` (a runtime's banner) is skipped, up to
/// this much.
const READY_SEARCH_BYTES: usize = 64 * 1024;

/// How this process runs its reaper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaperCommand {
    /// The Node.js executable and the package's reaper script.
    Run(Vec<String>),
    /// Why this process cannot run one (`js/reaper-runtime.js`).
    Unavailable(String),
}

impl ReaperCommand {
    /// `self`, unless this process was started as a reaper (`marker` is its
    /// `REAPER_PROCESS_ENV`): then it can run none.
    pub fn in_process_marked(self, marker: Option<&std::ffi::OsStr>) -> Self {
        match marker {
            Some(_) => ReaperCommand::Unavailable(format!(
                "this process was started as another process's reaper ({REAPER_PROCESS_ENV} is set), so process.execPath runs this application, not the reaper's script"
            )),
            None => self,
        }
    }
}

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
    /// Which writer `writer` is (each new writer takes the next): a writer dropped late with
    /// an earlier runtime never clears what a later one holds.
    generation: u64,
    /// Reapers in a row that never said they run (across writers: a writer that ends with
    /// nothing registered does not clear it).
    failed_starts: u32,
    /// Set once `failed_starts` reached `START_FAILURES_MAX`: why every registration fails.
    given_up: Option<String>,
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
        let marker = std::env::var_os(REAPER_PROCESS_ENV);
        Arc::new(ReaperLink {
            command: command.in_process_marked(marker.as_deref()),
            state: Mutex::new(LinkState::default()),
        })
    }))
}

/// What an `in_process` sandbox can do instead of a reaper, said with every refusal.
const REMEDY: &str = "use recovery { kind: 'persisted' } (and reconcile after a crash), or set reaper: false in the backend options (and pass withSandbox a signal that Ctrl-C aborts)";

impl ReaperLink {
    fn state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry for sandboxes on `engine` (as the backend resolved it). An engine the reaper
    /// could not read back exactly is refused here, at the backend's creation, rather than
    /// leaving its sandboxes unprotected.
    pub fn entry(self: &Arc<Self>, engine: Engine) -> Result<ReaperEntry, OwnerError> {
        let mut state = self.state();
        if let Some(index) = state.engines.iter().position(|(e, _)| *e == engine) {
            return Ok(ReaperEntry {
                link: Arc::clone(self),
                engine: index as u32,
            });
        }
        let index = state.engines.len() as u32;
        let message = Message::Engine {
            index,
            engine: engine.clone(),
        };
        let refused = |why: &str| {
            OwnerError::driver(format!(
                "the reaper cannot be told this engine ({why}); set reaper: false to run without one"
            ))
        };
        let line = encode(&message).ok_or_else(|| refused("it names no engine"))?;
        if line.len() > LINE_BYTES_MAX {
            return Err(refused(
                "its address and TLS material are too large to pass on",
            ));
        }
        if decode(&line).as_ref() != Ok(&message) {
            return Err(refused("its address does not read back as written"));
        }
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
        state.generation += 1;
        tokio::spawn(run_writer(Arc::downgrade(self), receiver, state.generation));
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
    /// pipe of a running reaper, within `WRITE_BOUND`.
    /// Where no reaper can run, or the link gave up, it fails at once (nothing spawned, nothing
    /// registered).
    pub async fn register(&self, record: &SandboxRecoveryRecord) -> Result<(), OwnerError> {
        if let ReaperCommand::Unavailable(why) = &self.link.command {
            return Err(OwnerError::Unsupported(format!(
                "in_process sandboxes need a reaper, and this process cannot start one: {why}; {REMEDY}"
            )));
        }
        let line = encode(&Message::Sandbox {
            engine: self.engine,
            record: record.clone(),
        })
        .ok_or_else(|| OwnerError::driver("the reaper's record could not be encoded"))?;
        let (written, acknowledged) = oneshot::channel();
        {
            let mut state = self.link.state();
            if let Some(why) = &state.given_up {
                return Err(OwnerError::driver(format!(
                    "in_process sandboxes need a reaper, and this process gave up starting one: {why}; {REMEDY}"
                )));
            }
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

/// Set while the writer task runs: if the task is dropped with its runtime (the last Node
/// environment holding the addon exited), its reaper reaps every registered sandbox, so the link
/// forgets them (a later runtime's reaper must not be told sandboxes nobody owns any more).
struct DroppedWithRuntime {
    link: Weak<ReaperLink>,
    generation: u64,
    armed: bool,
}

impl Drop for DroppedWithRuntime {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(link) = self.link.upgrade() {
            let mut state = link.state();
            // Only while this writer is still the link's: a later runtime's is left alone.
            if state.generation == self.generation {
                state.live.clear();
                state.writer = None;
            }
        }
    }
}

/// Starts a reaper and writes to it while the link has something to say; a reaper that dies (or
/// cannot start) while sandboxes are registered is replaced after a growing delay, and told
/// everything again, until `START_FAILURES_MAX` in a row never said they run.
async fn run_writer(
    link: Weak<ReaperLink>,
    mut receiver: mpsc::UnboundedReceiver<Outgoing>,
    generation: u64,
) {
    let mut guard = DroppedWithRuntime {
        link: link.clone(),
        generation,
        armed: true,
    };
    let mut delay = RESTART_DELAY;
    loop {
        let command = match link.upgrade().map(|l| l.command.clone()) {
            Some(ReaperCommand::Run(command)) => command,
            // `register` fails before it starts a writer where no reaper can run.
            Some(ReaperCommand::Unavailable(why)) => {
                fail_queued(&mut receiver, &why);
                guard.armed = false;
                return;
            }
            None => {
                guard.armed = false;
                return;
            }
        };
        let failed = match start(command).await {
            Ok(reaper) => match serve(reaper, &link, &mut receiver).await {
                Served::Ran(ran_for) => {
                    // Only a reaper that ran a while earns its successor the first delay again
                    // (one that dies soon after saying it runs is not restarted every second).
                    if ran_for >= RESTART_DELAY_MAX {
                        delay = RESTART_DELAY;
                    }
                    None
                }
                Served::NeverRan(why) => Some(why),
            },
            Err(why) => {
                crate::debug::line(&format!("reaper could not start: {why}"));
                fail_queued(&mut receiver, &why);
                Some(why)
            }
        };
        if let Some(given_up) = link.upgrade().and_then(|l| l.count_start(failed)) {
            crate::debug::line("reaper given up");
            fail_queued(&mut receiver, &given_up);
            guard.armed = false;
            return;
        }
        if !still_needed(&link) {
            guard.armed = false;
            return;
        }
        // Meanwhile, a registration fails at once instead of waiting on a reaper to come.
        let why = format!(
            "the reaper ended; a new one starts in {} s",
            delay.as_secs()
        );
        let pause = tokio::time::sleep(delay);
        tokio::pin!(pause);
        loop {
            tokio::select! {
                () = &mut pause => break,
                next = receiver.recv() => match next {
                    Some(Outgoing { written: Some(written), .. }) => {
                        let _ = written.send(Err(why.clone()));
                    }
                    Some(_) => {}
                    // Unreachable while the link holds its sender; nothing more to write.
                    None => {
                        guard.armed = false;
                        return;
                    }
                },
            }
        }
        delay = (delay * 2).min(RESTART_DELAY_MAX);
        // Sandboxes destroyed during the pause need no new reaper.
        if !still_needed(&link) {
            guard.armed = false;
            return;
        }
    }
}

impl ReaperLink {
    /// Counts a reaper that never said it runs (`failed`, why) or resets the count (`None`: it
    /// ran). At `START_FAILURES_MAX` in a row, the link gives up: the writer is let go, and the
    /// reason returned (and kept for every later registration).
    fn count_start(&self, failed: Option<String>) -> Option<String> {
        let mut state = self.state();
        let Some(why) = failed else {
            state.failed_starts = 0;
            return None;
        };
        state.failed_starts += 1;
        if state.failed_starts < START_FAILURES_MAX {
            return None;
        }
        let given_up = format!(
            "the reaper did not start {} times in a row (the last: {why})",
            state.failed_starts
        );
        state.given_up = Some(given_up.clone());
        state.writer = None;
        Some(given_up)
    }
}

/// Whether a reaper is still needed: the link lives and sandboxes are registered. When none
/// is, the writer is let go (the next registration starts a new one).
fn still_needed(link: &Weak<ReaperLink>) -> bool {
    let Some(link) = link.upgrade() else {
        return false;
    };
    let mut state = link.state();
    if state.live.is_empty() {
        state.writer = None;
        return false;
    }
    true
}

struct Running {
    child: Child,
    stdin: pipe::Sender,
    stdout: pipe::Receiver,
}

impl Running {
    /// Ends the reaper for good and collects its exit status (the wait, a blocking call, runs
    /// off the async threads). A reaper that already exited only has its status collected.
    async fn end(mut self) {
        let _ = self.child.kill();
        drop((self.stdin, self.stdout));
        let mut child = self.child;
        let _ = tokio::task::spawn_blocking(move || child.wait()).await;
    }
}

/// Starts the reaper (the spawn is a blocking system call, so it runs off the async threads).
async fn start(command: Vec<String>) -> Result<Running, String> {
    let mut child = tokio::task::spawn_blocking(move || spawn(&command))
        .await
        .map_err(|e| e.to_string())??;
    let pipes = (child.stdin.take(), child.stdout.take());
    let (Some(stdin), Some(stdout)) = pipes else {
        let _ = child.kill();
        let _ = tokio::task::spawn_blocking(move || child.wait()).await;
        return Err("the reaper's pipes were not made".into());
    };
    let stdin = pipe::Sender::from_owned_fd(stdin.into()).map_err(|e| e.to_string());
    let stdout = pipe::Receiver::from_owned_fd(stdout.into()).map_err(|e| e.to_string());
    match (stdin, stdout) {
        (Ok(stdin), Ok(stdout)) => {
            crate::debug::line(&format!("reaper started (pid {})", child.id()));
            Ok(Running {
                child,
                stdin,
                stdout,
            })
        }
        (Err(why), _) | (_, Err(why)) => {
            let _ = child.kill();
            let _ = tokio::task::spawn_blocking(move || child.wait()).await;
            Err(why)
        }
    }
}

fn spawn(command: &[String]) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    let (program, arguments) = command
        .split_first()
        .ok_or_else(|| "no reaper command".to_owned())?;
    let mut reaper = Command::new(program);
    reaper
        .args(arguments)
        // The controller's preloads (`-r`, `--import`, `--inspect-brk`) are not the reaper's.
        .env_remove("NODE_OPTIONS")
        // Under Electron, `process.execPath` is the app: run it as plain Node.js.
        .env("ELECTRON_RUN_AS_NODE", "1")
        // Whatever it is, it was started as a reaper: if it is an application after all, its own
        // in_process sandboxes fail instead of starting another copy of it.
        .env(REAPER_PROCESS_ENV, "1")
        // The runtime's warnings (an untested Node.js) are the controller's to give, once.
        .env("NODE_NO_WARNINGS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr_for_reaper())
        .process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls are
    // allowed; `close_range` is a single system call that allocates nothing and takes no lock.
    // With CLOSE_RANGE_CLOEXEC it marks every descriptor above the three standard ones
    // close-on-exec, so the reaper, which outlives its controller by design, never holds one of
    // the controller's pipes or sockets open, while std's own channel that reports a failed exec
    // still works until the exec. An error (before Linux 5.11) leaves them to their own flags.
    unsafe {
        reaper.pre_exec(|| {
            const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    reaper.spawn().map_err(|e| format!("{program}: {e}"))
}

/// This process's stderr (passed explicitly: Node marks its own close-on-exec). The reaper writes
/// there what it left on the engine (`serve::report`: nothing when it left nothing) and, under
/// `NODE_DEBUG`, what it did. A reader waiting for the end of this process's stderr (a pipe)
/// waits for the reaper's exit too: as long as this process lives, then its reap, normally well
/// under a second and at most `serve::TOTAL_BOUND`.
fn stderr_for_reaper() -> Stdio {
    use std::os::fd::AsFd;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// How a reaper's service ended.
enum Served {
    /// It said it runs, and ran this long after.
    Ran(Duration),
    /// It never said it runs; why.
    NeverRan(String),
}

/// Waits until the reaper runs, tells it everything registered, then writes what is queued,
/// until the reaper ends or a write fails; the reaper is then ended for good.
async fn serve(
    mut reaper: Running,
    link: &Weak<ReaperLink>,
    receiver: &mut mpsc::UnboundedReceiver<Outgoing>,
) -> Served {
    let ready = tokio::time::timeout(WRITE_BOUND, wait_ready(&mut reaper.stdout)).await;
    if ready != Ok(true) {
        crate::debug::line("reaper did not say it runs");
        let why = match ready {
            Err(_) => format!(
                "the reaper did not say it runs within {} s",
                WRITE_BOUND.as_secs()
            ),
            _ => "the reaper ended without saying it runs".to_owned(),
        };
        // Not the script's Node.js (a bundled application's executable, which runs the
        // application), or a runtime that cannot load the addon.
        let why = format!("{why}; is process.execPath Node.js?");
        fail_queued(receiver, &why);
        reaper.end().await;
        return Served::NeverRan(why);
    }
    let ready_at = std::time::Instant::now();
    // Told only now: a reaper that never ran is never told anything it could act on.
    let replay = link.upgrade().map(|l| l.replay()).unwrap_or_default();
    let told = replay.len();
    let mut first = String::new();
    for line in replay {
        first.push_str(&line);
        first.push('\n');
    }
    let ended = async {
        if !write_bounded(&mut reaper.stdin, first.as_bytes()).await {
            return;
        }
        crate::debug::line(&format!("reaper ready (told {told} lines)"));
        // From now on it never writes: its stdout ends only when it does.
        let mut probe = [0u8; 64];
        loop {
            tokio::select! {
                next = receiver.recv() => {
                    let Some(Outgoing { mut line, written }) = next else { return };
                    line.push('\n');
                    let ok = write_bounded(&mut reaper.stdin, line.as_bytes()).await;
                    if let Some(written) = written {
                        let _ = written.send(if ok { Ok(()) } else { Err("the reaper stopped taking records".into()) });
                    }
                    if !ok {
                        return;
                    }
                }
                read = reaper.stdout.read(&mut probe) => {
                    if matches!(read, Ok(0) | Err(_)) {
                        return;
                    }
                }
            }
        }
    };
    ended.await;
    crate::debug::line("reaper ended");
    fail_queued(receiver, "the reaper ended");
    reaper.end().await;
    Served::Ran(ready_at.elapsed())
}

/// One write, within `WRITE_BOUND`.
async fn write_bounded(stdin: &mut pipe::Sender, bytes: &[u8]) -> bool {
    matches!(
        tokio::time::timeout(WRITE_BOUND, stdin.write_all(bytes)).await,
        Ok(Ok(()))
    )
}

/// Reads the reaper's stdout until a line that is exactly `READY` (other lines are skipped, up
/// to `READY_SEARCH_BYTES`).
async fn wait_ready(stdout: &mut pipe::Receiver) -> bool {
    let mut line = Vec::new();
    let mut seen = 0usize;
    let mut byte = [0u8; 1];
    while seen < READY_SEARCH_BYTES {
        match stdout.read(&mut byte).await {
            Ok(1) => seen += 1,
            _ => return false,
        }
        if byte[0] == b'\n' {
            if line == READY {
                return true;
            }
            line.clear();
        } else if line.len() <= READY.len() {
            line.push(byte[0]);
        }
    }
    false
}

/// Fails the acknowledgements already queued (their lines are replayed to the next reaper).
fn fail_queued(receiver: &mut mpsc::UnboundedReceiver<Outgoing>, why: &str) {
    while let Ok(Outgoing { written, .. }) = receiver.try_recv() {
        if let Some(written) = written {
            let _ = written.send(Err(why.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::record::{test_record, Identity};

    /// A link whose reaper is `script` run by `sh` (a stand-in that logs what it is told).
    fn link(script: String) -> Arc<ReaperLink> {
        link_of(ReaperCommand::Run(vec![
            "/bin/sh".into(),
            "-c".into(),
            script,
        ]))
    }

    fn link_of(command: ReaperCommand) -> Arc<ReaperLink> {
        Arc::new(ReaperLink {
            command,
            state: Mutex::new(LinkState::default()),
        })
    }

    fn record(id: &str) -> SandboxRecoveryRecord {
        let mut record = test_record(Identity::Creating);
        record.sandbox_id = id.into();
        record
    }

    async fn logged_until(log: &std::path::Path, lines: usize) -> Vec<String> {
        for _ in 0..100 {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let found: Vec<String> = text.lines().map(str::to_owned).collect();
            if found.len() >= lines {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the reaper was told fewer than {lines} lines");
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("native-sandbox-link-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        dir
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ready_reaper_is_told_the_engine_each_record_and_each_forget() {
        let log = scratch("told");
        let link = link(format!("echo ready; cat >> {}", log.display()));
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine the reaper can be told");
        entry.register(&record("sbx-a")).await.expect("taken");
        entry.forget("sbx-a");
        // The replay holds the record registered before the reaper ran, and the queue holds it
        // again: harmless, each message is idempotent.
        let told = logged_until(&log, 4).await;
        assert!(
            told[0].starts_with(r#"{"engine":{"index":0.0,"socket":"/run/docker.sock"}}"#),
            "{told:?}"
        );
        assert!(
            told[1].starts_with(r#"{"sandbox":"#) && told[1].contains("sbx-a"),
            "{told:?}"
        );
        assert!(
            told.iter().any(|l| l == r#"{"forget":"sbx-a"}"#),
            "{told:?}"
        );
        let _ = std::fs::remove_file(&log);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reaper_that_dies_is_replaced_and_told_every_registered_sandbox_again() {
        let log = scratch("replaced");
        // Each incarnation logs what it is told; the first exits right after its first line.
        let script = format!(
            "echo ready; if [ -e {log}.first ]; then cat >> {log}; else touch {log}.first; head -n 2 >> {log}; fi",
            log = log.display()
        );
        let link = link(script);
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine");
        entry.register(&record("sbx-kept")).await.expect("taken");
        // The first reaper read two lines and exited; its successor (after RESTART_DELAY) is told
        // the engine and the record again, before anything newer.
        let told = logged_until(&log, 4).await;
        assert!(told[2].starts_with(r#"{"engine":"#), "{told:?}");
        assert!(told[3].contains("sbx-kept"), "{told:?}");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(format!("{}.first", log.display()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reaper_that_cannot_start_fails_the_registration_naming_it() {
        let link = link_of(ReaperCommand::Run(vec!["/nonexistent/node".into()]));
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine");
        let error = entry
            .register(&record("sbx-b"))
            .await
            .expect_err("no reaper");
        assert!(
            error.to_string().contains("/nonexistent/node")
                && error.to_string().contains("reaper: false"),
            "{error}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reaper_runs_marked_as_one_without_warnings() {
        let log = scratch("environment");
        let link = link(format!(
            "echo ready; env > {}; cat > /dev/null",
            log.display()
        ));
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine");
        entry.register(&record("sbx-env")).await.expect("taken");
        let environment = logged_until(&log, 1).await;
        assert!(
            environment.contains(&format!("{REAPER_PROCESS_ENV}=1")),
            "{environment:?}"
        );
        assert!(environment.contains(&"NODE_NO_WARNINGS=1".to_owned()));
        let _ = std::fs::remove_file(&log);
    }

    #[tokio::test]
    async fn where_no_reaper_can_run_a_registration_fails_at_once_and_nothing_is_spawned() {
        let link = link_of(ReaperCommand::Unavailable(
            "process.execPath is a single-executable application".into(),
        ));
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine is still taken: persisted sandboxes need no reaper");
        let error = entry
            .register(&record("sbx-c"))
            .await
            .expect_err("no reaper can run");
        let OwnerError::Unsupported(message) = &error else {
            panic!("not unsupported: {error:?}");
        };
        for part in [
            "single-executable application",
            "kind: 'persisted'",
            "reaper: false",
        ] {
            assert!(message.contains(part), "{message}");
        }
        let state = link.state();
        assert!(state.live.is_empty() && state.writer.is_none() && state.generation == 0);
    }

    #[test]
    fn a_process_started_as_a_reaper_runs_none() {
        let command = ReaperCommand::Run(vec!["node".into(), "reaper-main.js".into()]);
        assert_eq!(command.clone().in_process_marked(None), command);
        let ReaperCommand::Unavailable(why) =
            command.in_process_marked(Some(std::ffi::OsStr::new("1")))
        else {
            panic!("a marked process runs no reaper");
        };
        assert!(why.contains(REAPER_PROCESS_ENV), "{why}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reapers_that_never_run_are_given_up_after_start_failures_max() {
        let log = scratch("never-ran");
        // Each incarnation logs that it was started, then exits without saying it runs.
        let link = link(format!("echo started >> {}; exit 0", log.display()));
        let entry = link
            .entry(Engine::Socket("/run/docker.sock".into()))
            .expect("an engine");
        let first = entry
            .register(&record("sbx-d"))
            .await
            .expect_err("the reaper never ran");
        assert!(
            first.to_string().contains("ended without saying it runs"),
            "{first}"
        );
        // The record stays registered, so the writer tries again (after 1 s, then 2 s), and
        // gives up at the third failure in a row.
        let mut given_up = None;
        for _ in 0..200 {
            given_up = link.state().given_up.clone();
            if given_up.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let given_up = given_up.expect("given up");
        assert!(given_up.contains("3 times in a row"), "{given_up}");
        assert!(link.state().writer.is_none());
        let later = entry
            .register(&record("sbx-e"))
            .await
            .expect_err("given up for good");
        assert!(
            later.to_string().contains("gave up starting one")
                && later.to_string().contains("3 times in a row"),
            "{later}"
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let started = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(
            started.lines().count(),
            START_FAILURES_MAX as usize,
            "{started}"
        );
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn an_engine_that_does_not_read_back_is_refused_at_entry() {
        let link = link("true".into());
        let error = link
            .entry(Engine::Socket(String::new()))
            .err()
            .expect("an empty socket path cannot be told");
        assert!(error.to_string().contains("does not read back"), "{error}");
    }
}
