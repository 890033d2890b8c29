//! The output pump: moves the engine's demultiplexed output into the two streams' staging, in
//! order, within the staging's budget, and counts the output total.
//!
//! Invariants:
//! - while compute runs, a full staging stops the pump (backpressure on the engine): nothing is
//!   read that the staging cannot hold, and nothing is dropped;
//! - once compute is stopping (`PumpControl::stopping`) a piece waits for staging space at most
//!   `ROOM_WAIT_WHILE_STOPPING`: an engine holds a killed container until its attached output
//!   is read, so an unread stream must not keep the stop from happening, while a reader that
//!   keeps reading loses nothing. A piece that finds no room within that wait is discarded with
//!   everything after it on that stream, and the stream fails with `cancelled` after the bytes
//!   it staged: nothing is truncated silently;
//! - past `maxOutputBytes` both streams fail with `output_limit` and the pump reads on, staging
//!   nothing, for the same reason;
//! - every stream receives at most one failure, after its last staged bytes;
//! - a stream the engine ends on its own (`OutputEvent::End`) ends after its staged bytes, and one
//!   it fails (`OutputEvent::Failed`) fails after them; the other stream goes on;
//! - the pump ends when the engine's stream ends or fails, on `PumpControl::close` or `cut`
//!   (even while the engine sends nothing, or always has output ready), or when the staging's
//!   budget is closed (the streams' `close` does both); a piece it held then is discarded and
//!   its stream fails with `cancelled`, and after `cut` every stream not failed yet does.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{Notify, Semaphore};

use super::output_permits;
use super::staged::{Received, StagedSender};
use super::stall::StallWatch;
use crate::lifecycle::driver::{OutputEvent, OutputStream};
use crate::lifecycle::error::{OperationCode, OwnerError};

pub use crate::lifecycle::driver::ProcessOutput as EngineOutput;

/// Once compute is stopping, a piece waits at most this long for staging space: a reader that
/// keeps reading loses nothing, and an unread stream cannot hold the stop for long.
pub const ROOM_WAIT_WHILE_STOPPING: std::time::Duration = std::time::Duration::from_millis(250);

/// Called once when a stream limit is crossed, with the limit's failure: the owner stops the
/// workload, and that failure is why its execution ended.
pub type OnViolation = Arc<dyn Fn(OwnerError) + Send + Sync>;

/// `PumpControl::closing`: the pump runs...
const OPEN: u8 = 0;
/// ...ends, and the streams it has not failed end as usual...
const CLOSED: u8 = 1;
/// ...or ends, and they fail with `cancelled` (the engine's stream may have held more).
const CUT: u8 = 2;

/// What the owner tells a running pump.
#[derive(Default)]
pub struct PumpControl {
    closing: AtomicU8,
    /// Wakes the pump once `closing` is set (a stored permit if it is not waiting yet).
    closed: Notify,
    stopping: AtomicBool,
    /// Wakes a pump waiting for staging space once `stopping` is set.
    stopping_wake: Notify,
}

impl PumpControl {
    /// Ends the pump at its next step, or at once while it waits for the engine (even while
    /// the engine sends nothing): it lets go of the engine's stream, and the streams end as
    /// usual. A pump waiting for staging space ends when the budget is closed; the piece it
    /// held is then discarded, and its stream fails with `cancelled`.
    pub fn close(&self) {
        self.end(CLOSED);
    }

    /// As `close`, but the streams not failed yet fail with `cancelled`: the engine had not
    /// ended its stream, so it may have held more.
    pub fn cut(&self) {
        self.end(CUT);
    }

    fn end(&self, how: u8) {
        self.closing.fetch_max(how, Ordering::SeqCst);
        self.closed.notify_one();
    }

    fn closing(&self) -> u8 {
        self.closing.load(Ordering::SeqCst)
    }

    /// Closed, cut, or stopping: the streams no longer run as usual.
    pub(super) fn winding_down(&self) -> bool {
        self.closing() != OPEN || self.is_stopping()
    }

    /// Compute is being stopped: from now on a piece waits for staging space only briefly
    /// (see the module's invariants).
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stopping_wake.notify_one();
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// One stream's side of the pump.
struct Lane {
    /// `None` once the engine ended the stream: its reader then reads to the end.
    staged: Option<StagedSender>,
    /// The stream received its failure or its end (or its reader is gone): nothing more is
    /// staged.
    ended: bool,
}

impl Lane {
    fn send(&self, item: Received) -> Result<(), Received> {
        match &self.staged {
            Some(staged) => staged.send(item),
            None => Err(item),
        }
    }

    fn is_closed(&self) -> bool {
        self.staged.as_ref().is_none_or(StagedSender::is_closed)
    }

    /// The engine ended this stream: its reader gets the end after what is staged.
    fn finish(&mut self) {
        self.ended = true;
        self.staged = None;
    }
}

/// Why the pump ended.
#[derive(PartialEq, Eq)]
enum End {
    /// The engine's stream ended or failed.
    Engine,
    /// `close`, `cut` or a closed budget.
    Control,
}

/// Whether a piece found room in the staging.
enum Room {
    Granted,
    /// Compute is stopping and the staging stayed full for `ROOM_WAIT_WHILE_STOPPING`.
    Full,
    /// The budget is closed: the streams are closed.
    Closed,
}

pub struct OutputPump {
    output: EngineOutput,
    budget: Arc<Semaphore>,
    /// Staged pieces are at most this large (the staging's reads take them one by one).
    piece: usize,
    staging: u64,
    max_output: Option<u64>,
    total: u64,
    /// Past `maxOutputBytes`: read on, stage nothing.
    discarding: bool,
    stdout: Lane,
    stderr: Lane,
    control: Arc<PumpControl>,
    violated: Arc<AtomicBool>,
    on_violation: OnViolation,
    stalls: Arc<StallWatch>,
}

pub struct PumpSettings {
    pub budget: Arc<Semaphore>,
    pub staging: u64,
    pub max_output: Option<u64>,
    pub stdout: StagedSender,
    pub stderr: StagedSender,
    pub control: Arc<PumpControl>,
    pub violated: Arc<AtomicBool>,
    pub on_violation: OnViolation,
    /// Told when output moves and while the pump waits for staging space.
    pub stalls: Arc<StallWatch>,
}

impl OutputPump {
    pub fn new(output: EngineOutput, settings: PumpSettings) -> Self {
        let lane = |staged| Lane {
            staged: Some(staged),
            ended: false,
        };
        Self {
            output,
            budget: settings.budget,
            piece: usize::try_from(settings.staging)
                .unwrap_or(usize::MAX)
                .clamp(1, 64 * 1024),
            staging: settings.staging,
            max_output: settings.max_output,
            total: 0,
            discarding: false,
            stdout: lane(settings.stdout),
            stderr: lane(settings.stderr),
            control: settings.control,
            violated: settings.violated,
            on_violation: settings.on_violation,
            stalls: settings.stalls,
        }
    }

    /// Runs until the engine's stream ends or fails, `close` or `cut`, or a closed budget.
    pub async fn run(mut self) {
        let ended = self.pump().await;
        if ended == End::Control && self.control.closing() == CUT {
            for which in [OutputStream::Stdout, OutputStream::Stderr] {
                self.fail(
                    which,
                    format!(
                        "the sandbox stopped before the engine ended its {}: what it still held was not delivered",
                        which.name()
                    ),
                );
            }
        }
    }

    async fn pump(&mut self) -> End {
        let control = Arc::clone(&self.control);
        // One wait for the whole pump (a permit stored before it is first polled still counts).
        let closed = control.closed.notified();
        tokio::pin!(closed);
        loop {
            // Looked at on every step: an engine with output always ready would otherwise keep
            // the wait below from ever seeing it.
            if control.closing() != OPEN {
                return End::Control;
            }
            let item = tokio::select! {
                biased;
                item = self.output.next() => item,
                () = &mut closed => return End::Control,
            };
            let Some(item) = item else {
                return End::Engine;
            };
            self.stalls.moved();
            let (which, bytes) = match item {
                Ok(OutputEvent::Bytes(which, bytes)) => (which, bytes),
                Ok(OutputEvent::End(which)) => {
                    self.lane(which).finish();
                    continue;
                }
                Ok(OutputEvent::Failed(which, error)) => {
                    self.fail_with(which, error);
                    continue;
                }
                Err(error) => {
                    self.fail_both(&error);
                    return End::Engine;
                }
            };
            if self.discarding {
                continue;
            }
            self.total = self.total.saturating_add(bytes.len() as u64);
            if let Some(max) = self.max_output.filter(|max| self.total > *max) {
                let limit = OwnerError::operation(
                    OperationCode::OutputLimit,
                    format!(
                        "the process wrote more than policy.streams.maxOutputBytes ({max}) to stdout and stderr together; the sandbox is being stopped"
                    ),
                );
                self.fail_both(&limit);
                self.discarding = true;
                if !self.violated.swap(true, Ordering::SeqCst) {
                    (self.on_violation)(limit);
                }
                continue;
            }
            if !self.stage(which, bytes).await {
                return End::Control;
            }
        }
    }

    fn lane(&mut self, which: OutputStream) -> &mut Lane {
        match which {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }

    /// Fails `which` with `cancelled` and `message` unless it failed already.
    fn fail(&mut self, which: OutputStream, message: String) {
        self.fail_with(
            which,
            OwnerError::operation(OperationCode::Cancelled, message),
        );
    }

    /// Fails `which` with `error` unless it failed or ended already.
    fn fail_with(&mut self, which: OutputStream, error: OwnerError) {
        let lane = self.lane(which);
        if !std::mem::replace(&mut lane.ended, true) {
            let _ = lane.send(Err(error));
        }
    }

    /// Fails every stream that has not failed yet with `error`.
    fn fail_both(&mut self, error: &OwnerError) {
        for lane in [&mut self.stdout, &mut self.stderr] {
            if !std::mem::replace(&mut lane.ended, true) {
                let _ = lane.send(Err(error.clone()));
            }
        }
    }

    /// Stages `bytes` on `which` piece by piece; `false` once the budget is closed.
    async fn stage(&mut self, which: OutputStream, mut bytes: Bytes) -> bool {
        while !bytes.is_empty() && !self.lane(which).ended {
            if self.lane(which).is_closed() {
                // Its reader discarded it: dropped at once, without waiting for space.
                self.lane(which).ended = true;
                break;
            }
            let part = bytes.split_to(bytes.len().min(self.piece));
            let n = output_permits(part.len(), self.staging);
            self.stalls.waiting_for_room(true);
            let room = room(&self.budget, &self.control, n).await;
            self.stalls.waiting_for_room(false);
            // A piece staged (or given up) is the guest's output moving.
            self.stalls.moved();
            match room {
                Room::Granted => {}
                Room::Closed => {
                    self.fail(
                        which,
                        format!(
                            "the process's streams were closed while its {} was unread: output past the staging was discarded",
                            which.name()
                        ),
                    );
                    return false;
                }
                Room::Full => {
                    let staging = self.staging;
                    self.fail(
                        which,
                        format!(
                            "the sandbox stopped while its {} was unread: output past the staging (policy.streams.maxBufferedOutputBytes, {staging}) was discarded",
                            which.name()
                        ),
                    );
                    return true;
                }
            }
            let lane = self.lane(which);
            if lane.send(Ok(part)).is_err() {
                // Nobody reads this stream any more: its space goes back at once.
                lane.ended = true;
                self.budget.add_permits(n as usize);
            }
        }
        true
    }
}

/// Room for `n` permits (a piece's bytes and bookkeeping): waited for as long as it takes while
/// compute runs, at most
/// `ROOM_WAIT_WHILE_STOPPING` once it stops.
async fn room(budget: &Semaphore, control: &PumpControl, n: u32) -> Room {
    let granted = |permit: Result<tokio::sync::SemaphorePermit<'_>, _>| match permit {
        Ok(permit) => {
            permit.forget();
            Room::Granted
        }
        Err(tokio::sync::AcquireError { .. }) => Room::Closed,
    };
    if !control.is_stopping() {
        tokio::select! {
            biased;
            permit = budget.acquire_many(n) => return granted(permit),
            () = stopping(control) => {}
        }
    }
    match tokio::time::timeout(ROOM_WAIT_WHILE_STOPPING, budget.acquire_many(n)).await {
        Ok(permit) => granted(permit),
        Err(_) => Room::Full,
    }
}

/// Resolves once compute is stopping.
async fn stopping(control: &PumpControl) {
    loop {
        // Registered before the flag is read, so a `stopping()` in between is not lost.
        let woken = control.stopping_wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if control.is_stopping() {
            return;
        }
        woken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::staged::{self, Received, StagedReceiver};
    use crate::process::PIECE_BOOKKEEPING;
    use crate::test_support::settles;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::sync::mpsc;

    /// A running pump over an engine stream fed by the test through a channel of one slot, so
    /// a feed that completes proves the pump read the piece before it.
    struct Running {
        feed: mpsc::Sender<Result<OutputEvent, OwnerError>>,
        stdout: StagedReceiver,
        stderr: StagedReceiver,
        control: Arc<PumpControl>,
        budget: Arc<Semaphore>,
        violations: Arc<AtomicUsize>,
        pump: tokio::task::JoinHandle<()>,
    }

    fn running(staging: u64, max_output: Option<u64>) -> Running {
        let (feed, mut engine) = mpsc::channel(1);
        let output = futures::stream::poll_fn(move |cx| engine.poll_recv(cx)).boxed();
        let (stdout_tx, stdout) = staged::lane();
        let (stderr_tx, stderr) = staged::lane();
        let control = Arc::new(PumpControl::default());
        let budget = Arc::new(Semaphore::new(staging as usize));
        let violations = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&violations);
        let pump = OutputPump::new(
            output,
            PumpSettings {
                budget: Arc::clone(&budget),
                staging,
                max_output,
                stdout: stdout_tx,
                stderr: stderr_tx,
                control: Arc::clone(&control),
                violated: Arc::new(AtomicBool::new(false)),
                on_violation: Arc::new(move |_| {
                    counted.fetch_add(1, Ordering::SeqCst);
                }),
                stalls: Arc::default(),
            },
        );
        Running {
            feed,
            stdout,
            stderr,
            control,
            budget,
            violations,
            pump: tokio::spawn(pump.run()),
        }
    }

    impl Running {
        async fn feed(&self, which: OutputStream, bytes: &'static [u8]) {
            settles(
                "the pump reads the feed",
                self.feed
                    .send(Ok(OutputEvent::Bytes(which, Bytes::from_static(bytes)))),
            )
            .await
            .expect("the pump listens");
        }

        /// Whether the pump leaves the engine's pieces unread: one more fills the slot, and
        /// the next finds no room for a while.
        async fn holds_the_engine(&self, which: OutputStream) -> bool {
            self.feed(which, b"z").await;
            let next = self
                .feed
                .send(Ok(OutputEvent::Bytes(which, Bytes::from_static(b"z"))));
            tokio::time::timeout(Duration::from_millis(100), next)
                .await
                .is_err()
        }
    }

    /// The next thing staged on a stream (`None` at its end), within the test's bound.
    async fn next(staged: &mut StagedReceiver) -> Option<Received> {
        settles("the next staged piece", staged.recv()).await
    }

    fn code(received: Option<Received>) -> Option<OperationCode> {
        received.and_then(|r| r.err()).and_then(|e| e.code())
    }

    #[tokio::test]
    async fn while_compute_runs_a_full_staging_holds_the_engine_and_drops_nothing() {
        let mut pump = running(4, None);
        pump.feed(OutputStream::Stdout, b"abcd").await;
        // The pump waits for room with "efgh"; the slot behind it stays full.
        pump.feed(OutputStream::Stdout, b"efgh").await;
        assert!(pump.holds_the_engine(OutputStream::Stdout).await);
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"abcd")))
        );
        pump.budget.add_permits(4);
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"efgh")))
        );
    }

    #[tokio::test]
    async fn tiny_pieces_fill_the_staging_by_their_bookkeeping_too() {
        // Alternating 1-byte writes to stdout and stderr: one piece each, nobody reading.
        let staging = 4_096;
        let pump = running(staging, None);
        let mut fed = 0u64;
        loop {
            let which = if fed.is_multiple_of(2) {
                OutputStream::Stdout
            } else {
                OutputStream::Stderr
            };
            let next = pump
                .feed
                .send(Ok(OutputEvent::Bytes(which, Bytes::from_static(b"x"))));
            if tokio::time::timeout(Duration::from_millis(100), next)
                .await
                .is_err()
            {
                break;
            }
            fed += 1;
            assert!(fed <= staging, "the pump staged {fed} pieces of one byte");
        }
        // Staged: as many as their cost fits; then one waits in the pump and one in the slot.
        let cost = 1 + PIECE_BOOKKEEPING as u64;
        assert_eq!(fed, staging / cost + 2);
    }

    #[tokio::test]
    async fn once_stopping_the_pump_reads_on_and_fails_only_a_stream_that_lost_bytes() {
        let mut pump = running(4, None);
        pump.feed(OutputStream::Stdout, b"abcd").await;
        pump.feed(OutputStream::Stdout, b"efgh").await;
        assert!(pump.holds_the_engine(OutputStream::Stdout).await);
        pump.control.stopping();
        // "efgh" and everything after it on stdout is discarded; the engine is read on.
        for _ in 0..100 {
            pump.feed(OutputStream::Stdout, b"more").await;
        }
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"abcd")))
        );
        assert_eq!(
            code(next(&mut pump.stdout).await),
            Some(OperationCode::Cancelled)
        );
        // Room again (a reader took stdout's bytes): stderr's own bytes are staged whole.
        pump.budget.add_permits(4);
        pump.feed(OutputStream::Stderr, b"err").await;
        assert_eq!(
            next(&mut pump.stderr).await,
            Some(Ok(Bytes::from_static(b"err")))
        );
        drop(pump.feed);
        settles("the pump's end", pump.pump).await.expect("joined");
        // stdout received one failure only; stderr ends without one.
        assert_eq!(next(&mut pump.stdout).await, None);
        assert_eq!(next(&mut pump.stderr).await, None);
    }

    #[tokio::test]
    async fn once_stopping_a_reader_that_keeps_reading_loses_nothing() {
        let Running {
            feed,
            mut stdout,
            control,
            budget,
            pump,
            ..
        } = running(4, None);
        control.stopping();
        let reader = tokio::spawn(async move {
            let mut read = Vec::new();
            while let Some(piece) = stdout.recv().await {
                let piece = piece.expect("no failure");
                read.extend_from_slice(&piece);
                tokio::time::sleep(Duration::from_millis(2)).await;
                budget.add_permits(piece.len());
            }
            read
        });
        for _ in 0..50 {
            settles(
                "the pump reads the feed",
                feed.send(Ok(OutputEvent::Bytes(
                    OutputStream::Stdout,
                    Bytes::from_static(b"abcd"),
                ))),
            )
            .await
            .expect("the pump listens");
        }
        drop(feed);
        settles("the pump's end", pump).await.expect("joined");
        let read = settles("the reader", reader).await.expect("joined");
        assert_eq!(read, b"abcd".repeat(50));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_wakes_a_pump_already_waiting_for_room_and_bounds_its_wait() {
        let mut pump = running(2, None);
        pump.feed(OutputStream::Stderr, b"ab").await;
        pump.feed(OutputStream::Stderr, b"cd").await;
        // The pump is waiting for room with "cd" (it leaves the engine's next pieces unread).
        assert!(pump.holds_the_engine(OutputStream::Stderr).await);
        let stopped = tokio::time::Instant::now();
        pump.control.stopping();
        assert_eq!(
            next(&mut pump.stderr).await,
            Some(Ok(Bytes::from_static(b"ab")))
        );
        assert_eq!(
            code(next(&mut pump.stderr).await),
            Some(OperationCode::Cancelled)
        );
        assert_eq!(stopped.elapsed(), ROOM_WAIT_WHILE_STOPPING);
        // stdout finds no room either (stderr's bytes still hold it): it loses its byte too.
        pump.feed(OutputStream::Stdout, b"x").await;
        assert_eq!(
            code(next(&mut pump.stdout).await),
            Some(OperationCode::Cancelled)
        );
    }

    #[tokio::test]
    async fn past_the_output_total_both_streams_fail_once_and_the_engine_is_read_on() {
        let mut pump = running(1024, Some(4));
        pump.feed(OutputStream::Stdout, b"abc").await;
        pump.feed(OutputStream::Stderr, b"de").await;
        for _ in 0..100 {
            pump.feed(OutputStream::Stdout, b"more").await;
        }
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"abc")))
        );
        assert_eq!(
            code(next(&mut pump.stdout).await),
            Some(OperationCode::OutputLimit)
        );
        assert_eq!(
            code(next(&mut pump.stderr).await),
            Some(OperationCode::OutputLimit)
        );
        assert_eq!(pump.violations.load(Ordering::SeqCst), 1);
        drop(pump.feed);
        settles("the pump's end", pump.pump).await.expect("joined");
        assert_eq!(next(&mut pump.stdout).await, None);
        assert_eq!(next(&mut pump.stderr).await, None);
    }

    #[tokio::test]
    async fn a_piece_held_when_the_budget_closes_fails_its_stream_only() {
        let mut pump = running(2, None);
        pump.feed(OutputStream::Stdout, b"ab").await;
        pump.feed(OutputStream::Stdout, b"cd").await;
        assert!(pump.holds_the_engine(OutputStream::Stdout).await);
        // The streams' close: the budget is closed and the pump told.
        pump.budget.close();
        pump.control.close();
        settles("the pump's end", pump.pump).await.expect("joined");
        assert!(
            pump.feed.is_closed(),
            "the pump let go of the engine's stream"
        );
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"ab")))
        );
        assert_eq!(
            code(next(&mut pump.stdout).await),
            Some(OperationCode::Cancelled)
        );
        assert_eq!(next(&mut pump.stdout).await, None);
        // stderr lost nothing it had: it ends as usual.
        assert_eq!(next(&mut pump.stderr).await, None);
    }

    #[tokio::test]
    async fn close_ends_a_pump_while_the_engine_sends_nothing_and_the_streams_as_usual() {
        let mut pump = running(2, None);
        pump.feed(OutputStream::Stdout, b"a").await;
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"a")))
        );
        pump.control.close();
        settles("the pump's end", pump.pump).await.expect("joined");
        assert!(
            pump.feed.is_closed(),
            "the pump let go of the engine's stream"
        );
        assert_eq!(next(&mut pump.stdout).await, None);
        assert_eq!(next(&mut pump.stderr).await, None);
    }

    #[tokio::test]
    async fn cut_fails_every_stream_not_failed_yet_with_cancelled() {
        let mut pump = running(1024, None);
        pump.feed(OutputStream::Stdout, b"a").await;
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"a")))
        );
        pump.control.cut();
        settles("the pump's end", pump.pump).await.expect("joined");
        assert_eq!(
            code(next(&mut pump.stdout).await),
            Some(OperationCode::Cancelled)
        );
        assert_eq!(
            code(next(&mut pump.stderr).await),
            Some(OperationCode::Cancelled)
        );
        assert_eq!(next(&mut pump.stdout).await, None);
    }

    #[tokio::test]
    async fn after_the_engine_ended_its_stream_a_cut_fails_nothing() {
        let mut pump = running(1024, None);
        pump.feed(OutputStream::Stdout, b"a").await;
        drop(pump.feed);
        settles("the pump's end", pump.pump).await.expect("joined");
        pump.control.cut();
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"a")))
        );
        assert_eq!(next(&mut pump.stdout).await, None);
        assert_eq!(next(&mut pump.stderr).await, None);
    }

    #[tokio::test]
    async fn a_stream_ended_or_failed_on_its_own_leaves_the_other_running() {
        let mut pump = running(4096, None);
        pump.feed(OutputStream::Stdout, b"out").await;
        pump.feed(OutputStream::Stderr, b"err").await;
        let event = |e| settles("the pump reads the feed", pump.feed.send(Ok(e)));
        event(OutputEvent::End(OutputStream::Stderr))
            .await
            .expect("sent");
        // stderr ends after its bytes while stdout still runs.
        assert_eq!(
            next(&mut pump.stderr).await,
            Some(Ok(Bytes::from_static(b"err")))
        );
        assert_eq!(next(&mut pump.stderr).await, None);
        pump.feed(OutputStream::Stdout, b"more").await;
        let failure = OwnerError::operation(OperationCode::StreamFailure, "stdout broke");
        let event = |e| settles("the pump reads the feed", pump.feed.send(Ok(e)));
        event(OutputEvent::Failed(OutputStream::Stdout, failure.clone()))
            .await
            .expect("sent");
        // Bytes after a failure are nobody's: the stream's failure stays its last word.
        pump.feed(OutputStream::Stdout, b"late").await;
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"out")))
        );
        assert_eq!(
            next(&mut pump.stdout).await,
            Some(Ok(Bytes::from_static(b"more")))
        );
        assert_eq!(next(&mut pump.stdout).await, Some(Err(failure)));
        drop(pump.feed);
        settles("the pump's end", pump.pump).await.expect("joined");
        assert_eq!(next(&mut pump.stdout).await, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_ends_a_pump_whose_engine_always_has_output_ready() {
        let (stdout, _stdout_rx) = staged::lane();
        let (stderr, _stderr_rx) = staged::lane();
        let control = Arc::new(PumpControl::default());
        // Past the total at once: the pump reads on, discarding, as fast as the engine gives.
        let always = futures::stream::repeat_with(|| {
            Ok((OutputStream::Stdout, Bytes::from_static(b"x")).into())
        });
        let pump = OutputPump::new(
            always.boxed(),
            PumpSettings {
                budget: Arc::new(Semaphore::new(16)),
                staging: 16,
                max_output: Some(0),
                stdout,
                stderr,
                control: Arc::clone(&control),
                violated: Arc::new(AtomicBool::new(false)),
                on_violation: Arc::new(|_| {}),
                stalls: Arc::default(),
            },
        );
        let pumping = tokio::spawn(pump.run());
        tokio::time::sleep(Duration::from_millis(20)).await;
        control.close();
        settles("the pump's end", pumping).await.expect("joined");
    }
}
