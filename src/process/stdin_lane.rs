//! A process's stdin as one ordered lane. While nothing is staged, a chunk is written straight
//! from the caller's thread with a non-blocking poll (no copy, no hand-off to another thread);
//! whatever the guest's connection does not take at once is copied into the staging, and the
//! writer task writes the staging in order, flushes, and delivers EOF after `end`.
//!
//! Invariants:
//! - the lock is held only to look at or change the lane, never across a poll of the
//!   connection: whoever writes takes the connection out of the lane and puts it back;
//! - a direct write happens only while the lane is idle (the connection is in, nothing is
//!   staged or unflushed, not ended), so it never overtakes staged bytes and never replaces
//!   the writer task's waker while that task waits on the connection;
//! - bytes a writer could not write go back to the front of the staging, before anything
//!   staged meanwhile; whoever puts the connection back wakes the writer task if work is left;
//! - a staged chunk is never empty, and holds its staging permits until its last byte is
//!   written;
//! - after a failure nothing more is written, every staged chunk is dropped, and the staging
//!   budget is closed, so nobody waits for space that will never come back.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use tokio::io::AsyncWrite;
use tokio::sync::{Notify, Semaphore};

use crate::lifecycle::error::{OperationCode, OwnerError};

pub type Input = Pin<Box<dyn AsyncWrite + Send>>;

/// Bytes waiting for the connection, with the staging permits they hold.
struct Staged {
    bytes: Bytes,
    permits: u32,
}

/// At most this many staged chunks go to the connection in one vectored write.
const SLICES_PER_WRITE: usize = 16;

struct Lane {
    /// The connection; out while a writer polls it.
    input: Option<Input>,
    staged: VecDeque<Staged>,
    /// Written bytes may still sit in a layer's buffer (TLS): the writer task must flush.
    unflushed: bool,
    /// `end` or `close` was called: no new write is taken.
    ended: bool,
    /// Writes admitted before `end` that still wait for staging space: EOF waits for them.
    admitted: usize,
    failure: Option<OwnerError>,
}

impl Lane {
    fn idle(&self) -> bool {
        self.input.is_some() && !self.has_work() && !self.ended && self.failure.is_none()
    }

    /// Whether the writer task has something to do.
    fn has_work(&self) -> bool {
        !self.staged.is_empty() || self.unflushed || self.eof_due()
    }

    fn eof_due(&self) -> bool {
        self.ended && self.admitted == 0
    }

    /// Puts the connection back with what a writer left: its unwritten chunks go first.
    fn put_back(&mut self, input: Input, mut left: VecDeque<Staged>) {
        self.input = Some(input);
        left.append(&mut self.staged);
        self.staged = left;
    }

    /// Records a failure: drops the staged bytes (their permits are gone with the closed
    /// budget) and hands the error back.
    fn fail(&mut self, budget: &Semaphore, error: OwnerError) -> OwnerError {
        self.staged.clear();
        budget.close();
        self.failure.get_or_insert(error).clone()
    }
}

/// How a chunk was taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// The connection took all of it: the caller's staging permits are free again.
    Written,
    /// Some or all of it is staged and holds the caller's permits.
    Staged,
}

/// What the writer task found when it last drove the lane.
enum Drive {
    /// Nothing to do now, or a direct write has the connection out (it wakes the task when it
    /// puts it back): wait to be woken.
    Idle,
    /// EOF was delivered.
    Done,
}

pub struct StdinLane {
    lane: Mutex<Lane>,
    /// Wakes the writer task: something was staged, left unflushed, or the lane ended.
    wake: Notify,
    /// Staging space, in bytes.
    budget: Arc<Semaphore>,
}

/// Keeps `end` from delivering EOF while an admitted write waits for staging space; released
/// when that write is taken or gives up (also when its future is dropped).
pub struct Admission<'a> {
    lane: &'a StdinLane,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let mut lane = self.lane.lock();
        lane.admitted = lane.admitted.saturating_sub(1);
        drop(lane);
        self.lane.wake.notify_one();
    }
}

fn write_failed(error: std::io::Error) -> OwnerError {
    carried(&error).unwrap_or_else(|| {
        OwnerError::operation(
            OperationCode::StreamFailure,
            format!("writing the process stdin failed: {error}"),
        )
    })
}

/// The owner's own failure an input carried in its I/O error (an external process's stdin
/// says why it takes nothing more), as it is.
fn carried(error: &std::io::Error) -> Option<OwnerError> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<OwnerError>())
        .cloned()
}

impl StdinLane {
    pub fn new(input: Input, budget: Arc<Semaphore>) -> Arc<Self> {
        Arc::new(Self {
            lane: Mutex::new(Lane {
                input: Some(input),
                staged: VecDeque::new(),
                unflushed: false,
                ended: false,
                admitted: 0,
                failure: None,
            }),
            wake: Notify::new(),
            budget,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Lane> {
        self.lane.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why the lane takes no new write, if it takes none.
    fn refusal(lane: &Lane) -> Option<OwnerError> {
        if let Some(failure) = &lane.failure {
            return Some(failure.clone());
        }
        lane.ended
            .then(|| OwnerError::state("stdin is already ended"))
    }

    /// Whether a new write would be refused now, and why.
    pub fn refused(&self) -> Option<OwnerError> {
        Self::refusal(&self.lock())
    }

    /// Why the connection failed, if it did.
    pub fn failure(&self) -> Option<OwnerError> {
        self.lock().failure.clone()
    }

    /// Admits a write that will wait for staging space: `end` delivers EOF only after it.
    pub fn admit(&self) -> Result<Admission<'_>, OwnerError> {
        let mut lane = self.lock();
        if let Some(refusal) = Self::refusal(&lane) {
            return Err(refusal);
        }
        lane.admitted += 1;
        Ok(Admission { lane: self })
    }

    /// Takes `chunk`, for which the caller holds `permits` of staging space: `Written` when
    /// the connection took all of it (the caller frees the permits), `Staged` when the rest
    /// waits for the writer task (it frees them). A write admitted earlier passes its
    /// admission, which lets it in after `end`.
    pub fn take(
        &self,
        chunk: &[u8],
        permits: u32,
        admission: Option<Admission<'_>>,
    ) -> Result<Taken, OwnerError> {
        let mut lane = self.lock();
        if let Some(failure) = &lane.failure {
            return Err(failure.clone());
        }
        if lane.ended && admission.is_none() {
            return Err(OwnerError::state("stdin is already ended"));
        }
        if chunk.is_empty() {
            // Nothing to write; staged, it would meet a connection that takes nothing.
            return Ok(Taken::Written);
        }
        let direct = if lane.idle() { lane.input.take() } else { None };
        let Some(mut input) = direct else {
            lane.staged.push_back(Staged {
                bytes: Bytes::copy_from_slice(chunk),
                permits,
            });
            drop(lane);
            drop(admission);
            self.wake.notify_one();
            return Ok(Taken::Staged);
        };
        drop(lane);
        // Nobody else polls the connection now: a poll with a waker that does nothing
        // cannot take the writer task's place.
        let attempt = write_now(&mut input, chunk);
        let mut lane = self.lock();
        let mut left = VecDeque::new();
        let taken = match attempt {
            Err(error) => {
                lane.input = Some(input);
                return Err(lane.fail(&self.budget, write_failed(error)));
            }
            Ok((written, flushed)) => {
                lane.unflushed |= !flushed;
                if written < chunk.len() {
                    left.push_back(Staged {
                        bytes: Bytes::copy_from_slice(&chunk[written..]),
                        permits,
                    });
                    Taken::Staged
                } else {
                    Taken::Written
                }
            }
        };
        lane.put_back(input, left);
        let work = lane.has_work();
        drop(lane);
        drop(admission);
        if work {
            self.wake.notify_one();
        }
        Ok(taken)
    }

    /// Ends the lane: no new write is taken; the writer task delivers EOF once everything
    /// staged and admitted is written.
    pub fn end(&self) {
        self.lock().ended = true;
        self.wake.notify_one();
    }

    /// The writer task's work: writes staged bytes in order, flushes, and delivers EOF once
    /// ended with nothing left. Pending while the connection takes no more.
    fn drive(&self, cx: &mut Context<'_>) -> Poll<Result<Drive, OwnerError>> {
        loop {
            let mut lane = self.lock();
            if let Some(failure) = &lane.failure {
                return Poll::Ready(Err(failure.clone()));
            }
            if !lane.has_work() {
                return Poll::Ready(Ok(Drive::Idle));
            }
            // Out with a direct write, which wakes this task when it puts the connection back.
            let Some(mut input) = lane.input.take() else {
                return Poll::Ready(Ok(Drive::Idle));
            };
            let mut staged = std::mem::take(&mut lane.staged);
            let mut unflushed = lane.unflushed;
            let eof = lane.eof_due();
            drop(lane);

            let mut freed = 0usize;
            let pass = write_out(&mut input, &mut staged, &mut unflushed, eof, &mut freed, cx);
            let mut lane = self.lock();
            lane.put_back(input, staged);
            lane.unflushed = unflushed;
            let outcome = match pass {
                Poll::Ready(Ok(true)) => Some(Poll::Ready(Ok(Drive::Done))),
                // Everything taken out was written: look again for what came meanwhile.
                Poll::Ready(Ok(false)) => None,
                Poll::Ready(Err(error)) => Some(Poll::Ready(Err(lane.fail(&self.budget, error)))),
                Poll::Pending => Some(Poll::Pending),
            };
            drop(lane);
            if freed > 0 {
                self.budget.add_permits(freed);
            }
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// The writer task: runs until EOF was delivered or the connection failed.
    pub async fn writer(self: Arc<Self>) -> Result<(), OwnerError> {
        loop {
            // Registered before the pass, so a wake during it is not lost (and a stored
            // permit from before it only costs one more pass).
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match std::future::poll_fn(|cx| self.drive(cx)).await? {
                Drive::Done => return Ok(()),
                Drive::Idle => woken.await,
            }
        }
    }
}

/// Writes `chunk` with a waker that does nothing: how much the connection took at once, and
/// whether it was flushed too (tried only once all of it was taken).
fn write_now(input: &mut Input, chunk: &[u8]) -> std::io::Result<(usize, bool)> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < chunk.len() {
        match input.as_mut().poll_write(&mut cx, &chunk[written..]) {
            Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => written += n,
            Poll::Ready(Err(error)) => return Err(error),
            Poll::Pending => return Ok((written, false)),
        }
    }
    match input.as_mut().poll_flush(&mut cx) {
        Poll::Ready(Ok(())) => Ok((written, true)),
        Poll::Ready(Err(error)) => Err(error),
        Poll::Pending => Ok((written, false)),
    }
}

/// One pass of the writer task over what it took out: the staged chunks in order (several
/// per vectored write), then a flush, then EOF if `eof`. Adds the permits of every chunk
/// written whole to `freed`. `Ok(true)` once EOF was delivered.
fn write_out(
    input: &mut Input,
    staged: &mut VecDeque<Staged>,
    unflushed: &mut bool,
    eof: bool,
    freed: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<Result<bool, OwnerError>> {
    // Never empty chunks (`take` stages none), so a write that takes nothing is a failure.
    while !staged.is_empty() {
        let mut slices = [IoSlice::new(&[]); SLICES_PER_WRITE];
        let mut count = 0;
        for (slot, chunk) in slices.iter_mut().zip(staged.iter()) {
            *slot = IoSlice::new(&chunk.bytes);
            count += 1;
        }
        let written = match input.as_mut().poll_write_vectored(cx, &slices[..count]) {
            Poll::Ready(Ok(0)) => {
                return Poll::Ready(Err(write_failed(std::io::ErrorKind::WriteZero.into())))
            }
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(error)) => return Poll::Ready(Err(write_failed(error))),
            Poll::Pending => return Poll::Pending,
        };
        *unflushed = true;
        consume(staged, written, freed);
    }
    if *unflushed {
        match input.as_mut().poll_flush(cx) {
            Poll::Ready(Ok(())) => *unflushed = false,
            Poll::Ready(Err(error)) => return Poll::Ready(Err(write_failed(error))),
            Poll::Pending => return Poll::Pending,
        }
    }
    if !eof {
        return Poll::Ready(Ok(false));
    }
    input.as_mut().poll_shutdown(cx).map(|closed| {
        closed.map(|()| true).map_err(|error| {
            carried(&error).unwrap_or_else(|| {
                OwnerError::operation(
                    OperationCode::StreamFailure,
                    format!("closing the process stdin failed: {error}"),
                )
            })
        })
    })
}

/// Drops `written` bytes off the front of `staged`, freeing the permits of each chunk done.
fn consume(staged: &mut VecDeque<Staged>, mut written: usize, freed: &mut usize) {
    while written > 0 {
        let Some(front) = staged.front_mut() else {
            return;
        };
        let step = written.min(front.bytes.len());
        front.bytes.advance(step);
        written -= step;
        if front.bytes.is_empty() {
            *freed += front.permits as usize;
            staged.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A connection that keeps written bytes in a layer's buffer until a flush, and answers the
    /// first flush with `Pending` (waking its caller), as a TLS layer may.
    struct FlushLater {
        buffered: Vec<u8>,
        delivered: Arc<Mutex<Vec<u8>>>,
        flushes: usize,
    }

    impl AsyncWrite for FlushLater {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.buffered.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            self.flushes += 1;
            if self.flushes == 1 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let bytes = std::mem::take(&mut self.buffered);
            self.delivered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(&bytes);
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            self.poll_flush(cx)
        }
    }

    #[tokio::test]
    async fn a_direct_write_left_unflushed_is_flushed_by_the_writer_task() {
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let input = FlushLater {
            buffered: Vec::new(),
            delivered: Arc::clone(&delivered),
            flushes: 0,
        };
        let budget = Arc::new(Semaphore::new(64));
        let lane = StdinLane::new(Box::pin(input), Arc::clone(&budget));
        tokio::spawn(Arc::clone(&lane).writer());
        // The connection took every byte at once: the caller's permits are free again...
        assert_eq!(lane.take(b"hello", 5, None), Ok(Taken::Written));
        // ...but the bytes reach the guest only through the writer task's flush, without `end`.
        tokio::time::timeout(Duration::from_secs(5), async {
            while delivered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the writer task flushed");
        assert_eq!(
            *delivered.lock().unwrap_or_else(PoisonError::into_inner),
            b"hello"
        );
        assert_eq!(budget.available_permits(), 64);
    }

    #[test]
    fn consume_frees_the_permits_of_each_chunk_written_whole() {
        let mut staged: VecDeque<Staged> = [(b"abc", 3), (b"def", 30)]
            .into_iter()
            .map(|(bytes, permits)| Staged {
                bytes: Bytes::from_static(bytes),
                permits,
            })
            .collect();
        let mut freed = 0;
        consume(&mut staged, 4, &mut freed);
        assert_eq!(freed, 3);
        assert_eq!(staged.len(), 1);
        assert_eq!(&staged[0].bytes[..], b"ef");
        consume(&mut staged, 2, &mut freed);
        assert_eq!(freed, 33);
        assert!(staged.is_empty());
    }
}
