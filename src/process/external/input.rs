//! The stdin side of an external process: one chunk at a time between the owner's stdin lane
//! and the feeder, which writes it to the driver's stdin and takes the next once that stdin has
//! room. A write is taken once it is queued; the end (EOF) is done once the driver's stdin
//! finished; a failure of the driver's stdin fails what waits and everything after.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::{lock, ExternalFeed, Wake};
use crate::lifecycle::error::{OperationCode, OwnerError};

/// What the feeder is handed.
#[derive(Debug, Clone, PartialEq)]
pub enum Take {
    /// Write this to the driver's stdin.
    Chunk(Bytes),
    /// End the driver's stdin, then report `input_ended` (or its failure).
    End,
    /// Nothing now: the feeder is woken with `Wake::Input` when there is.
    Nothing,
    /// Nothing ever again (stdin ended or failed).
    Over,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Eof {
    #[default]
    Open,
    /// The owner ended stdin: the feeder is to end the driver's.
    Asked,
    /// The feeder was handed the end.
    Handed,
    /// The driver's stdin finished.
    Done,
}

#[derive(Default)]
pub(super) struct Queue {
    chunk: Option<Bytes>,
    eof: Eof,
    failure: Option<OwnerError>,
    /// The feeder found nothing to take: it waits for `Wake::Input`.
    feeder_idle: bool,
    writer: Option<Waker>,
}

impl Queue {
    /// The next thing for the feeder, and the writer's waker to wake once the lock is let go.
    pub(super) fn take(&mut self) -> (Take, Option<Waker>) {
        if self.failure.is_some() {
            return (Take::Over, None);
        }
        if let Some(chunk) = self.chunk.take() {
            return (Take::Chunk(chunk), self.writer.take());
        }
        match self.eof {
            Eof::Asked => {
                self.eof = Eof::Handed;
                (Take::End, None)
            }
            Eof::Handed | Eof::Done => (Take::Over, None),
            Eof::Open => {
                self.feeder_idle = true;
                (Take::Nothing, None)
            }
        }
    }

    pub(super) fn ended(&mut self) -> Option<Waker> {
        if self.failure.is_none() {
            self.eof = Eof::Done;
        }
        self.writer.take()
    }

    /// Fails stdin with `failure` (the first one counts); a stdin that already delivered its
    /// end has nothing left to fail (a driver's stdin closes after it finished).
    pub(super) fn fail(&mut self, failure: OwnerError) -> Option<Waker> {
        if self.failure.is_none() && self.eof != Eof::Done {
            self.failure = Some(failure);
            self.chunk = None;
        }
        self.writer.take()
    }

    /// Whether the feeder must be woken for what was just queued.
    fn wake_feeder(&mut self) -> bool {
        std::mem::take(&mut self.feeder_idle)
    }
}

const NOT_DELIVERED: &str = "what was written was not delivered";

/// The driver's stdin failed with `cause`; once compute is stopping, that is the stop's doing.
pub(super) fn failed(cause: OwnerError, stopping: bool) -> OwnerError {
    if stopping {
        return stopped();
    }
    OwnerError::Operation {
        code: OperationCode::StreamFailure,
        message: format!("writing the process's stdin failed: {cause}"),
        cause: Some(Arc::new(cause)),
    }
}

/// The driver's stdin closed without an error.
pub(super) fn closed(stopping: bool) -> OwnerError {
    if stopping {
        return stopped();
    }
    OwnerError::cancelled(format!("the process's stdin was closed: {NOT_DELIVERED}"))
}

fn stopped() -> OwnerError {
    OwnerError::cancelled(format!(
        "the sandbox stopped before the driver took the process's stdin: {NOT_DELIVERED}"
    ))
}

/// The owner's side: an `AsyncWrite` whose writes the feeder takes. Dropped without a shutdown,
/// it still ends the driver's stdin.
pub(super) struct Writer {
    feed: Arc<ExternalFeed>,
}

impl Writer {
    pub(super) fn new(feed: Arc<ExternalFeed>) -> Self {
        Self { feed }
    }

    /// Runs `step` on the queue; wakes the feeder after the lock is let go if it asks to.
    fn with_queue<T>(&self, step: impl FnOnce(&mut Queue) -> (T, bool)) -> T {
        let (value, wake) = step(&mut lock(&self.feed.input));
        if wake {
            self.feed.wake(Wake::Input);
        }
        value
    }
}

/// A failure as the stdin lane sees it: the `OwnerError` travels inside.
fn io_error(failure: &OwnerError) -> std::io::Error {
    std::io::Error::other(failure.clone())
}

impl AsyncWrite for Writer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.with_queue(|queue| {
            if let Some(failure) = &queue.failure {
                return (Poll::Ready(Err(io_error(failure))), false);
            }
            if queue.eof != Eof::Open {
                return (
                    Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
                    false,
                );
            }
            if queue.chunk.is_some() {
                queue.writer = Some(cx.waker().clone());
                return (Poll::Pending, false);
            }
            queue.chunk = Some(Bytes::copy_from_slice(buf));
            (Poll::Ready(Ok(buf.len())), queue.wake_feeder())
        })
    }

    /// Several slices (the stdin lane's staged chunks) go to the feeder as one chunk: one take
    /// and one write to the driver's stdin instead of one per slice.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if bufs.len() <= 1 {
            let first = bufs.first().map_or(&[][..], |buf| &buf[..]);
            return self.poll_write(cx, first);
        }
        let joined: Vec<u8> = bufs.iter().flat_map(|buf| buf.iter().copied()).collect();
        self.poll_write(cx, &joined)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Flushed once the feeder took what was queued.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.with_queue(|queue| {
            if let Some(failure) = &queue.failure {
                return (Poll::Ready(Err(io_error(failure))), false);
            }
            if queue.chunk.is_some() {
                queue.writer = Some(cx.waker().clone());
                return (Poll::Pending, false);
            }
            (Poll::Ready(Ok(())), false)
        })
    }

    /// Done once the driver's stdin finished, after everything queued was taken.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.with_queue(|queue| {
            if let Some(failure) = &queue.failure {
                return (Poll::Ready(Err(io_error(failure))), false);
            }
            if queue.eof == Eof::Done {
                return (Poll::Ready(Ok(())), false);
            }
            queue.writer = Some(cx.waker().clone());
            if queue.chunk.is_some() || queue.eof != Eof::Open {
                return (Poll::Pending, false);
            }
            queue.eof = Eof::Asked;
            (Poll::Pending, queue.wake_feeder())
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.with_queue(|queue| {
            if queue.failure.is_some() || queue.eof != Eof::Open {
                return ((), false);
            }
            queue.eof = Eof::Asked;
            ((), queue.wake_feeder())
        });
    }
}
