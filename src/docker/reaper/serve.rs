//! The reaper's side: it reads its controller's messages until the link ends, then removes
//! every sandbox still registered, object by object, by ID and proof (as a reconciled sandbox's
//! destroy does, `objects`), for as long as the engine makes progress, and reports what it left.
//!
//! The link ends when the controller's end of the pipe closes: it exited, was killed, or ended
//! by a signal it had no handler for. A controller that destroyed its sandboxes forgot them
//! first, so a clean exit leaves nothing to remove. Persisted sandboxes are never registered.
//!
//! Bounds, from the link's end (each enforced in `reap_with` and covered by a test below):
//! - an engine makes progress while it answers the reaper's calls (a call: one object's removal,
//!   `Remover::remove`, an inspection and a removal request): any answer, even an error.
//!   The reaper stops working on an engine none of whose calls answered for `ANSWER_BOUND`
//!   (measured from the last answer, or the reap's start), and abandons (then retries) a call
//!   that has not answered within `ANSWER_BOUND` while others do;
//! - whatever its engines do, it stops `TOTAL_BOUND` after the link ended;
//! - between two attempts at a sandbox it pauses `RETRY_DELAY`, doubled up to `RETRY_DELAY_MAX`.
//!
//! What it left (each object by sandbox, role and engine ID or name, with why) is written to its
//! stderr, which is its controller's (`link::spawn`), by `report`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bollard::Docker;
use futures::future::{join_all, BoxFuture};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use super::super::engine::connect;
use super::super::objects::{remove_container, remove_network, remove_volume};
use super::super::options::Engine;
use super::link::READY;
use super::wire::{decode, Message, LINE_BYTES_MAX};
use crate::debug;
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Identity, Role, SandboxRecoveryRecord};

/// The engine makes progress while some call of the reaper's answers (an answer, even an error)
/// at least this often: past it without one, the reaper stops working on that engine. A call
/// not answered within it is abandoned and its object tried again.
pub const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// From the link's end, the reaper stops after this long whatever its engines do (an engine
/// that keeps answering with errors is retried until then).
pub const TOTAL_BOUND: Duration = Duration::from_secs(120);

/// The first pause between attempts at a sandbox whose removal is not finished (a volume still
/// in use while its holder goes away, an engine restarting), doubled after each attempt up to
/// `RETRY_DELAY_MAX`.
const RETRY_DELAY: Duration = Duration::from_millis(250);
const RETRY_DELAY_MAX: Duration = Duration::from_secs(2);

/// The order objects are removed in (as `objects::remove_all`): the process container, the
/// workspace holder, then the volume they mount and the network they join.
const ORDER: [Role; 4] = [Role::Compute, Role::Holder, Role::Storage, Role::Network];

/// The engine calls the reaper makes: one object's removal by ID and proof (its inspection,
/// then its removal), as a destroy does it. The seam its bounds are tested through.
pub trait Remover: Send + Sync {
    fn remove<'a>(
        &'a self,
        record: &'a SandboxRecoveryRecord,
        role: Role,
    ) -> BoxFuture<'a, Result<(), OwnerError>>;
}

impl Remover for Docker {
    fn remove<'a>(
        &'a self,
        record: &'a SandboxRecoveryRecord,
        role: Role,
    ) -> BoxFuture<'a, Result<(), OwnerError>> {
        Box::pin(async move {
            match role {
                Role::Compute | Role::Holder => remove_container(self, record, role).await,
                Role::Storage => remove_volume(self, record).await,
                Role::Network => remove_network(self, record).await,
            }
        })
    }
}

/// What the controller registered and has not forgotten.
#[derive(Debug, Default)]
pub struct Registry {
    engines: HashMap<u32, Engine>,
    live: BTreeMap<String, (u32, SandboxRecoveryRecord)>,
}

impl Registry {
    pub fn apply(&mut self, message: Message) {
        match message {
            Message::Engine { index, engine } => {
                self.engines.insert(index, engine);
            }
            Message::Sandbox { engine, record } => {
                self.live
                    .insert(record.sandbox_id.clone(), (engine, record));
            }
            Message::Forget { sandbox_id } => {
                self.live.remove(&sandbox_id);
            }
        }
    }

    pub fn registered(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(String::as_str)
    }
}

/// Why an object was left on the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its labels or incarnation differ: not provably this sandbox's, so never touched.
    NotProvable,
    /// The engine's last answer about it was an error.
    EngineError,
    /// Its last call got no answer within `ANSWER_BOUND`.
    NoAnswer,
    /// Not tried before the reaper stopped.
    NotReached,
    /// Its engine was never named to the reaper, or could not be reached from it.
    Unreachable,
}

impl Why {
    pub fn describe(self) -> String {
        match self {
            Why::NotProvable => "not provably this sandbox's: left untouched".into(),
            Why::EngineError => "the engine's last answer was an error".into(),
            Why::NoAnswer => format!("no answer within {} s", ANSWER_BOUND.as_secs()),
            Why::NotReached => "not tried before the reaper stopped".into(),
            Why::Unreachable => "its engine was never named or is unreachable".into(),
        }
    }
}

/// An object of a registered sandbox that the reaper did not remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    pub sandbox_id: String,
    pub role: Role,
    /// The engine's ID of the object when its record has one, else the name it was being
    /// created under.
    pub object: String,
    pub why: Why,
}

impl Left {
    /// What kind of engine object it is.
    pub fn kind(&self) -> &'static str {
        match self.role {
            Role::Compute | Role::Holder => "container",
            Role::Storage => "volume",
            Role::Network => "network",
        }
    }
}

/// Why the reaper stopped working on an engine before every object on it was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// None of its calls answered for `ANSWER_BOUND`.
    NoProgress,
    /// `TOTAL_BOUND` passed.
    OutOfTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub engine: u32,
    pub why: Stop,
    /// From the link's end.
    pub after: Duration,
}

/// What the reaper did once its link ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Sandboxes of which nothing is left.
    pub removed: Vec<String>,
    /// Sandboxes of which something is left, with why (the objects are in `left`).
    pub failed: Vec<(String, String)>,
    /// Every object left, in sandbox order, then removal order.
    pub left: Vec<Left>,
    /// The engines it stopped working on before it was done with them.
    pub stopped: Vec<Stopped>,
}

/// The lines that say what the reaper left (none when it left nothing): one per engine it
/// stopped early, then one per object, by sandbox, role, kind and ID (or name).
pub fn report(reaped: &Reaped) -> Vec<String> {
    if reaped.left.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<String> = reaped
        .stopped
        .iter()
        .map(|stopped| {
            let why = match stopped.why {
                Stop::NoProgress => format!(
                    "engine {} answered none of its calls for {} s",
                    stopped.engine,
                    ANSWER_BOUND.as_secs()
                ),
                Stop::OutOfTime => format!(
                    "its bound of {} s passed with work left on engine {}",
                    TOTAL_BOUND.as_secs(),
                    stopped.engine
                ),
            };
            format!(
                "native-sandbox reaper: stopped after {:.1} s: {why}",
                stopped.after.as_secs_f64()
            )
        })
        .collect();
    lines.extend(reaped.left.iter().map(|left| {
        format!(
            "native-sandbox reaper: left {} {} {} {} ({})",
            left.sandbox_id,
            left.role.as_str(),
            left.kind(),
            left.object,
            left.why.describe()
        )
    }));
    lines
}

/// Says `ready` on `out`, reads `input` until it ends, then reaps what is still registered.
pub async fn serve(
    input: impl AsyncRead + Unpin,
    mut out: impl AsyncWrite + Unpin,
) -> std::io::Result<Reaped> {
    let mut said = READY.to_vec();
    said.push(b'\n');
    out.write_all(&said).await?;
    out.flush().await?;
    let registry = watch(input).await;
    // The controller is gone; its end of our stdout goes with it.
    drop(out);
    Ok(reap(registry).await)
}

/// Applies every message until the input ends (or fails). A line that is not a message, or is
/// longer than `LINE_BYTES_MAX`, is skipped. The controller never sends one (it checks that
/// every engine line reads back, and records are at most 16 KiB), so a skipped line means a
/// foreign writer, and is reported under `NODE_DEBUG`.
pub async fn watch(input: impl AsyncRead + Unpin) -> Registry {
    let mut registry = Registry::default();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return registry,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() <= LINE_BYTES_MAX {
                // The input ended inside a line: the controller died while writing it.
                return registry;
            }
            debug::line("reaper skipped a line longer than its bound");
            if skip_line(&mut reader).await {
                continue;
            }
            return registry;
        }
        line.pop();
        match std::str::from_utf8(&line)
            .map_err(|e| e.to_string())
            .and_then(decode)
        {
            Ok(message) => registry.apply(message),
            Err(why) => debug::line(&format!("reaper skipped a line: {why}")),
        }
    }
}

/// Reads up to the next newline; false when the input ended first.
async fn skip_line(reader: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> bool {
    loop {
        let buffer = match reader.fill_buf().await {
            Ok([]) | Err(_) => return false,
            Ok(buffer) => buffer,
        };
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return true;
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// Where one object's removal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// To be tried (again); `why` is what is left of it if the reaper stops now.
    Pending(Why),
    Removed,
    /// Never tried again.
    Final(Why),
}

#[derive(Debug)]
struct Entry {
    role: Role,
    object: String,
    state: State,
}

/// Every object of every registered sandbox and where its removal stands, by sandbox: read
/// once the reaper stops (the work on an engine may be dropped in the middle of a call).
#[derive(Default)]
struct Ledger(Mutex<BTreeMap<String, Vec<Entry>>>);

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<Entry>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The objects `record` says may exist: every role whose creation was at least entered.
    fn enter(&self, record: &SandboxRecoveryRecord) {
        let entries = ORDER
            .iter()
            .filter_map(|role| {
                let resource = record.resources.iter().find(|r| r.role == *role)?;
                let object = match &resource.identity {
                    Identity::Planned => return None,
                    Identity::Creating => resource.name.clone(),
                    Identity::Identified { id, .. } => id.clone(),
                };
                Some(Entry {
                    role: *role,
                    object,
                    state: State::Pending(Why::NotReached),
                })
            })
            .collect();
        self.lock().insert(record.sandbox_id.clone(), entries);
    }

    /// The roles of `sandbox_id` still to be tried, in removal order.
    fn pending(&self, sandbox_id: &str) -> Vec<Role> {
        self.lock()
            .get(sandbox_id)
            .map_or_else(Vec::new, |entries| {
                entries
                    .iter()
                    .filter(|e| matches!(e.state, State::Pending(_)))
                    .map(|e| e.role)
                    .collect()
            })
    }

    fn settle(&self, sandbox_id: &str, role: Role, state: State) {
        if let Some(entry) = self
            .lock()
            .get_mut(sandbox_id)
            .and_then(|entries| entries.iter_mut().find(|e| e.role == role))
        {
            entry.state = state;
        }
    }

    /// Whether every object of `sandbox_id` is gone.
    fn all_removed(&self, sandbox_id: &str) -> bool {
        self.lock()
            .get(sandbox_id)
            .is_none_or(|entries| entries.iter().all(|e| e.state == State::Removed))
    }

    /// Settles every object of `sandbox_id` not yet removed as `why`.
    fn give_up(&self, sandbox_id: &str, why: Why) {
        if let Some(entries) = self.lock().get_mut(sandbox_id) {
            for entry in entries.iter_mut().filter(|e| e.state != State::Removed) {
                entry.state = State::Final(why);
            }
        }
    }
}

/// When the engine last answered a call of the reaper's (or when the reap began).
struct Progress(Mutex<Instant>);

impl Progress {
    fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answered(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
}

/// Resolves once `ANSWER_BOUND` has passed since the engine's last answer.
async fn no_progress(progress: &Progress) {
    loop {
        let due = progress.last() + ANSWER_BOUND;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due).await;
    }
}

/// Removes every registered sandbox (see the module's bounds), on the engines its controller
/// named, and says what it left.
pub async fn reap(registry: Registry) -> Reaped {
    reap_with(registry, |engine| {
        connect(engine)
            .ok()
            .map(|connected| Arc::new(connected.docker) as Arc<dyn Remover>)
    })
    .await
}

/// `reap` with the engines reached through `connect` (`None`: unreachable).
pub async fn reap_with(
    registry: Registry,
    connect: impl Fn(&Engine) -> Option<Arc<dyn Remover>>,
) -> Reaped {
    let started = Instant::now();
    let deadline = started + TOTAL_BOUND;
    let ledger = Ledger::default();
    let mut groups: BTreeMap<u32, Vec<SandboxRecoveryRecord>> = BTreeMap::new();
    for (engine, record) in registry.live.into_values() {
        ledger.enter(&record);
        groups.entry(engine).or_default().push(record);
    }
    let mut removers = HashMap::new();
    for index in groups.keys() {
        match registry.engines.get(index).and_then(&connect) {
            Some(remover) => {
                removers.insert(*index, remover);
            }
            // Its address is the caller's: the line says only which engine.
            None => debug::line(&format!("reaper cannot reach engine {index}")),
        }
    }
    let runs = groups.iter().map(|(index, records)| {
        let remover = removers.get(index).cloned();
        let ledger = &ledger;
        async move {
            let Some(remover) = remover else {
                for record in records {
                    ledger.give_up(&record.sandbox_id, Why::Unreachable);
                }
                return None;
            };
            let progress = Progress(Mutex::new(started));
            let work = join_all(
                records
                    .iter()
                    .map(|record| reap_sandbox(&*remover, record, ledger, &progress, started)),
            );
            let stop = tokio::select! {
                // First: work that finished as a bound passed is done, not stopped.
                biased;
                _ = work => return None,
                () = no_progress(&progress) => Stop::NoProgress,
                () = tokio::time::sleep_until(deadline) => Stop::OutOfTime,
            };
            Some(Stopped {
                engine: *index,
                why: stop,
                after: started.elapsed(),
            })
        }
    });
    let stopped: Vec<Stopped> = join_all(runs).await.into_iter().flatten().collect();
    let mut reaped = Reaped {
        stopped,
        ..Reaped::default()
    };
    for (sandbox_id, entries) in std::mem::take(&mut *ledger.lock()) {
        let left: Vec<Left> = entries
            .into_iter()
            .filter_map(|entry| {
                let why = match entry.state {
                    State::Removed => return None,
                    State::Pending(why) | State::Final(why) => why,
                };
                Some(Left {
                    sandbox_id: sandbox_id.clone(),
                    role: entry.role,
                    object: entry.object,
                    why,
                })
            })
            .collect();
        if left.is_empty() {
            reaped.removed.push(sandbox_id);
            continue;
        }
        let reason = left
            .iter()
            .map(|l| {
                format!(
                    "{} {} {}: {}",
                    l.role.as_str(),
                    l.kind(),
                    l.object,
                    l.why.describe()
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        // Only counts: the objects' names carry the caller's namespace (`report` names them).
        debug::line(&format!(
            "reaper gave up on {sandbox_id} ({} objects left)",
            left.len()
        ));
        reaped.failed.push((sandbox_id, reason));
        reaped.left.extend(left);
    }
    reaped
}

/// Tries every object of `record` not yet settled, in removal order, each call within
/// `ANSWER_BOUND`, until none is left to try; the caller stops it at its bounds.
async fn reap_sandbox(
    remover: &dyn Remover,
    record: &SandboxRecoveryRecord,
    ledger: &Ledger,
    progress: &Progress,
    started: Instant,
) {
    let id = &record.sandbox_id;
    let mut delay = RETRY_DELAY;
    loop {
        for role in ledger.pending(id) {
            let state = match tokio::time::timeout(ANSWER_BOUND, remover.remove(record, role)).await
            {
                Ok(answer) => {
                    progress.answered();
                    match answer {
                        Ok(()) => State::Removed,
                        // An object whose labels or incarnation differ is left untouched.
                        Err(OwnerError::State(_)) => State::Final(Why::NotProvable),
                        Err(_) => State::Pending(Why::EngineError),
                    }
                }
                Err(_) => State::Pending(Why::NoAnswer),
            };
            ledger.settle(id, role, state);
        }
        if ledger.pending(id).is_empty() {
            if ledger.all_removed(id) {
                debug::line(&format!(
                    "reaper removed {id} in {} ms",
                    started.elapsed().as_millis()
                ));
            }
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_DELAY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::reaper::wire::encode;
    use crate::recovery::record::{test_record, Identity, Resource};

    fn record(id: &str) -> SandboxRecoveryRecord {
        let mut record = test_record(Identity::Creating);
        record.sandbox_id = id.into();
        record
    }

    fn lines(messages: &[Message]) -> String {
        messages
            .iter()
            .map(|m| encode(m).expect("encodes") + "\n")
            .collect()
    }

    #[tokio::test]
    async fn the_registry_is_what_was_registered_and_not_forgotten() {
        let text = lines(&[
            Message::Engine {
                index: 0,
                engine: Engine::Socket("/run/docker.sock".into()),
            },
            Message::Sandbox {
                engine: 0,
                record: record("a"),
            },
            Message::Sandbox {
                engine: 0,
                record: record("b"),
            },
            Message::Forget {
                sandbox_id: "a".into(),
            },
            Message::Sandbox {
                engine: 0,
                record: record("c"),
            },
        ]);
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["b", "c"]);
    }

    #[tokio::test]
    async fn a_line_cut_by_the_controller_s_death_is_not_read() {
        let mut text = lines(&[Message::Sandbox {
            engine: 0,
            record: record("a"),
        }]);
        let cut = lines(&[Message::Forget {
            sandbox_id: "a".into(),
        }]);
        text.push_str(&cut[..cut.len() - 3]);
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn bad_and_overlong_lines_are_skipped_and_reading_goes_on() {
        let mut text = String::from("not json\n");
        text.push_str(&"x".repeat(LINE_BYTES_MAX + 10));
        text.push('\n');
        text.push_str(&lines(&[Message::Sandbox {
            engine: 0,
            record: record("a"),
        }]));
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn a_sandbox_on_an_engine_never_named_is_reported_not_dropped() {
        let mut registry = Registry::default();
        registry.apply(Message::Sandbox {
            engine: 7,
            record: record("a"),
        });
        let reaped = reap(registry).await;
        assert!(reaped.removed.is_empty());
        assert_eq!(reaped.failed.len(), 1);
        assert_eq!(reaped.failed[0].0, "a");
        assert_eq!(
            reaped.left,
            [Left {
                sandbox_id: "a".into(),
                role: Role::Compute,
                object: "compute".into(),
                why: Why::Unreachable,
            }]
        );
        assert!(reaped.stopped.is_empty());
    }

    /// How the fake engine answers one call.
    enum Answer {
        /// After this long (of the paused clock), with this.
        After(Duration, Result<(), OwnerError>),
        Never,
    }

    type Script = Box<dyn Fn(&str, Role, usize) -> Answer + Send + Sync>;

    /// An engine behind the reaper's seam: each call is answered as `script(sandbox, role, n)`
    /// says, `n` counting that object's calls from 1.
    struct Fake {
        calls: Mutex<Vec<(String, Role)>>,
        script: Script,
    }

    impl Fake {
        fn new(script: impl Fn(&str, Role, usize) -> Answer + Send + Sync + 'static) -> Arc<Self> {
            Arc::new(Self {
                calls: Mutex::new(Vec::new()),
                script: Box::new(script),
            })
        }

        fn calls(&self, sandbox_id: &str, role: Role) -> usize {
            let calls = self.calls.lock().expect("calls");
            calls
                .iter()
                .filter(|(s, r)| s == sandbox_id && *r == role)
                .count()
        }
    }

    impl Remover for Fake {
        fn remove<'a>(
            &'a self,
            record: &'a SandboxRecoveryRecord,
            role: Role,
        ) -> BoxFuture<'a, Result<(), OwnerError>> {
            let n = {
                let mut calls = self.calls.lock().expect("calls");
                calls.push((record.sandbox_id.clone(), role));
                calls
                    .iter()
                    .filter(|(s, r)| *s == record.sandbox_id && *r == role)
                    .count()
            };
            let answer = (self.script)(&record.sandbox_id, role, n);
            Box::pin(async move {
                match answer {
                    Answer::After(delay, result) => {
                        tokio::time::sleep(delay).await;
                        result
                    }
                    Answer::Never => futures::future::pending().await,
                }
            })
        }
    }

    /// A sandbox whose containers were identified, whose volume was being created, and whose
    /// network was never entered.
    fn full_record(id: &str) -> SandboxRecoveryRecord {
        let mut record = record(id);
        let identified = |what: &str| Identity::Identified {
            id: format!("{id}-{what}"),
            fingerprint: format!("sha256:{}", "d".repeat(64)),
        };
        record.resources = vec![
            Resource {
                role: Role::Storage,
                name: format!("{id}-volume"),
                identity: Identity::Creating,
            },
            Resource {
                role: Role::Holder,
                name: "holder".into(),
                identity: identified("holder"),
            },
            Resource {
                role: Role::Compute,
                name: "compute".into(),
                identity: identified("compute"),
            },
            Resource {
                role: Role::Network,
                name: "network".into(),
                identity: Identity::Planned,
            },
        ];
        record
    }

    /// `sandboxes` (id, engine index) registered on engines 0 and 1.
    fn registry_of(sandboxes: &[(&str, u32)]) -> Registry {
        let mut registry = Registry::default();
        for index in [0, 1] {
            registry.apply(Message::Engine {
                index,
                engine: Engine::Socket(format!("/engine-{index}")),
            });
        }
        for (id, engine) in sandboxes {
            registry.apply(Message::Sandbox {
                engine: *engine,
                record: full_record(id),
            });
        }
        registry
    }

    /// Reaps `sandboxes` with `fake` as every engine; what was reaped and how long it took.
    async fn reap_on(fake: &Arc<Fake>, sandboxes: &[(&str, u32)]) -> (Reaped, Duration) {
        let engine: Arc<dyn Remover> = fake.clone();
        let began = Instant::now();
        let reaped = reap_with(registry_of(sandboxes), move |_| Some(Arc::clone(&engine))).await;
        (reaped, began.elapsed())
    }

    const OBJECTS: [Role; 3] = [Role::Compute, Role::Holder, Role::Storage];

    #[tokio::test(start_paused = true)]
    async fn an_engine_that_answers_slowly_is_waited_for_as_long_as_it_answers() {
        // Each call answers after 20 s: 60 s for the sandbox, far past the 8 s a fixed bound
        // once allowed, and past ANSWER_BOUND in all, yet never ANSWER_BOUND without an answer.
        let fake = Fake::new(|_, _, _| Answer::After(Duration::from_secs(20), Ok(())));
        let (reaped, took) = reap_on(&fake, &[("a", 0)]).await;
        assert_eq!(reaped.removed, ["a"]);
        assert!(
            reaped.left.is_empty() && reaped.stopped.is_empty(),
            "{reaped:?}"
        );
        assert_eq!(took, Duration::from_secs(60));
        // The planned network was never asked about: it does not exist.
        for role in OBJECTS {
            assert_eq!(fake.calls("a", role), 1, "{role:?}");
        }
        assert_eq!(fake.calls("a", Role::Network), 0);
        assert!(report(&reaped).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_engine_that_answers_nothing_is_left_after_answer_bound_and_reported() {
        let fake = Fake::new(|_, _, _| Answer::Never);
        let (reaped, took) = reap_on(&fake, &[("a", 0)]).await;
        assert_eq!(took, ANSWER_BOUND);
        assert_eq!(
            reaped.stopped,
            [Stopped {
                engine: 0,
                why: Stop::NoProgress,
                after: ANSWER_BOUND,
            }]
        );
        let left: Vec<(Role, &str, Why)> = reaped
            .left
            .iter()
            .map(|l| (l.role, l.object.as_str(), l.why))
            .collect();
        assert_eq!(
            left,
            [
                (Role::Compute, "a-compute", Why::NoAnswer),
                (Role::Holder, "a-holder", Why::NotReached),
                (Role::Storage, "a-volume", Why::NotReached),
            ]
        );
        assert_eq!(reaped.failed.len(), 1);
        assert_eq!(
            report(&reaped),
            [
                "native-sandbox reaper: stopped after 30.0 s: engine 0 answered none of its calls for 30 s",
                "native-sandbox reaper: left a compute container a-compute (no answer within 30 s)",
                "native-sandbox reaper: left a export container a-holder (not tried before the reaper stopped)",
                "native-sandbox reaper: left a storage volume a-volume (not tried before the reaper stopped)",
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_bound_without_an_answer_runs_from_the_last_answer() {
        // The process container goes after 10 s; nothing after it is ever answered.
        let fake = Fake::new(|_, role, _| match role {
            Role::Compute => Answer::After(Duration::from_secs(10), Ok(())),
            _ => Answer::Never,
        });
        let (reaped, took) = reap_on(&fake, &[("a", 0)]).await;
        assert_eq!(took, Duration::from_secs(10) + ANSWER_BOUND);
        assert_eq!(reaped.stopped[0].why, Stop::NoProgress);
        let left: Vec<(Role, Why)> = reaped.left.iter().map(|l| (l.role, l.why)).collect();
        assert_eq!(
            left,
            [
                (Role::Holder, Why::NoAnswer),
                (Role::Storage, Why::NotReached)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_engine_that_keeps_answering_errors_is_retried_until_total_bound() {
        let fake = Fake::new(|_, _, _| {
            Answer::After(Duration::from_millis(10), Err(OwnerError::driver("busy")))
        });
        let (reaped, took) = reap_on(&fake, &[("a", 0)]).await;
        assert_eq!(took, TOTAL_BOUND);
        assert_eq!(
            reaped.stopped,
            [Stopped {
                engine: 0,
                why: Stop::OutOfTime,
                after: TOTAL_BOUND,
            }]
        );
        assert!(reaped.left.iter().all(|l| l.why == Why::EngineError));
        assert_eq!(reaped.left.len(), 3);
        // Every pause at most RETRY_DELAY_MAX: tried again and again until the bound.
        let calls = fake.calls("a", Role::Compute);
        assert!(calls >= 50, "{calls}");
        assert!(report(&reaped)[0].contains("its bound of 120 s passed"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_hangs_is_abandoned_and_retried_while_the_engine_answers_others() {
        let fake = Fake::new(|sandbox, role, n| match (sandbox, role) {
            // The first call about a's process container never answers; the second does.
            ("a", Role::Compute) if n == 1 => Answer::Never,
            // b's keeps failing for a while, answering each time within a second.
            ("b", Role::Compute) if n <= 15 => {
                Answer::After(Duration::from_secs(1), Err(OwnerError::driver("in use")))
            }
            _ => Answer::After(Duration::ZERO, Ok(())),
        });
        let (reaped, took) = reap_on(&fake, &[("a", 0), ("b", 0)]).await;
        assert_eq!(reaped.removed, ["a", "b"]);
        assert!(
            reaped.stopped.is_empty() && reaped.left.is_empty(),
            "{reaped:?}"
        );
        assert_eq!(fake.calls("a", Role::Compute), 2);
        assert_eq!(fake.calls("b", Role::Compute), 16);
        assert!(took > ANSWER_BOUND && took < TOTAL_BOUND, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_not_provably_its_own_is_never_retried_and_holds_nothing_up() {
        let fake = Fake::new(|_, role, _| match role {
            Role::Compute => Answer::After(Duration::ZERO, Err(OwnerError::state("labels differ"))),
            _ => Answer::After(Duration::ZERO, Ok(())),
        });
        let (reaped, took) = reap_on(&fake, &[("a", 0)]).await;
        assert_eq!(took, Duration::ZERO);
        assert_eq!(fake.calls("a", Role::Compute), 1);
        assert!(reaped.stopped.is_empty());
        assert_eq!(
            reaped.left,
            [Left {
                sandbox_id: "a".into(),
                role: Role::Compute,
                object: "a-compute".into(),
                why: Why::NotProvable,
            }]
        );
        assert_eq!(
            report(&reaped),
            ["native-sandbox reaper: left a compute container a-compute (not provably this sandbox's: left untouched)"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_engine_that_stops_answering_does_not_stop_the_work_on_another() {
        let stalled = Fake::new(|_, _, _| Answer::Never);
        let healthy = Fake::new(|_, _, _| Answer::After(Duration::from_secs(25), Ok(())));
        let (to_stalled, to_healthy): (Arc<dyn Remover>, Arc<dyn Remover>) =
            (stalled.clone(), healthy.clone());
        let began = Instant::now();
        let reaped = reap_with(registry_of(&[("a", 0), ("b", 1)]), move |engine| {
            Some(match engine {
                Engine::Socket(path) if path == "/engine-0" => Arc::clone(&to_stalled),
                _ => Arc::clone(&to_healthy),
            })
        })
        .await;
        assert_eq!(began.elapsed(), Duration::from_secs(75));
        assert_eq!(reaped.removed, ["b"]);
        assert_eq!(reaped.stopped.len(), 1);
        assert_eq!(reaped.stopped[0].engine, 0);
        assert_eq!(reaped.stopped[0].after, ANSWER_BOUND);
        assert!(reaped.left.iter().all(|l| l.sandbox_id == "a"));
    }

    #[tokio::test]
    async fn serve_says_ready_first() {
        let mut out = Vec::new();
        let reaped = serve(&b""[..], &mut out).await.expect("serves");
        assert_eq!(out, b"ready\n");
        assert_eq!(reaped, Reaped::default());
    }
}
