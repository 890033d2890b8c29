//! A process whose streams live outside Rust (a JavaScript driver's), run through the same
//! `ProcessIo` as an engine's: its output is offered event by event into a small queue the
//! output pump drains (`output`), its stdin is taken chunk by chunk by whoever writes it to the
//! driver (`input`), and its fate is reported or lost (`exit`). The staging, the stream limits,
//! the stalls and the exit's cause are then the owner's, exactly as for the Docker backend.
//!
//! Invariants:
//! - output events reach the pump in the order they were offered; an offer never waits: it is
//!   taken, refused for room (`Offer::Full`, and the feeder is woken with `Wake::Room` once
//!   there is room), or refused for good once the owner reads nothing more (`Offer::Closed`);
//! - stdin hands out one chunk at a time; a write is taken once it is in the queue, and the
//!   feeder is woken with `Wake::Input` only when it said it had nothing to do;
//! - every wait of the writer and the pump ends when the feed fails, ends, or is dropped.

mod exit;
mod input;
mod output;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::{FutureExt, StreamExt};

pub use exit::reported_exit;
pub use input::Take;
pub use output::{Cut, Offer};

use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{OutputEvent, OutputStream, ProcessChannels, ProcessExit};
use crate::lifecycle::error::OwnerError;

/// Why the feeder is woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// stdin has a chunk or its end to take.
    Input,
    /// The output queue has room for what was refused.
    Room,
}

/// Called (from any thread, never under a lock of the feed) to wake the feeder.
pub type OnWake = Arc<dyn Fn(Wake) + Send + Sync>;

pub struct ExternalSettings {
    /// Fires when the process's execution ends (a stop begins).
    pub execution: Cancel,
    /// A receipt lost by the driver is `Unavailable` this long after the stop began, at most.
    pub cleanup: Duration,
    pub on_wake: OnWake,
}

/// The feeder's side: what it offers, takes and reports.
pub struct ExternalFeed {
    output: Mutex<output::Queue>,
    input: Mutex<input::Queue>,
    exit: exit::Receipt,
    execution: Cancel,
    on_wake: OnWake,
}

/// The channels the owner runs, and the feed the driver's streams go through.
pub fn external_process(settings: ExternalSettings) -> (ProcessChannels, Arc<ExternalFeed>) {
    let (receipt, fate) = exit::receipt(settings.execution.clone(), settings.cleanup);
    let feed = Arc::new(ExternalFeed {
        output: Mutex::default(),
        input: Mutex::default(),
        exit: receipt,
        execution: settings.execution,
        on_wake: settings.on_wake,
    });
    let channels = ProcessChannels {
        input: Box::pin(input::Writer::new(Arc::clone(&feed))),
        output: output::Reader::new(Arc::clone(&feed)).boxed(),
        exit: fate.boxed(),
    };
    (channels, feed)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ExternalFeed {
    /// Offers bytes the process wrote to `stream`.
    pub fn offer(&self, stream: OutputStream, bytes: bytes::Bytes) -> Offer {
        self.offer_event(OutputEvent::Bytes(stream, bytes))
    }

    /// `stream` ended on its own.
    pub fn offer_end(&self, stream: OutputStream) -> Offer {
        self.offer_event(OutputEvent::End(stream))
    }

    /// `stream` failed with `error`.
    pub fn offer_failure(&self, stream: OutputStream, error: OwnerError) -> Offer {
        self.offer_event(OutputEvent::Failed(stream, error))
    }

    /// `stream` stopped before its end (see `Cut`): it fails with `cancelled`.
    pub fn offer_cut(&self, stream: OutputStream, cut: Cut) -> Offer {
        self.offer_event(OutputEvent::Failed(stream, cut.failure(stream)))
    }

    fn offer_event(&self, event: OutputEvent) -> Offer {
        let (offer, waker) = lock(&self.output).offer(event);
        if let Some(waker) = waker {
            waker.wake();
        }
        offer
    }

    /// The next thing to write to the driver's stdin.
    pub fn input_take(&self) -> Take {
        let (take, wake) = lock(&self.input).take();
        if let Some(waker) = wake {
            waker.wake();
        }
        take
    }

    /// The driver's stdin finished: EOF reached the process.
    pub fn input_ended(&self) {
        let waker = lock(&self.input).ended();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The driver's stdin failed with `cause` (its error, as the driver gave it).
    pub fn input_failed(&self, cause: OwnerError) {
        self.fail_input(input::failed(cause, self.execution.is_cancelled()));
    }

    /// The driver's stdin closed without an error (or was left by a stop).
    pub fn input_closed(&self) {
        self.fail_input(input::closed(self.execution.is_cancelled()));
    }

    fn fail_input(&self, failure: OwnerError) {
        let waker = lock(&self.input).fail(failure);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The driver reported the process's fate (`None`: its receipt is lost).
    pub fn report_exit(&self, exit: Option<ProcessExit>) {
        self.exit.report(exit);
    }

    /// The driver's stop settled: a lost receipt counts as `Unavailable` shortly after.
    pub fn stop_settled(&self) {
        self.exit.stop_settled();
    }

    fn wake(&self, wake: Wake) {
        (self.on_wake)(wake);
    }
}

#[cfg(test)]
mod tests;
