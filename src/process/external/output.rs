//! The output side of an external process: a queue of at most `QUEUE` events between the
//! feeder and the output pump, so what the feeder holds back while the pump waits for staging
//! space is at most one event per offer it made since (the feeder pauses on `Offer::Full`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::Stream;

use super::{lock, ExternalFeed, Wake};
use crate::lifecycle::driver::{OutputEvent, OutputStream};
use crate::lifecycle::error::OwnerError;

/// Events the queue holds before an offer is refused for room.
const QUEUE: usize = 2;

/// What became of an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Taken,
    /// No room now: offer it again after `Wake::Room`, and nothing else before it.
    Full,
    /// The owner reads nothing more: nothing offered will be delivered.
    Closed,
}

impl Offer {
    pub fn as_str(self) -> &'static str {
        match self {
            Offer::Taken => "taken",
            Offer::Full => "full",
            Offer::Closed => "closed",
        }
    }
}

/// How a stream stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The driver closed it without ending it.
    Closed,
    /// It had not closed this many milliseconds after a stop closed it.
    NotClosedWithin(u64),
}

impl Cut {
    pub(super) fn failure(self, stream: OutputStream) -> OwnerError {
        let name = stream.name();
        let why = match self {
            Cut::Closed => "was closed before the driver ended it".to_owned(),
            Cut::NotClosedWithin(ms) => format!("did not close within {ms} ms of the stop"),
        };
        OwnerError::cancelled(format!(
            "the process's {name} {why}: what it still held was not delivered"
        ))
    }
}

#[derive(Default)]
pub(super) struct Queue {
    events: VecDeque<OutputEvent>,
    /// Per stream (stdout, stderr): its end or failure was queued.
    finished: [bool; 2],
    /// The pump's side is gone.
    closed: bool,
    /// An offer was refused for room: the feeder waits for `Wake::Room`.
    refused: bool,
    pump: Option<Waker>,
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

impl Queue {
    /// Queues `event` if there is room; the pump's waker to wake once the lock is let go.
    pub(super) fn offer(&mut self, event: OutputEvent) -> (Offer, Option<Waker>) {
        if self.closed {
            return (Offer::Closed, None);
        }
        let stream = match &event {
            OutputEvent::Bytes(stream, _) => *stream,
            OutputEvent::End(stream) | OutputEvent::Failed(stream, _) => *stream,
        };
        if self.finished[index(stream)] {
            // Nothing follows a stream's end or failure.
            return (Offer::Taken, None);
        }
        if self.events.len() >= QUEUE {
            self.refused = true;
            return (Offer::Full, None);
        }
        if !matches!(event, OutputEvent::Bytes(..)) {
            self.finished[index(stream)] = true;
        }
        self.events.push_back(event);
        (Offer::Taken, self.pump.take())
    }
}

/// The pump's side: the queued events in order; ends once both streams finished.
pub(super) struct Reader {
    feed: Arc<ExternalFeed>,
}

impl Reader {
    pub(super) fn new(feed: Arc<ExternalFeed>) -> Self {
        Self { feed }
    }
}

impl Stream for Reader {
    type Item = Result<OutputEvent, OwnerError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut queue = lock(&self.feed.output);
        let Some(event) = queue.events.pop_front() else {
            if queue.finished == [true, true] {
                return Poll::Ready(None);
            }
            queue.pump = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let room = std::mem::take(&mut queue.refused);
        drop(queue);
        if room {
            self.feed.wake(Wake::Room);
        }
        Poll::Ready(Some(Ok(event)))
    }
}

impl Drop for Reader {
    /// The owner reads nothing more: what is queued is dropped, and a feeder waiting for room
    /// is told (its next offer is `Closed`).
    fn drop(&mut self) {
        let mut queue = lock(&self.feed.output);
        queue.closed = true;
        queue.events.clear();
        let refused = std::mem::take(&mut queue.refused);
        drop(queue);
        if refused {
            self.feed.wake(Wake::Room);
        }
    }
}
