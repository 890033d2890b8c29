//! The sandbox owner: one reservation's whole life, from inert reservation to destroyed, with
//! cleanup ownership that no failure, cancellation or deadline can lose.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::admission::check_effective;
use super::cancel::Cancel;
use super::driver::{DriverReservation, Persist, ReadyFacts, StartContext};
use super::error::{CleanupOperation, OperationCode, OwnerError};
use super::freeze::{observe_freeze, FreezeTo};
use super::journal::Journal;
use super::observe::{bounded, enter, observe, sleep_exactly, Actual, Observed};
use super::state::{Operation, State};
use crate::policy::request::{Execution, SandboxRequest};
use crate::process::io::ProcessIo;
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::SandboxRecoveryRecord;

/// The original's reason for whatever a stop interrupts (process startup, an import).
const COMPUTE_STOPPING: &str = "Sandbox compute is stopping.";

/// The identity of one admitted transfer: only it can release the transfer slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferTicket(pub u64);

/// An admitted transfer: its kind, its ticket, and the cancellation that stop, destroy or its
/// own caller fire to interrupt whatever it waits on.
#[derive(Clone)]
struct Admitted {
    operation: Operation,
    ticket: TransferTicket,
    cancel: Cancel,
}

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
}

struct ProcessSlot {
    spec: SandboxProcessSpec,
    started: bool,
    /// The driver's process start, entered as owned work: a stop waits for it to settle (its
    /// cancellation fired first) before compute is stopped, so nothing it creates outlives it.
    start: Option<Actual<StartedChannels>>,
    io: Option<Arc<ProcessIo>>,
}

/// A started process's channels, handed from the start task to its observer (or, when nobody
/// observes any more, to the stop that drops them).
type StartedChannels = Arc<Mutex<Option<crate::lifecycle::driver::ProcessChannels>>>;

/// A process start entered by `begin_process_start`, for `observe_process_start`.
pub struct ProcessStart {
    actual: Actual<StartedChannels>,
    /// Fires when the execution ends (a stop, its deadline).
    execution: Cancel,
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

    /// Starts the sandbox once. Any failure comes back as `OwnerError::Start`: this owner keeps
    /// cleanup ownership of whatever was acquired. `caller` is the caller's cancellation.
    pub async fn start(&self, caller: Option<Cancel>) -> Result<ReadyFacts, OwnerError> {
        let actual = self.begin_start(caller.as_ref())?;
        self.observe_start(actual, caller).await
    }

    /// Enters startup synchronously (the state reads `starting` on return). Needs a tokio
    /// runtime context: the startup runs as its own task.
    pub fn begin_start(&self, caller: Option<&Cancel>) -> Result<Actual<ReadyFacts>, OwnerError> {
        let mut core = self.core();
        if core.state != State::Reserved {
            return Err(OwnerError::state(
                "Sandbox startup is once-only and cannot follow cleanup.",
            ));
        }
        core.state = State::Starting;
        if caller.is_some_and(Cancel::is_cancelled) {
            self.inner.startup_cancel.cancel(OwnerError::cancelled(
                "Sandbox startup was cancelled before entry.",
            ));
        }
        let owner = self.clone();
        let actual = enter(async move {
            let result = owner.run_startup().await;
            if result.is_err() {
                owner.fence(Operation::Start);
            }
            result
        });
        core.startup = Some(actual.clone());
        Ok(actual)
    }

    /// Observes an entered startup within `deadlines.startupMs` and the caller's cancellation.
    pub async fn observe_start(
        &self,
        actual: Actual<ReadyFacts>,
        caller: Option<Cancel>,
    ) -> Result<ReadyFacts, OwnerError> {
        let mut cancels = vec![self.inner.startup_cancel.clone()];
        cancels.extend(caller);
        let result = match observe(
            actual,
            Some(self.startup_limit()),
            &cancels,
            "sandbox startup",
        )
        .await
        {
            Observed::Settled(result) => result,
            Observed::Interrupted(reason) => {
                self.inner.startup_cancel.cancel(reason.clone());
                self.fence(Operation::Start);
                self.stop_in_background();
                Err(reason)
            }
        };
        result.map_err(|cause| OwnerError::Start {
            message: "Sandbox startup failed; its reservation retains cleanup ownership.".into(),
            cause: Arc::new(cause),
        })
    }

    async fn run_startup(&self) -> Result<ReadyFacts, OwnerError> {
        let cancel = &self.inner.startup_cancel;
        cancel.check()?;
        if let Some(completed) = Arc::clone(&self.inner.driver)
            .prepare(cancel.clone())
            .await?
        {
            self.inner.journal.complete_initial(completed).await?;
        }
        cancel.check()?;
        self.inner.journal.initialize().await?;
        cancel.check()?;
        let context = StartContext {
            cancel: cancel.clone(),
            journal: self.journal(),
        };
        let ready = Arc::clone(&self.inner.driver).start(context).await?;
        let mut core = self.core();
        if core.state != State::Starting || cancel.is_cancelled() {
            return Err(OwnerError::cancelled(
                "Sandbox startup settled after its admission was closed.",
            ));
        }
        check_effective(&self.inner.request, &ready.effective)?;
        core.ready = Some(ready.clone());
        core.state = State::Ready;
        Ok(ready)
    }

    /// Fences admissions and stops the complete workload, keeping storage. Concurrent calls
    /// join the entered stop; a failed one leaves this owner able to retry.
    pub async fn stop(&self) -> Result<(), OwnerError> {
        match self.begin_stop_call() {
            Some(actual) => self.observe_cleanup(actual, CleanupOperation::Stop).await,
            None => Ok(()),
        }
    }

    /// Stops, then releases storage.
    pub async fn destroy(&self) -> Result<(), OwnerError> {
        match self.begin_destroy_call() {
            Some(actual) => {
                self.observe_cleanup(actual, CleanupOperation::Destroy)
                    .await
            }
            None => Ok(()),
        }
    }

    /// Enters (or joins) a stop synchronously; `None` when compute is already stopped.
    pub fn begin_stop_call(&self) -> Option<Actual<()>> {
        let mut core = self.core();
        if matches!(core.state, State::Stopped | State::Destroyed) {
            return None;
        }
        Some(self.begin_stop(&mut core))
    }

    /// Enters (or joins) destruction synchronously; `None` when already destroyed.
    pub fn begin_destroy_call(&self) -> Option<Actual<()>> {
        let mut core = self.core();
        if core.state == State::Destroyed {
            return None;
        }
        core.state = State::Destroying;
        if let Some(actual) = &core.destroy {
            return Some(actual.clone());
        }
        let stopped = self.begin_stop(&mut core);
        let transfer =
            Self::cancel_transfer_locked(&core, None, "Sandbox storage is being destroyed.");
        core.destroy_attempt += 1;
        let attempt = core.destroy_attempt;
        let owner = self.clone();
        let limit = self.cleanup_limit();
        let actual = enter(async move {
            let result = async {
                stopped.await?;
                owner.await_transfer_release(transfer, limit).await?;
                // As the original: cleanup never checkpoints; the record stays as the start left it.
                Arc::clone(&owner.inner.driver).destroy().await?;
                Ok(())
            }
            .await;
            let mut core = owner.core();
            if core.destroy_attempt == attempt {
                match result {
                    Ok(()) => core.state = State::Destroyed,
                    Err(_) => {
                        core.destroy = None;
                        if core.state != State::Destroyed {
                            core.state = State::Uncertain(Operation::Destroy);
                        }
                    }
                }
            }
            result
        });
        core.destroy = Some(actual.clone());
        Some(actual)
    }

    /// Observes an entered stop or destroy within `deadlines.cleanupMs`. An observer that gives
    /// up leaves the work running (it still settles the state when it ends) and joined: a retry
    /// observes the same work again; only work that failed is entered afresh (`stop_attempt` and
    /// `destroy_attempt` tell a failed attempt's late settling from the new one's).
    pub async fn observe_cleanup(
        &self,
        actual: Actual<()>,
        operation: CleanupOperation,
    ) -> Result<(), OwnerError> {
        let what = match operation {
            CleanupOperation::Stop => "sandbox stop",
            CleanupOperation::Destroy => "sandbox destruction",
        };
        // An observation that expires leaves the work entered, and joined: as the original's
        // owner, a retry waits on the same stop or destroy until it settles (a failed one is
        // entered afresh), so a driver never sees two stops at once.
        let cause = match observe(actual, Some(self.cleanup_limit()), &[], what).await {
            Observed::Settled(Ok(())) => return Ok(()),
            Observed::Settled(Err(cause)) | Observed::Interrupted(cause) => cause,
        };
        self.fence(match operation {
            CleanupOperation::Stop => Operation::Stop,
            CleanupOperation::Destroy => Operation::Destroy,
        });
        // The original's texts; the details are in the cause.
        let message = match operation {
            CleanupOperation::Stop => "Sandbox compute cleanup did not settle successfully.",
            CleanupOperation::Destroy => "Sandbox destruction did not settle successfully.",
        };
        Err(OwnerError::Cleanup {
            operation,
            message: message.into(),
            cause: Arc::new(cause),
        })
    }

    fn stop_in_background(&self) {
        let owner = self.clone();
        tokio::spawn(async move {
            // The failure stays visible through state and the next stop or destroy call.
            let _ = owner.stop().await;
        });
    }

    /// Enters (or joins) the physical stop. Must be called with the core locked.
    fn begin_stop(&self, core: &mut Core) -> Actual<()> {
        if let Some(actual) = &core.stop {
            return actual.clone();
        }
        if core.state != State::Destroying {
            core.state = State::Stopping;
        }
        self.inner
            .startup_cancel
            .cancel(OwnerError::cancelled(COMPUTE_STOPPING));
        if let Some(execution) = core.execution.take() {
            execution.cancel(OwnerError::cancelled(COMPUTE_STOPPING));
            core.execution_end = execution.reason();
        }
        let import = Self::cancel_transfer_locked(core, Some(Operation::Import), COMPUTE_STOPPING);
        let startup = core.startup.clone();
        let process_start = core.process.as_ref().and_then(|p| p.start.clone());
        let io = core.process.as_ref().and_then(|p| p.io.clone());
        core.stop_attempt += 1;
        let attempt = core.stop_attempt;
        let owner = self.clone();
        let limit = self.cleanup_limit();
        let actual = enter(async move {
            let physical = async {
                if let Some(process_start) = process_start {
                    // Cancelled above: it settles at its next checkpoint. Channels nobody took
                    // any more are dropped here, which closes them.
                    let settled = bounded(limit, "the cancelled process start", async {
                        Ok(process_start.await)
                    })
                    .await?;
                    if let Ok(channels) = settled {
                        drop(
                            channels
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take(),
                        );
                    }
                }
                if let Some(io) = &io {
                    // An engine holds a killed container while its attached output is unread.
                    io.stopping();
                }
                // The driver's own stop is its work: it is awaited, not abandoned (an observer
                // may give up on it; a retry joins it).
                Arc::clone(&owner.inner.driver).stop().await?;
                if let Some(io) = io {
                    // Compute is gone: what the engine still sends is delivered (within a bound),
                    // then every pending read and write is unblocked.
                    io.close_after_stop().await;
                }
                // As the original: the cancelled import's work settles after the driver's stop
                // began (a source that never settles holds the stop's settlement, never the
                // stop of the workload itself).
                owner.await_transfer_release(import, limit).await?;
                if let Some(startup) = startup {
                    // Entered startup must settle before compute counts as stopped.
                    bounded(limit, "the cancelled startup", async { Ok(startup.await) })
                        .await?
                        .ok();
                }
                Ok(())
            }
            .await;
            let mut core = owner.core();
            if core.stop_attempt == attempt {
                match physical {
                    Ok(()) => {
                        if !matches!(core.state, State::Destroying | State::Destroyed) {
                            core.state = State::Stopped;
                        }
                    }
                    Err(_) => {
                        core.stop = None;
                        if !matches!(core.state, State::Destroying | State::Destroyed) {
                            core.state = State::Uncertain(Operation::Stop);
                        }
                    }
                }
            }
            physical
        });
        core.stop = Some(actual.clone());
        actual
    }

    /// Pauses or resumes the running process: only while compute is ready and the process has
    /// started (a stop or destroy that comes later still removes a paused sandbox). Observed
    /// within the cleanup deadline.
    pub async fn freeze(&self, to: FreezeTo) -> Result<(), OwnerError> {
        {
            let core = self.core();
            let started = core.process.as_ref().is_some_and(|slot| slot.started);
            if core.state != State::Ready || !started {
                return Err(OwnerError::state(
                    "only a ready sandbox whose process has started can be paused or resumed",
                ));
            }
        }
        let driver = self.driver();
        let work = match to {
            FreezeTo::Paused => driver.pause(),
            FreezeTo::Running => driver.resume(),
        };
        observe_freeze(work, to, self.cleanup_limit()).await
    }

    pub fn driver(&self) -> Arc<dyn DriverReservation> {
        Arc::clone(&self.inner.driver)
    }

    /// Admits one import: ready compute, no process reserved, no other transfer.
    pub fn begin_import(&self) -> Result<TransferTicket, OwnerError> {
        let mut core = self.core();
        if core.state != State::Ready || core.process.is_some() || core.transfer.is_some() {
            return Err(OwnerError::state(
                "File import requires ready compute, no entered import, and no process reservation.",
            ));
        }
        Ok(Self::admit(&mut core, Operation::Import))
    }

    /// Admits one export: completely stopped compute and no other transfer.
    pub fn begin_export(&self) -> Result<TransferTicket, OwnerError> {
        let mut core = self.core();
        if core.state != State::Stopped || core.transfer.is_some() {
            return Err(OwnerError::state(
                "File export requires stopped compute and no other entered transfer.",
            ));
        }
        Ok(Self::admit(&mut core, Operation::Export))
    }

    fn admit(core: &mut Core, operation: Operation) -> TransferTicket {
        core.tickets += 1;
        let ticket = TransferTicket(core.tickets);
        core.transfer = Some(Admitted {
            operation,
            ticket,
            cancel: Cancel::new(),
        });
        ticket
    }

    /// Whether `ticket` still holds the transfer slot (admitted and not yet ended).
    pub fn holds_transfer(&self, ticket: TransferTicket) -> bool {
        self.core()
            .transfer
            .as_ref()
            .is_some_and(|admitted| admitted.ticket == ticket)
    }

    /// The cancellation of the transfer admitted now, if any (every native transfer step runs
    /// under it, so stop, destroy or an interrupted caller end whatever the step waits on).
    pub fn current_transfer_cancel(&self) -> Option<Cancel> {
        self.core()
            .transfer
            .as_ref()
            .map(|admitted| admitted.cancel.clone())
    }

    /// The cancellation of the transfer `ticket`, while it holds the slot.
    pub fn transfer_cancel(&self, ticket: TransferTicket) -> Option<Cancel> {
        self.core()
            .transfer
            .as_ref()
            .filter(|admitted| admitted.ticket == ticket)
            .map(|admitted| admitted.cancel.clone())
    }

    /// Waits until `ticket` no longer holds the transfer slot.
    pub async fn transfer_released(&self, ticket: TransferTicket) {
        loop {
            let released = self.inner.transfer_released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if !self.holds_transfer(ticket) {
                return;
            }
            released.await;
        }
    }

    /// Releases the transfer `ticket` admitted, once: a ticket already released (or never
    /// admitted) releases nothing, so a later transfer is never ended by an earlier one's
    /// cleanup. An import that failed after it was admitted fences execution for good: it is
    /// never replayed. Returns whether this call released it.
    pub fn end_transfer(&self, ticket: TransferTicket, fence_import: bool) -> bool {
        let operation = {
            let mut core = self.core();
            match &core.transfer {
                Some(admitted) if admitted.ticket == ticket => {
                    let operation = admitted.operation;
                    core.transfer = None;
                    Some(operation)
                }
                _ => None,
            }
        };
        if operation.is_some() {
            self.inner.transfer_released.notify_waiters();
        }
        if fence_import && operation == Some(Operation::Import) {
            self.fence(Operation::Import);
        }
        operation.is_some()
    }

    /// Cancels the admitted transfer of kind `only` (any kind when `None`) with `reason`, and
    /// returns its ticket so cleanup can wait for its release.
    fn cancel_transfer_locked(
        core: &Core,
        only: Option<Operation>,
        reason: &str,
    ) -> Option<TransferTicket> {
        let admitted = core.transfer.as_ref()?;
        if only.is_some_and(|operation| operation != admitted.operation) {
            return None;
        }
        admitted.cancel.cancel(OwnerError::cancelled(reason));
        Some(admitted.ticket)
    }

    /// Waits, within `limit`, until a cancelled transfer released its slot: no state reads
    /// `stopped` (or `destroyed`) while its bytes can still move.
    async fn await_transfer_release(
        &self,
        ticket: Option<TransferTicket>,
        limit: Duration,
    ) -> Result<(), OwnerError> {
        let Some(ticket) = ticket else {
            return Ok(());
        };
        bounded(limit, "the cancelled transfer", async {
            self.transfer_released(ticket).await;
            Ok(())
        })
        .await
    }

    /// Reserves the one process (synchronously): closes imports for good.
    pub fn reserve_process(&self, spec: SandboxProcessSpec) -> Result<(), OwnerError> {
        let mut core = self.core();
        if core.state != State::Ready || core.process.is_some() || core.transfer.is_some() {
            return Err(OwnerError::state(
                "A sandbox admits one process reservation, after its imports settle.",
            ));
        }
        core.process = Some(ProcessSlot {
            spec,
            started: false,
            start: None,
            io: None,
        });
        Ok(())
    }

    /// Marks the reserved process as started (once, while compute is ready).
    fn claim_process_start(core: &mut Core) -> Result<SandboxProcessSpec, OwnerError> {
        let ready = core.state == State::Ready;
        match core.process.as_mut() {
            Some(slot) if ready && !slot.started => {
                slot.started = true;
                Ok(slot.spec.clone())
            }
            _ => Err(OwnerError::state(
                "Process startup is once-only and requires ready compute.",
            )),
        }
    }

    /// Process start entry for a driver whose process streams live outside Rust (a JavaScript
    /// driver): admission and the execution policy stay here, the streams stay with the driver.
    pub fn enter_external_process(&self) -> Result<(), OwnerError> {
        let mut core = self.core();
        Self::claim_process_start(&mut core)?;
        self.enter_execution_locked(&mut core).map(drop)
    }

    /// Enters the reserved process's start (once) now (never waits): the execution policy takes over
    /// at entry, and the driver's start is owned work from there. Admission, the execution
    /// policy and the start task are entered under one lock, so a stop either sees the start
    /// (and waits for it) or the start sees the stop (and never begins). A start refused for
    /// state fences nothing; one whose caller cancelled before entry never reaches the driver
    /// and, as every admitted start that fails (the original's rule), fences and stops.
    pub fn begin_process_start(&self, caller: Option<&Cancel>) -> Result<ProcessStart, OwnerError> {
        let entered = {
            let mut core = self.core();
            let spec = Self::claim_process_start(&mut core)?;
            match caller.and_then(Cancel::reason) {
                Some(reason) => Err(reason),
                None => self.enter_execution_locked(&mut core).map(|execution| {
                    let driver = Arc::clone(&self.inner.driver);
                    let cancel = execution.clone();
                    // Shared observation needs a clonable output: the channels go in a slot.
                    let actual = enter(async move {
                        driver
                            .start_process(spec, cancel)
                            .await
                            .map(|channels| Arc::new(Mutex::new(Some(channels))))
                    });
                    if let Some(slot) = core.process.as_mut() {
                        slot.start = Some(actual.clone());
                    }
                    (actual, execution)
                }),
            }
        };
        entered
            .map(|(actual, execution)| ProcessStart { actual, execution })
            .inspect_err(|_| {
                self.fence(Operation::Process);
                self.stop_in_background();
            })
    }

    /// Observes an entered process start within `deadlines.startupMs`, the execution's and the
    /// caller's cancellation; its streams come back under the stream limits.
    pub async fn observe_process_start(
        &self,
        start: ProcessStart,
        caller: Option<Cancel>,
    ) -> Result<Arc<ProcessIo>, OwnerError> {
        let ProcessStart { actual, execution } = start;
        let mut cancels = vec![execution];
        cancels.extend(caller);
        let channels = match observe(
            actual,
            Some(self.startup_limit()),
            &cancels,
            "process startup",
        )
        .await
        {
            Observed::Settled(Ok(channels)) => channels,
            Observed::Settled(Err(error)) | Observed::Interrupted(error) => {
                self.fence(Operation::Process);
                self.stop_in_background();
                return Err(error);
            }
        };
        let Some(channels) = channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Err(OwnerError::cancelled(
                "Process startup settled after its admission was closed.",
            ));
        };
        // The streams' violation stops the owner without keeping it alive: the owner holds the
        // streams, so a strong reference back would be a cycle that outlives every handle.
        let owner = Arc::downgrade(&self.inner);
        let io = ProcessIo::new(
            channels,
            self.inner.request.policy.streams,
            Arc::new(move || {
                if let Some(inner) = owner.upgrade() {
                    SandboxOwner { inner }.stop_in_background();
                }
            }),
        );
        let still_ready = {
            let mut core = self.core();
            if let Some(slot) = core.process.as_mut() {
                slot.io = Some(Arc::clone(&io));
            }
            core.state == State::Ready
        };
        // A limit crossed by the first output already stopped the sandbox: the streams carry
        // that failure, so they are still handed over.
        if !still_ready && !io.violated() {
            // The stop entered before these streams were recorded does not know them.
            io.stop_unclaimed();
            return Err(OwnerError::cancelled(
                "Process startup settled after its admission was closed.",
            ));
        }
        Ok(io)
    }

    /// Process start entry: from here the execution policy owns the whole workload. With a
    /// deadline, compute stops when it fires, however far away it is.
    pub fn enter_execution(&self) -> Result<Cancel, OwnerError> {
        self.enter_execution_locked(&mut self.core())
    }

    fn enter_execution_locked(&self, core: &mut Core) -> Result<Cancel, OwnerError> {
        if core.state != State::Ready {
            return Err(OwnerError::state("process startup requires ready compute"));
        }
        if core.execution.is_some() {
            return Err(OwnerError::state("a sandbox admits one process execution"));
        }
        let execution = Cancel::new();
        core.execution = Some(execution.clone());
        if let Execution::Deadline { timeout_ms } = self.inner.request.policy.execution {
            let owner = self.clone();
            let timer = execution.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = timer.cancelled() => {}
                    () = sleep_exactly(Duration::from_millis(timeout_ms)) => {
                        timer.cancel(OwnerError::operation(
                            OperationCode::DeadlineExceeded,
                            "Sandbox execution exceeded its deadline.",
                        ));
                        let _ = owner.stop().await;
                    }
                }
            });
        }
        Ok(execution)
    }
}
