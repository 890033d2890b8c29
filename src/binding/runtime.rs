//! The async runtime the addon's work runs on. Its work relays bytes between JavaScript, the
//! engine and the host's files; the copying of the same bytes is done by the engine's own
//! processes (the engine, its shim, the guest) on the same cores. So the runtime takes at most
//! half the cores (at least one worker): on a 2-core machine one worker spent less CPU per GiB
//! of stdout than two in every round measured, and moved large files faster (no byte handed
//! from one worker to another). `TOKIO_WORKER_THREADS`, when set to a positive integer, decides
//! instead, up to four workers per core; any other value is ignored.
//!
//! napi starts the runtime when the first Node environment that loads the addon starts and shuts
//! it down when the last one exits; worker threads and reloads can repeat that cycle. The addon
//! owns every one of those starts: napi never builds a runtime of its own, which would size
//! itself from `TOKIO_WORKER_THREADS` and panic on a value it cannot use — a panic inside module
//! registration aborts the host process.

use std::future::Future;
use std::pin::Pin;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use napi::bindgen_prelude::{
    register_async_runtime, retain_current_module_for_unload_safety, AsyncRuntime,
    AsyncRuntimeRejection, AsyncRuntimeTask,
};
use napi::{Error, Result, Status};
use tokio::runtime::{Handle, Runtime};

use crate::lifecycle::error::OwnerError;

/// Workers for `cores` cores.
fn workers(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// At most this many workers per core, whatever the environment asks: far more threads than
/// cores only adds switching, and a huge count would fail to spawn.
const MAX_WORKERS_PER_CORE: usize = 4;

/// Workers for `cores` cores unless `requested` (the value of `TOKIO_WORKER_THREADS`) is a
/// positive integer, which decides up to `MAX_WORKERS_PER_CORE` per core.
fn worker_count(requested: Option<&std::ffi::OsStr>, cores: usize) -> usize {
    let cores = cores.max(1);
    requested
        .and_then(|value| value.to_str())
        .map(|value| {
            let value = value.trim();
            value.strip_prefix('+').unwrap_or(value)
        })
        .filter(|value| !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
        // Digits only: a count too large for `usize` is just very large.
        .map(|digits| digits.parse::<usize>().unwrap_or(usize::MAX))
        .filter(|&n| n > 0)
        .map_or_else(
            || workers(cores),
            |n| n.min(cores.saturating_mul(MAX_WORKERS_PER_CORE)),
        )
}

/// How long a shutdown waits for the runtime's threads before it leaves the rest to finish on
/// their own (napi's own runtime waits as long). Those threads can still run the addon's code,
/// which is why `start` pins the addon's image in memory first.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(100);

/// A multi-thread tokio runtime sized by `worker_count`, built at each `start` and shut down at
/// each `shutdown`. Invariant: `slot` holds a runtime exactly between a successful `start` and
/// the next `shutdown`; its lock is held only to read, build or take it, never while a task runs
/// or a runtime shuts down.
struct SizedRuntime {
    slot: &'static RwLock<Option<Runtime>>,
}

impl SizedRuntime {
    /// The running runtime's handle, or the error a caller reports when there is none.
    fn handle(&self) -> Result<Handle> {
        self.slot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|runtime| runtime.handle().clone())
            .ok_or_else(stopped)
    }
}

fn stopped() -> Error {
    Error::new(
        Status::GenericFailure,
        "the addon's async runtime is not running (it did not start, or it was shut down)",
    )
}

fn build() -> std::io::Result<Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Always set: a builder left to read the variable itself panics on a value it cannot use.
        .worker_threads(worker_count(
            std::env::var_os("TOKIO_WORKER_THREADS").as_deref(),
            cores,
        ))
        .build()
}

// SAFETY: the contract asks that once `shutdown` returns, nothing of this backend can run code
// from the addon's image. `start` pins the image in memory (napi's
// `retain_current_module_for_unload_safety`) before it creates any thread, so a worker or
// blocking thread that outlives `SHUTDOWN_WAIT` still runs code that stays mapped, exactly as
// napi's own tokio runtime does. Tasks are owned by tokio from `spawn` on and are dropped (which
// rejects their promises) when the runtime shuts down.
unsafe impl AsyncRuntime for SizedRuntime {
    fn spawn(
        &self,
        task: AsyncRuntimeTask,
    ) -> std::result::Result<(), AsyncRuntimeRejection<AsyncRuntimeTask>> {
        match self.handle() {
            Ok(handle) => {
                drop(handle.spawn(task));
                Ok(())
            }
            Err(error) => Err(AsyncRuntimeRejection::new(task, error)),
        }
    }

    fn block_on(&self, future: Pin<&mut dyn Future<Output = ()>>) -> Result<()> {
        if Handle::try_current().is_ok() {
            // tokio panics on a runtime blocked on from inside a runtime.
            return Err(Error::new(
                Status::GenericFailure,
                "blocking on the addon's async runtime from inside a runtime",
            ));
        }
        self.handle()?.block_on(future);
        Ok(())
    }

    fn start(&self) -> Result<()> {
        retain_current_module_for_unload_safety();
        let mut slot = self.slot.write().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(build().map_err(|e| {
                Error::new(
                    Status::GenericFailure,
                    format!("the addon's async runtime could not start: {e}"),
                )
            })?);
        }
        Ok(())
    }

    fn shutdown(&self) -> Result<()> {
        let runtime = self
            .slot
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match runtime {
            // tokio panics on a wait for a runtime's threads from inside a runtime: there, the
            // threads are told to stop without waiting for them.
            Some(runtime) if Handle::try_current().is_ok() => runtime.shutdown_background(),
            Some(runtime) => runtime.shutdown_timeout(SHUTDOWN_WAIT),
            None => {}
        }
        Ok(())
    }

    fn spawn_blocking(
        &self,
        work: Box<dyn FnOnce() + Send + 'static>,
    ) -> std::result::Result<(), AsyncRuntimeRejection<Box<dyn FnOnce() + Send + 'static>>> {
        match self.handle() {
            Ok(handle) => {
                drop(handle.spawn_blocking(work));
                Ok(())
            }
            Err(error) => Err(AsyncRuntimeRejection::new(work, error)),
        }
    }
}

/// The slot of the runtime napi starts and shuts down through the one registered backend.
static RUNNING: RwLock<Option<Runtime>> = RwLock::new(None);

#[napi_derive::module_init]
fn init() {
    // Registration only publishes the backend; napi calls `start` before the first task.
    register_async_runtime(SizedRuntime { slot: &RUNNING });
}

/// Runs `work` inside the addon's runtime (work that spawns tasks while it builds something),
/// or fails when the runtime cannot run. napi starts the runtime first if its cycle left it
/// stopped: an environment that registered while the last one's cleanup was shutting the
/// runtime down finds it stopped, as does any call after a start that failed.
pub(crate) fn within<T>(work: impl FnOnce() -> T) -> Result<T> {
    let running = SizedRuntime { slot: &RUNNING };
    // Only a stopped runtime needs napi's restart path (its registry's locks): a direct stdin
    // write comes through here for every chunk.
    let handle = match running.handle() {
        Ok(handle) => handle,
        Err(_) => napi::bindgen_prelude::within_runtime_if_available(|| running.handle())?,
    };
    let _entered = handle.enter();
    Ok(work())
}

/// `within` for the owner's work: a runtime that cannot run fails it as a driver error.
pub(crate) fn within_owner<T>(
    work: impl FnOnce() -> std::result::Result<T, OwnerError>,
) -> std::result::Result<T, OwnerError> {
    within(work).unwrap_or_else(|stopped| Err(OwnerError::driver(stopped.reason)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_cores_and_at_least_one_worker() {
        assert_eq!(workers(1), 1);
        assert_eq!(workers(2), 1);
        assert_eq!(workers(3), 1);
        assert_eq!(workers(16), 8);
    }

    #[test]
    fn a_positive_worker_count_in_the_environment_decides_anything_else_is_ignored() {
        let requested = |value: &str| worker_count(Some(std::ffi::OsStr::new(value)), 4);
        assert_eq!(requested("3"), 3);
        assert_eq!(requested(" 5 "), 5);
        for ignored in ["0", "-1", "abc", "", "2.5"] {
            assert_eq!(requested(ignored), 2, "{ignored:?}");
        }
        assert_eq!(worker_count(None, 4), 2);
        assert_eq!(worker_count(None, 1), 1);
    }

    #[test]
    fn a_requested_count_is_capped_at_four_workers_per_core() {
        let requested = |value: &str, cores| worker_count(Some(std::ffi::OsStr::new(value)), cores);
        assert_eq!(requested("16", 4), 16);
        assert_eq!(requested("17", 4), 16);
        assert_eq!(requested("1000000", 2), 8);
        assert_eq!(requested("18446744073709551615", 2), 8);
        assert_eq!(requested("99999999999999999999999", 2), 8);
        assert_eq!(requested(&"9".repeat(100), 2), 8);
        assert_eq!(requested("+3", 2), 3);
        assert_eq!(requested("+", 2), 1);
        assert_eq!(requested("++3", 2), 1);
        assert_eq!(requested("000", 2), 1);
        assert_eq!(requested("1000000", 0), 4);
    }

    /// The registered backend (registered at load, in this test binary too): work within it
    /// runs inside the runtime, also after napi shut the runtime down, which happens when the
    /// last environment holding the addon exits.
    #[test]
    fn work_within_the_runtime_finds_it_running_also_after_napi_shut_it_down() {
        for _ in 0..2 {
            let inside = within(|| Handle::try_current().is_ok()).expect("the runtime runs");
            assert!(inside);
            // Now running: entered directly, without napi's restart path.
            let again = within(|| Handle::try_current().is_ok()).expect("still running");
            assert!(again);
            napi::bindgen_prelude::shutdown_async_runtime();
            assert!(SizedRuntime { slot: &RUNNING }.handle().is_err());
        }
    }

    #[test]
    fn the_runtime_runs_between_start_and_shutdown_and_starts_again() {
        static SLOT: RwLock<Option<Runtime>> = RwLock::new(None);
        let backend = SizedRuntime { slot: &SLOT };
        assert!(backend.handle().is_err());
        backend
            .shutdown()
            .expect("a shutdown before any start is a no-op");
        for _ in 0..2 {
            backend.start().expect("starts");
            backend.start().expect("a second start keeps the runtime");
            let (sender, receiver) = std::sync::mpsc::channel();
            let handle = backend.handle().expect("running");
            drop(handle.spawn(async move { sender.send(7).expect("receiver waits") }));
            assert_eq!(receiver.recv_timeout(Duration::from_secs(5)), Ok(7));
            let (sender, receiver) = std::sync::mpsc::channel();
            let mut asked = std::pin::pin!(async move {
                sender
                    .send(Handle::try_current().is_ok())
                    .expect("receiver waits");
            });
            backend.block_on(asked.as_mut()).expect("blocks on it");
            assert_eq!(receiver.try_recv(), Ok(true), "runs inside the runtime");
            let nested = handle.block_on(async {
                let mut nothing = std::pin::pin!(async {});
                backend.block_on(nothing.as_mut())
            });
            assert!(nested.is_err(), "no block_on from inside the runtime");
            // A shutdown from inside the runtime does not panic.
            let (sender, receiver) = std::sync::mpsc::channel();
            let from_inside = SizedRuntime { slot: backend.slot };
            drop(handle.spawn(async move {
                sender.send(from_inside.shutdown()).expect("receiver waits");
            }));
            assert_eq!(
                receiver
                    .recv_timeout(Duration::from_secs(5))
                    .map(|r| r.is_ok()),
                Ok(true)
            );
            assert!(backend.handle().is_err());
        }
    }
}
