//! The sandbox owner: one reservation's whole life, from inert reservation to destroyed, with
//! cleanup ownership that no failure, cancellation or deadline can lose.
//!
//! This file holds the owner itself (`SandboxOwner`, its shared `Inner` and the `Core` state
//! behind one lock), its constructor, its accessors and `fence`. Each operation lives in its own
//! file as another `impl SandboxOwner` block: `startup`, `stop` (and the observation of every
//! cleanup), `destroy`, `transfers` (admission and tickets), `process` (the one process's
//! reservation and start), `execution` (the execution policy and its deadline) and `freeze`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{DriverReservation, Persist, ReadyFacts};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::journal::Journal;
use crate::lifecycle::observe::Actual;
use crate::lifecycle::state::{Operation, State};
use crate::policy::request::SandboxRequest;
use crate::recovery::record::SandboxRecoveryRecord;

mod destroy;
mod execution;
mod freeze;
mod pool_member;
mod process;
pub mod sessions;
mod startup;
mod stop;
mod transfers;

pub use process::ProcessStart;
pub use transfers::TransferTicket;

use process::ProcessSlot;
use transfers::Admitted;

/// Cheap to clone: every clone is the same owner.
#[derive(Clone)]
pub struct SandboxOwner {
    inner: Arc<Inner>,
}

/// Owners alive in this process: every owner must be freed once its last handle is dropped
/// (tested: nothing the owner holds may hold it back).
static LIVE_OWNERS: AtomicUsize = AtomicUsize::new(0);

/// How many owners are alive in this process.
pub fn live_owners() -> usize {
    LIVE_OWNERS.load(Ordering::SeqCst)
}

struct Inner {
    id: String,
    driver: Arc<dyn DriverReservation>,
    request: SandboxRequest,
    journal: Arc<Journal>,
    startup_cancel: Cancel,
    core: Mutex<Core>,
    /// Woken whenever a transfer is released (cleanup waits for a cancelled one).
    transfer_released: tokio::sync::Notify,
}

impl Drop for Inner {
    fn drop(&mut self) {
        LIVE_OWNERS.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Core {
    state: State,
    startup: Option<Actual<ReadyFacts>>,
    ready: Option<ReadyFacts>,
    stop: Option<Actual<()>>,
    destroy: Option<Actual<()>>,
    /// Which entered stop and destroy may still settle the state: a settled attempt that has
    /// been replaced by a retry never overwrites its successor's outcome.
    stop_attempt: u64,
    destroy_attempt: u64,
    /// Fired when compute stops: ends the execution deadline timer and the process port.
    execution: Option<Cancel>,
    /// Why the stop interrupted the process's work: the execution deadline when it fired first,
    /// else the stop itself. Set when the stop begins with an execution entered.
    execution_end: Option<OwnerError>,
    /// The one process recipe, once reserved (imports close for good at that moment).
    process: Option<ProcessSlot>,
    /// The one admitted transfer, with the ticket that alone can release it.
    transfer: Option<Admitted>,
    /// The last ticket handed out.
    tickets: u64,
    /// Fired as a stop begins: ends every command start and file call in flight (`sessions.rs`).
    sessions: Option<Cancel>,
}

impl SandboxOwner {
    /// Wraps a fresh driver reservation. Inert: nothing is acquired until `start`.
    pub fn new(
        id: String,
        driver: Arc<dyn DriverReservation>,
        request: SandboxRequest,
        initial: SandboxRecoveryRecord,
        persist: Option<Arc<dyn Persist>>,
    ) -> Self {
        let startup_cancel = Cancel::new();
        let journal = Arc::new(Journal::new(initial, persist, startup_cancel.clone()));
        LIVE_OWNERS.fetch_add(1, Ordering::SeqCst);
        Self {
            inner: Arc::new(Inner {
                id,
                driver,
                request,
                journal,
                startup_cancel,
                core: Mutex::new(Core {
                    state: State::Reserved,
                    startup: None,
                    ready: None,
                    stop: None,
                    destroy: None,
                    stop_attempt: 0,
                    destroy_attempt: 0,
                    execution: None,
                    execution_end: None,
                    process: None,
                    transfer: None,
                    tickets: 0,
                    sessions: None,
                }),
                transfer_released: tokio::sync::Notify::new(),
            }),
        }
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        self.inner
            .core
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Why the stop interrupted the process's work (the execution deadline when it fired
    /// first, else the stop); `None` before a stop of an entered execution.
    pub fn execution_end(&self) -> Option<OwnerError> {
        self.core().execution_end.clone()
    }

    /// Why a stop ended the process's execution (`exit`'s `cause`); `None` before any.
    pub fn stop_cause(&self) -> Option<crate::lifecycle::stop_cause::StopCause> {
        self.execution_end()
            .map(|end| crate::lifecycle::stop_cause::StopCause::of(&end))
    }

    pub fn state(&self) -> State {
        self.core().state
    }

    pub fn request(&self) -> &SandboxRequest {
        &self.inner.request
    }

    pub fn recovery_record(&self) -> SandboxRecoveryRecord {
        self.inner.journal.current()
    }

    pub fn journal(&self) -> Arc<Journal> {
        Arc::clone(&self.inner.journal)
    }

    /// The facts of a completed startup.
    pub fn ready(&self) -> Option<ReadyFacts> {
        self.core().ready.clone()
    }

    pub fn driver(&self) -> Arc<dyn DriverReservation> {
        Arc::clone(&self.inner.driver)
    }

    fn startup_limit(&self) -> Duration {
        Duration::from_millis(self.inner.request.policy.deadlines.startup_ms)
    }

    fn cleanup_limit(&self) -> Duration {
        Duration::from_millis(self.inner.request.policy.deadlines.cleanup_ms)
    }

    /// Marks an operation's failure, unless cleanup has already taken over.
    pub fn fence(&self, operation: Operation) {
        let mut core = self.core();
        if !core.state.in_cleanup() {
            core.state = State::Uncertain(operation);
        }
    }
}
