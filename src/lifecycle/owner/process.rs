//! The one process: its reservation (which closes imports for good), its admission (once, while
//! compute is ready), and its start, entered as owned work under the execution policy and
//! observed within `deadlines.startupMs`; its streams come back under the stream limits.

use std::sync::{Arc, Mutex, PoisonError};

use super::{Core, SandboxOwner};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::observe::{enter, observe, Actual, Observed};
use crate::lifecycle::state::{Operation, State};
use crate::process::io::ProcessIo;
use crate::process::spec::SandboxProcessSpec;

pub(super) struct ProcessSlot {
    spec: SandboxProcessSpec,
    pub(super) started: bool,
    /// The driver's process start, entered as owned work: a stop waits for it to settle (its
    /// cancellation fired first) before compute is stopped, so nothing it creates outlives it.
    pub(super) start: Option<Actual<StartedChannels>>,
    pub(super) io: Option<Arc<ProcessIo>>,
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
                // The original's words; the caller's signal reason is attached in JavaScript.
                Some(_) => Err(OwnerError::cancelled(
                    "Process startup was cancelled before entry.",
                )),
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
            Arc::new(move |limit| {
                if let Some(inner) = owner.upgrade() {
                    SandboxOwner { inner }.stop_for(limit);
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
}
