//! The owner's side of a process's streams: bounded staging in both directions, the
//! caller-selected totals, and an owned stop when a limit is crossed. Nothing is truncated:
//! crossing a limit fails the streams.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::Semaphore;

use super::output_pump::{OutputPump, PumpControl, PumpSettings};
use super::staged::{self, StagedReceiver};
use super::stall::{Seen, StallWatch, Stalled};
use super::stdin_lane::{StdinLane, Taken};
use super::{output_permits, permits};

use crate::lifecycle::driver::{OutputStream, ProcessChannels, ProcessExit};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::policy::request::StreamLimits;

/// The task that writes queued stdin to the guest; joinable by `end()`.
type StdinWriter = Shared<BoxFuture<'static, Result<(), OwnerError>>>;

/// One output stream: its reader (behind a lock a read holds while it waits), and whether its
/// reader is gone (the caller destroyed the stream), seen without the lock.
struct Output {
    reader: tokio::sync::Mutex<OutputReader>,
    discarded: Discarded,
}

/// Set once, when a stream's reader is gone: its output is discarded from then on.
#[derive(Default)]
struct Discarded {
    set: AtomicBool,
    /// Wakes a read waiting for a piece once `set` is.
    wake: tokio::sync::Notify,
}

impl Discarded {
    fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// Resolves once `set`.
    async fn wait(&self) {
        loop {
            // Registered before the flag is read, so a `set()` in between is not lost.
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.is_set() {
                return;
            }
            woken.await;
        }
    }
}

/// One output stream's staged chunks, and a failure that arrived behind delivered bytes.
struct OutputReader {
    staged: StagedReceiver,
    failed: Option<OwnerError>,
    /// The last read took at least `FLOWING_BYTES`: the stream is in full flow.
    flowing: bool,
}

/// A read at least this large means the stream is in full flow (bulk output, not a message).
const FLOWING_BYTES: usize = 64 * 1_024;
/// A read of a stream in full flow gathers about this much before it crosses to JavaScript
/// (bounded by the read's `max` and half the staging), so bulk output costs few crossings...
const FLOWING_BATCH_BYTES: usize = 512 * 1_024;
/// ...but waits at most this long for it: a stream that slows down is delivered at once again.
const FLOWING_BATCH_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

impl Output {
    fn new(staged: StagedReceiver) -> Self {
        Self {
            reader: tokio::sync::Mutex::new(OutputReader {
                staged,
                failed: None,
                flowing: false,
            }),
            discarded: Discarded::default(),
        }
    }
}

/// The pieces one read hands out, and their bytes.
struct Gathered {
    pieces: Vec<bytes::Bytes>,
    total: usize,
}

impl Gathered {
    /// Takes what is staged now until `limit` bytes are gathered; `false` once the stream's
    /// end or a failure was reached (a failure is kept for the next read).
    fn take_staged(&mut self, reader: &mut OutputReader, limit: usize) -> bool {
        while self.total < limit {
            match reader.staged.try_recv() {
                Ok(Ok(bytes)) => {
                    self.total += bytes.len();
                    self.pieces.push(bytes);
                }
                Ok(Err(error)) => {
                    // Delivered after the bytes before it: the next read reports it.
                    reader.failed = Some(error);
                    return false;
                }
                Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
        true
    }
}

pub use super::output_pump::OnViolation;

pub struct ProcessIo {
    limits: StreamLimits,
    /// Written directly while nothing is staged, else staged for the writer task.
    stdin: Arc<StdinLane>,
    /// Staging space for stdin. Closed when the writer fails (queued chunks are dropped with
    /// their space, so nobody may wait for it) and on `close()`.
    stdin_budget: Arc<Semaphore>,
    stdin_total: AtomicU64,
    stdin_writer: Mutex<Option<StdinWriter>>,
    stdout: Output,
    stderr: Output,
    output_budget: Arc<Semaphore>,
    pump: Arc<PumpControl>,
    /// Resolves when the output pump has ended.
    pump_ended: Shared<BoxFuture<'static, ()>>,
    exit: Shared<BoxFuture<'static, ProcessExit>>,
    violated: Arc<AtomicBool>,
    on_violation: OnViolation,
    stalls: Arc<StallWatch>,
}

/// A process's streams dropped without `end` or `close` still let go of stdin: the writer task
/// writes what is staged and delivers EOF, then ends (it would otherwise wait forever). The
/// output pump ends too: nobody can read what it stages, and the space of what was staged with
/// the readers never comes back.
impl Drop for ProcessIo {
    fn drop(&mut self) {
        self.stdin.end();
        self.output_budget.close();
        self.pump.close();
    }
}

/// After compute stopped, the output pump gets this long to reach the end of the engine's
/// stream (the engine ends it once the killed container is gone) before the streams are cut.
pub const OUTPUT_END_WAIT_AFTER_STOP: Duration = Duration::from_secs(1);

impl ProcessIo {
    /// Wires the raw channels; spawns the output pump and the stdin writer on the runtime.
    pub fn new(
        channels: ProcessChannels,
        limits: StreamLimits,
        on_violation: OnViolation,
    ) -> Arc<Self> {
        let ProcessChannels {
            input,
            output,
            exit,
        } = channels;
        let output_staging =
            usize::try_from(limits.max_buffered_output_bytes).unwrap_or(usize::MAX);
        let input_staging = usize::try_from(limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
        let output_budget = Arc::new(Semaphore::new(output_staging.min(Semaphore::MAX_PERMITS)));
        let stdin_budget = Arc::new(Semaphore::new(input_staging.min(Semaphore::MAX_PERMITS)));
        let (stdout_tx, stdout_rx) = staged::lane();
        let (stderr_tx, stderr_rx) = staged::lane();
        let violated = Arc::new(AtomicBool::new(false));
        let stalls = Arc::new(StallWatch::default());

        let pump = Arc::new(PumpControl::default());
        let pumping = tokio::spawn(
            OutputPump::new(
                output,
                PumpSettings {
                    budget: Arc::clone(&output_budget),
                    staging: limits.max_buffered_output_bytes,
                    max_output: limits.max_output_bytes,
                    stdout: stdout_tx,
                    stderr: stderr_tx,
                    control: Arc::clone(&pump),
                    violated: Arc::clone(&violated),
                    on_violation: Arc::clone(&on_violation),
                    stalls: Arc::clone(&stalls),
                },
            )
            .run(),
        );
        let pump_ended = async move {
            let _ = pumping.await;
        }
        .boxed()
        .shared();

        let stdin = StdinLane::new(input, Arc::clone(&stdin_budget));
        let writer = tokio::spawn(Arc::clone(&stdin).writer());
        let writer = async move {
            writer.await.unwrap_or_else(|e| {
                Err(OwnerError::driver(format!(
                    "stdin writer ended abnormally: {e}"
                )))
            })
        }
        .boxed()
        .shared();

        Arc::new(Self {
            limits,
            stdin,
            stdin_budget,
            stdin_total: AtomicU64::new(0),
            stdin_writer: Mutex::new(Some(writer)),
            stdout: Output::new(stdout_rx),
            stderr: Output::new(stderr_rx),
            output_budget,
            pump,
            pump_ended,
            exit: exit.shared(),
            violated,
            on_violation,
            stalls,
        })
    }

    /// The streams newly stalled (see `stall`): each reported once, never while stopping.
    pub fn stalls(&self) -> Vec<Stalled> {
        // Staged bytes of a stream no read is taking (a read in flight holds the reader's lock).
        let unread = |output: &Output| {
            !output.discarded.is_set()
                && output
                    .reader
                    .try_lock()
                    .is_ok_and(|reader| reader.staged.unread() > 0)
        };
        let stdin_staged =
            self.stdin_budget.available_permits() < self.stdin_permits(usize::MAX) as usize;
        self.stalls.take(&Seen {
            now: tokio::time::Instant::now(),
            stopping: self.pump.winding_down(),
            output_unread: [unread(&self.stdout), unread(&self.stderr)],
            stdin_open: self.stdin.refused().is_none()
                && !stdin_staged
                && self.exit.peek().is_none(),
        })
    }

    /// Whether a stream limit was crossed (the owned stop then comes from the streams).
    pub fn violated(&self) -> bool {
        self.violated.load(Ordering::SeqCst)
    }

    fn violation(&self, limit: &OwnerError) {
        if !self.violated.swap(true, Ordering::SeqCst) {
            (self.on_violation)(limit.clone());
        }
    }

    /// Counts `len` more stdin bytes against `maxStdinBytes`; past it, the violation stops the
    /// sandbox.
    fn count_stdin(&self, len: usize) -> Result<(), OwnerError> {
        let len = len as u64;
        let total = self
            .stdin_total
            .fetch_add(len, Ordering::SeqCst)
            .saturating_add(len);
        if let Some(max) = self.limits.max_stdin_bytes {
            if total > max {
                let limit = OwnerError::operation(
                    OperationCode::InputLimit,
                    format!("stdin would exceed policy.streams.maxStdinBytes ({max}); the sandbox is being stopped"),
                );
                self.violation(&limit);
                return Err(limit);
            }
        }
        Ok(())
    }

    /// Staging permits for `len` bytes: a chunk larger than the whole staging waits for all
    /// of it, never for more.
    fn stdin_permits(&self, len: usize) -> u32 {
        let staging = usize::try_from(self.limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
        permits(len.min(staging).min(Semaphore::MAX_PERMITS))
    }

    /// Permits a taken chunk no longer needs: the connection took all of it.
    fn settle(&self, taken: Taken, permits: u32) {
        if taken == Taken::Written {
            self.stdin_budget.add_permits(permits as usize);
        }
    }

    /// Writes `chunk` to the guest, or stages what the connection does not take at once;
    /// waits while the staging is full (backpressure).
    pub async fn write(&self, chunk: &[u8]) -> Result<(), OwnerError> {
        self.count_stdin(chunk.len())?;
        self.stalls.moved();
        let admission = self.stdin.admit()?;
        let taken = self.stdin_permits(chunk.len());
        match self.stdin_budget.try_acquire_many(taken) {
            Ok(permit) => permit.forget(),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(self.stdin_closed()),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                // A full staging: wait for half of it (or the chunk, if larger), so the
                // writes that follow find room at once: one wake per half staging, not one
                // per chunk.
                let staging =
                    usize::try_from(self.limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
                let room = taken.max(self.stdin_permits(staging / 2));
                match self.stdin_budget.acquire_many(room).await {
                    Ok(permit) => {
                        permit.forget();
                        self.stdin_budget.add_permits((room - taken) as usize);
                    }
                    Err(_) => return Err(self.stdin_closed()),
                }
            }
        }
        let result = self.stdin.take(chunk, taken, Some(admission));
        self.settle_or_release(result, taken)
    }

    fn settle_or_release(
        &self,
        result: Result<Taken, OwnerError>,
        permits: u32,
    ) -> Result<(), OwnerError> {
        match result {
            Ok(taken) => {
                self.settle(taken, permits);
                Ok(())
            }
            Err(error) => {
                self.stdin_budget.add_permits(permits as usize);
                Err(error)
            }
        }
    }

    /// Takes `chunk` at once if the staging has room for it now: `Ok(true)` when taken,
    /// `Ok(false)` when the caller must wait through `write` (nothing was counted or taken).
    /// Never waits, so the JavaScript thread may call it.
    pub fn try_write(&self, chunk: &[u8]) -> Result<bool, OwnerError> {
        if let Some(refusal) = self.stdin.refused() {
            return Err(refusal);
        }
        let taken = self.stdin_permits(chunk.len());
        match self.stdin_budget.try_acquire_many(taken) {
            Ok(permit) => permit.forget(),
            Err(tokio::sync::TryAcquireError::NoPermits) => return Ok(false),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(self.stdin_closed()),
        }
        if let Err(error) = self.count_stdin(chunk.len()) {
            self.stdin_budget.add_permits(taken as usize);
            return Err(error);
        }
        self.stalls.moved();
        let result = self.stdin.take(chunk, taken, None);
        self.settle_or_release(result, taken).map(|()| true)
    }

    /// Why stdin takes no more: the writer's failure, else closed.
    fn stdin_closed(&self) -> OwnerError {
        self.stdin
            .failure()
            .unwrap_or_else(|| OwnerError::state("stdin is closed"))
    }

    /// Ends stdin: resolves once everything queued was written and EOF was delivered (a write
    /// still waiting for staging space is written first).
    pub async fn end(&self) -> Result<(), OwnerError> {
        self.stdin.end();
        let writer = self
            .stdin_writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match writer {
            Some(writer) => writer.await,
            None => Ok(()),
        }
    }

    /// The next bytes of stdout or stderr, at most `max` of them (at least one chunk); `None`
    /// at end of stream. Staged chunks are coalesced so a fast stream costs few crossings.
    pub async fn read(
        &self,
        stream: OutputStream,
        max: usize,
    ) -> Result<Option<Vec<u8>>, OwnerError> {
        let output = self.output(stream);
        if output.discarded.is_set() {
            return Ok(None);
        }
        let mut reader = output.reader.lock().await;
        if output.discarded.is_set() {
            return Ok(None);
        }
        if let Some(error) = reader.failed.take() {
            return Err(error);
        }
        let received = tokio::select! {
            biased;
            // A read in flight when the stream is discarded ends as its end, at once.
            () = output.discarded.wait() => return Ok(None),
            received = reader.staged.recv() => received,
        };
        let first = match received {
            Some(Ok(bytes)) => bytes,
            Some(Err(error)) => return Err(error),
            None => return Ok(None),
        };
        // Staged pieces are gathered first, so the buffer handed out is exactly as large as
        // the bytes it holds (a small read never pins a `max`-sized allocation).
        let mut gathered = Gathered {
            total: first.len(),
            pieces: vec![first],
        };
        let mut more = gathered.take_staged(&mut reader, max);
        // In full flow, wait (briefly) for a larger batch; its pieces are only released once
        // this read returns. When the staging cannot hold the whole batch (the other stream's
        // unread pieces hold it, or the pieces' bookkeeping on top of their bytes does not fit),
        // the wait ends at its deadline. It is woken once the batch is staged (or a failure, the
        // end), not once per piece.
        let staging = usize::try_from(self.limits.max_buffered_output_bytes).unwrap_or(usize::MAX);
        let batch = FLOWING_BATCH_BYTES.min(max).min(staging / 2);
        if reader.flowing && more {
            let deadline = tokio::time::Instant::now() + FLOWING_BATCH_WAIT;
            while more && gathered.total < batch {
                let short = (batch - gathered.total) as u64;
                let woken = reader.staged.wait_for(short, deadline).await;
                more = gathered.take_staged(&mut reader, batch);
                if !woken {
                    break;
                }
            }
        }
        let Gathered { total, pieces } = gathered;
        reader.flowing = total >= FLOWING_BYTES;
        let mut out = Vec::with_capacity(total);
        let mut released = 0usize;
        for piece in &pieces {
            out.extend_from_slice(piece);
            released += output_permits(piece.len(), self.limits.max_buffered_output_bytes) as usize;
        }
        self.output_budget.add_permits(released);
        Ok(Some(out))
    }

    fn output(&self, stream: OutputStream) -> &Output {
        match stream {
            OutputStream::Stdout => &self.stdout,
            OutputStream::Stderr => &self.stderr,
        }
    }

    /// The caller destroyed `stream`: what is staged on it goes, with its staging space, and
    /// from now on the pump drops what the engine sends on it without staging it, so a guest
    /// that keeps writing there never blocks on it, and the other stream and the exit go on.
    /// A read in flight ends as at the stream's end; later reads too. Idempotent.
    pub async fn discard(&self, stream: OutputStream) {
        let output = self.output(stream);
        output.discarded.set();
        let mut reader = output.reader.lock().await;
        // Closed first: a piece the pump sends from now on comes back to it (with its space);
        // one sent before, even one still landing in the channel, is drained here (a closed
        // channel's `recv` ends only once every send admitted before the close has landed, and a
        // send never waits). Either way no staging space stays taken.
        reader.staged.close();
        let mut released = 0usize;
        while let Some(item) = reader.staged.recv().await {
            if let Ok(piece) = item {
                released +=
                    output_permits(piece.len(), self.limits.max_buffered_output_bytes) as usize;
            }
        }
        reader.failed = None;
        self.output_budget.add_permits(released);
    }

    pub async fn exit(&self) -> ProcessExit {
        self.exit.clone().await
    }

    /// Closes both directions (stop): pending writes and reads settle.
    pub async fn close(&self) {
        self.stdin.end();
        self.stdin_budget.close();
        self.output_budget.close();
        self.pump.close();
    }

    /// Streams nobody will be handed, while compute stops: stdin ends, and the output pump
    /// reads on (as after `stopping`) until the engine ends its stream, so the stop's kill is
    /// never held by output nobody reads.
    pub fn stop_unclaimed(&self) {
        self.stdin.end();
        self.stdin_budget.close();
        self.pump.stopping();
    }

    /// Compute stopped: the output pump delivers what the engine still sends, until the end of
    /// its stream, for `OUTPUT_END_WAIT_AFTER_STOP` at most; past it, the streams not ended yet
    /// fail with `cancelled` (the engine may have held more). Then as `close`.
    pub async fn close_after_stop(&self) {
        let ended = tokio::time::timeout(OUTPUT_END_WAIT_AFTER_STOP, self.pump_ended.clone())
            .await
            .is_ok();
        if !ended {
            self.pump.cut();
        }
        self.close().await;
    }

    /// Compute is being stopped: from now on a piece of output waits at most
    /// `ROOM_WAIT_WHILE_STOPPING` for staging space, so an unread stream never keeps the engine
    /// from stopping the container. What finds no room is discarded, and its stream fails with
    /// `cancelled` after the bytes it staged (see `output_pump`).
    pub fn stopping(&self) {
        self.pump.stopping();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::settles;
    use bytes::Bytes;
    use futures::StreamExt;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, DuplexStream};
    use tokio::sync::mpsc;

    /// A process whose stdin is a 16-byte pipe that nobody reads (until the test says so), with
    /// `staging` bytes of stdin staging.
    fn process(staging: u64) -> (Arc<ProcessIo>, DuplexStream) {
        let (input, guest) = tokio::io::duplex(16);
        let channels = ProcessChannels {
            input: Box::pin(input),
            output: futures::stream::pending().boxed(),
            exit: futures::future::pending().boxed(),
        };
        let limits = StreamLimits {
            max_buffered_input_bytes: staging,
            ..StreamLimits::DEFAULT
        };
        (ProcessIo::new(channels, limits, Arc::new(|_| {})), guest)
    }

    type Reader = tokio::task::JoinHandle<std::io::Result<Vec<u8>>>;

    /// The guest reading everything until EOF.
    fn read_all(mut guest: DuplexStream) -> Reader {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            guest.read_to_end(&mut seen).await.map(|_| seen)
        })
    }

    /// Ends stdin, then what the guest read.
    async fn end_then_seen(io: &ProcessIo, reader: Reader) -> Vec<u8> {
        settles("end", io.end()).await.expect("ended");
        settles("the guest reads", reader)
            .await
            .expect("joined")
            .expect("read")
    }

    #[tokio::test]
    async fn reads_of_tiny_pieces_give_back_all_they_cost_the_staging() {
        let (io, output_tx) = fed_process(StreamLimits {
            max_buffered_output_bytes: 4_096,
            ..StreamLimits::DEFAULT
        });
        // Ten times what the staging holds of them at once, alternating streams: every byte
        // arrives, so every read gave back what its pieces cost.
        let pieces = 10 * 4_096 / (1 + crate::process::PIECE_BOOKKEEPING);
        for i in 0..pieces {
            let which = [OutputStream::Stdout, OutputStream::Stderr][i % 2];
            output_tx
                .send(Ok((which, Bytes::from_static(b"x"))))
                .expect("the pump listens");
        }
        drop(output_tx);
        let read_all = |which| {
            let io = &io;
            async move {
                let mut read = 0;
                while let Some(bytes) = io.read(which, 1 << 20).await.expect("no failure") {
                    read += bytes.len();
                }
                read
            }
        };
        let read = settles(
            "both streams' ends",
            futures::future::join(
                read_all(OutputStream::Stdout),
                read_all(OutputStream::Stderr),
            ),
        )
        .await;
        assert_eq!(read, (pieces.div_ceil(2), pieces / 2));
        assert_eq!(io.output_budget.available_permits(), 4_096);
    }

    #[tokio::test]
    async fn close_ends_the_output_even_while_the_engine_sends_nothing() {
        let (io, output_tx) = fed_process(StreamLimits::DEFAULT);
        output_tx
            .send(Ok((OutputStream::Stdout, Bytes::from_static(b"before"))))
            .expect("the pump listens");
        let first = settles("the first read", io.read(OutputStream::Stdout, 64)).await;
        assert_eq!(first.expect("a chunk").as_deref(), Some(&b"before"[..]));
        io.close().await;
        // The engine's stream is still open (its sender lives): only close() can end the reads.
        let end = settles("the read after close", io.read(OutputStream::Stdout, 64)).await;
        assert_eq!(end.expect("no error"), None);
        assert!(
            output_tx.is_closed(),
            "the pump let go of the engine's stream"
        );
    }

    #[tokio::test]
    async fn try_write_stages_only_what_the_staging_holds_now_and_counts_it_once() {
        let (io, guest) = process(8);
        // The 16-byte pipe takes the first chunk straight away: nothing is staged.
        assert_eq!(io.try_write(&[b'a'; 16]), Ok(true));
        assert_eq!(io.stdin_budget.available_permits(), 8);
        // The pipe is full: the next chunks are staged, up to the staging's size.
        assert_eq!(io.try_write(b"bcde"), Ok(true));
        assert_eq!(io.try_write(b"fghi"), Ok(true));
        assert_eq!(io.stdin_budget.available_permits(), 0);
        // A chunk that does not fit now is refused without being counted or staged.
        assert_eq!(io.try_write(b"x"), Ok(false));
        assert_eq!(io.stdin_total.load(Ordering::SeqCst), 24);
        let waiting = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.write(b"jk").await }
        });
        let reader = read_all(guest);
        settles("the waiting write", waiting)
            .await
            .expect("joined")
            .expect("taken");
        let seen = end_then_seen(&io, reader).await;
        assert_eq!(seen, [&[b'a'; 16][..], b"bcdefghijk"].concat());
        assert_eq!(
            io.try_write(b"late"),
            Err(OwnerError::state("stdin is already ended"))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stdin_keeps_its_order_across_direct_writes_staging_and_waits() {
        let (io, mut guest) = process(96);
        // A slow guest: small reads with pauses, so the pipe fills and drains over and over.
        let reader = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut piece = [0u8; 5];
            loop {
                match guest.read(&mut piece).await {
                    Ok(0) => return Ok::<_, std::io::Error>(seen),
                    Ok(n) => seen.extend_from_slice(&piece[..n]),
                    Err(error) => return Err(error),
                }
                if seen.len() % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut sent = Vec::new();
        for i in 0..400u32 {
            let chunk: Vec<u8> = (0..(i % 53 + 1)).map(|j| (i * 31 + j) as u8).collect();
            sent.extend_from_slice(&chunk);
            if !io.try_write(&chunk).expect("taken") {
                settles("a waiting write", io.write(&chunk))
                    .await
                    .expect("taken");
            }
        }
        let seen = end_then_seen(&io, reader).await;
        assert_eq!(seen.len(), sent.len());
        assert!(seen == sent, "the guest read the bytes in another order");
    }

    #[tokio::test]
    async fn end_waits_for_a_write_admitted_before_it() {
        let (io, mut guest) = process(4);
        assert_eq!(io.try_write(&[b'a'; 16]), Ok(true));
        assert_eq!(io.try_write(b"bcde"), Ok(true));
        let waiting = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.write(b"after").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let ending = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.end().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!ending.is_finished(), "EOF waits for the admitted write");
        let mut seen = Vec::new();
        settles("the guest reads", guest.read_to_end(&mut seen))
            .await
            .expect("read");
        assert_eq!(seen, [&[b'a'; 16][..], b"bcdeafter"].concat());
        settles("the admitted write", waiting)
            .await
            .expect("joined")
            .expect("taken");
        settles("end", ending)
            .await
            .expect("joined")
            .expect("ended");
    }

    #[tokio::test]
    async fn a_direct_write_to_a_closed_connection_fails_and_closes_the_staging() {
        let (io, guest) = process(64);
        drop(guest);
        let error = io.try_write(b"lost").expect_err("the connection is gone");
        assert!(
            error
                .to_string()
                .contains("writing the process stdin failed"),
            "{error}"
        );
        assert_eq!(io.try_write(b"later"), Err(error.clone()));
        assert_eq!(
            settles("a later write", io.write(b"later")).await,
            Err(error.clone())
        );
        assert_eq!(settles("end", io.end()).await, Err(error));
    }

    #[tokio::test]
    async fn an_empty_chunk_behind_staged_bytes_is_no_failure() {
        let (io, guest) = process(64);
        // The 16-byte pipe takes 16 bytes, the staging the other 4, then the empty chunks.
        assert_eq!(io.try_write(&[b'a'; 20]), Ok(true));
        settles("an empty write", io.write(b""))
            .await
            .expect("taken");
        assert_eq!(io.try_write(b""), Ok(true));
        let reader = read_all(guest);
        let seen = end_then_seen(&io, reader).await;
        assert_eq!(seen, [b'a'; 20]);
        assert_eq!(io.stdin_budget.available_permits(), 64);
    }

    #[tokio::test]
    async fn streams_dropped_without_end_still_deliver_eof() {
        let (io, mut guest) = process(64);
        assert_eq!(io.try_write(&[b'a'; 20]), Ok(true));
        drop(io);
        let mut seen = Vec::new();
        settles("the guest reads to EOF", guest.read_to_end(&mut seen))
            .await
            .expect("read");
        assert_eq!(seen, [b'a'; 20]);
    }

    #[tokio::test]
    async fn try_write_respects_the_stdin_total() {
        let (input, _guest) = tokio::io::duplex(1024);
        let channels = ProcessChannels {
            input: Box::pin(input),
            output: futures::stream::pending().boxed(),
            exit: futures::future::pending().boxed(),
        };
        let limits = StreamLimits {
            max_stdin_bytes: Some(6),
            ..StreamLimits::DEFAULT
        };
        let io = ProcessIo::new(channels, limits, Arc::new(|_| {}));
        assert_eq!(io.try_write(b"1234"), Ok(true));
        let crossing = io.try_write(b"567");
        assert!(
            matches!(
                crossing,
                Err(OwnerError::Operation {
                    code: OperationCode::InputLimit,
                    ..
                })
            ),
            "{crossing:?}"
        );
        assert!(io.violated());
    }

    type EngineFeed = mpsc::UnboundedSender<Result<(OutputStream, Bytes), OwnerError>>;

    /// A process whose engine output the test feeds, with `limits`; its stdin goes nowhere.
    fn fed_process(limits: StreamLimits) -> (Arc<ProcessIo>, EngineFeed) {
        let (feed, output) = mpsc::unbounded_channel();
        let channels = ProcessChannels {
            input: Box::pin(tokio::io::sink()),
            output: tokio_stream_of(output),
            exit: futures::future::pending().boxed(),
        };
        (ProcessIo::new(channels, limits, Arc::new(|_| {})), feed)
    }

    fn tokio_stream_of(
        mut rx: mpsc::UnboundedReceiver<Result<(OutputStream, Bytes), OwnerError>>,
    ) -> crate::lifecycle::driver::ProcessOutput {
        crate::lifecycle::driver::output_of_chunks(
            futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed(),
        )
    }

    #[tokio::test]
    async fn a_write_waiting_for_staging_space_does_not_keep_close_out() {
        let (io, _guest) = process(64);
        settles("the first write", io.write(&[1; 64])).await.ok();
        let pending = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.write(&[2; 32]).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        settles("close", io.close()).await;
        let refused = settles("the pending write", pending).await;
        assert!(matches!(refused, Ok(Err(_))));
    }

    #[tokio::test]
    async fn chunks_dropped_by_a_failed_writer_do_not_strand_later_writes() {
        let (io, guest) = process(64);
        settles("a write", io.write(&[1; 40])).await.ok();
        settles("a queued write", io.write(&[2; 20])).await.ok();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The guest goes away: the writer fails with 20 queued bytes that never return space.
        drop(guest);
        let later = settles("a later write", io.write(&[3; 60])).await;
        let error = later.expect_err("a write after the writer failed is refused");
        assert!(error.to_string().contains("stdin"), "{error}");
        assert!(settles("end", io.end()).await.is_err());
    }

    /// A process whose stdout is fed by the test, one piece at a time.
    fn output_process() -> (Arc<ProcessIo>, mpsc::UnboundedSender<Bytes>) {
        let (feed, mut pieces) = mpsc::unbounded_channel::<Bytes>();
        let stdout = futures::stream::poll_fn(move |cx| pieces.poll_recv(cx)).boxed();
        (
            ProcessIo::new(
                stdout_channels(stdout),
                StreamLimits::DEFAULT,
                Arc::new(|_| {}),
            ),
            feed,
        )
    }

    /// A process whose stdout is `pieces`, in order, with a stdin that takes everything.
    fn stdout_channels(pieces: futures::stream::BoxStream<'static, Bytes>) -> ProcessChannels {
        ProcessChannels {
            input: Box::pin(tokio::io::sink()),
            output: pieces
                .map(|bytes| Ok((OutputStream::Stdout, bytes).into()))
                .boxed(),
            exit: futures::future::pending().boxed(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn unread_stderr_holding_the_guest_is_reported_once_while_stdout_is_read() {
        let limits = StreamLimits {
            max_buffered_output_bytes: 1_024,
            ..StreamLimits::DEFAULT
        };
        let (io, feed) = fed_process(limits);
        for _ in 0..4 {
            feed.send(Ok((OutputStream::Stderr, Bytes::from(vec![2; 1_024]))))
                .expect("fed");
        }
        // The host reads stdout only: its read waits, stderr fills the staging.
        let reading = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.read(OutputStream::Stdout, 1 << 20).await }
        });
        tokio::time::sleep(crate::process::stall::STALL_AFTER / 2).await;
        assert!(io.stalls().is_empty(), "not yet");
        tokio::time::sleep(crate::process::stall::STALL_AFTER / 2).await;
        assert_eq!(io.stalls(), vec![Stalled::Stderr]);
        assert!(io.stalls().is_empty(), "once");
        // Once stderr is read, the pump moves on; a stop reports nothing more.
        let first = io.read(OutputStream::Stderr, 1 << 20).await.expect("read");
        assert!(first.is_some());
        io.stopping();
        tokio::time::sleep(crate::process::stall::STALL_AFTER * 2).await;
        assert!(io.stalls().is_empty());
        reading.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn with_neither_stream_read_only_the_one_holding_bytes_is_reported() {
        let limits = StreamLimits {
            max_buffered_output_bytes: 1_024,
            ..StreamLimits::DEFAULT
        };
        let (io, feed) = fed_process(limits);
        for _ in 0..4 {
            feed.send(Ok((OutputStream::Stderr, Bytes::from(vec![2; 1_024]))))
                .expect("fed");
        }
        tokio::time::sleep(crate::process::stall::STALL_AFTER).await;
        assert_eq!(io.stalls(), vec![Stalled::Stderr], "stdout holds nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_stdin_with_a_quiet_guest_is_reported_once_and_not_after_its_end() {
        let (io, _guest) = process(1_024);
        io.write(b"input").await.expect("written");
        tokio::time::sleep(crate::process::stall::STALL_AFTER).await;
        assert_eq!(io.stalls(), vec![Stalled::Stdin]);
        assert!(io.stalls().is_empty(), "once");
        let (ended, _guest) = process(1_024);
        ended.stdin.end();
        tokio::time::sleep(crate::process::stall::STALL_AFTER).await;
        assert!(ended.stalls().is_empty(), "an ended stdin is no stall");
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_stop_the_rest_of_the_engines_output_is_delivered_to_its_end() {
        let (io, feed) = output_process();
        feed.send(Bytes::from_static(b"last")).expect("fed");
        drop(feed);
        let stopped = tokio::time::Instant::now();
        io.close_after_stop().await;
        assert!(stopped.elapsed() < OUTPUT_END_WAIT_AFTER_STOP);
        let last = io.read(OutputStream::Stdout, 64).await.expect("read");
        assert_eq!(last.as_deref(), Some(&b"last"[..]));
        assert_eq!(io.read(OutputStream::Stdout, 64).await, Ok(None));
        assert_eq!(io.read(OutputStream::Stderr, 64).await, Ok(None));
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_stop_an_engine_that_never_ends_its_output_is_cut_within_the_bound() {
        let (io, feed) = output_process();
        feed.send(Bytes::from_static(b"some")).expect("fed");
        let stopped = tokio::time::Instant::now();
        io.close_after_stop().await;
        assert_eq!(stopped.elapsed(), OUTPUT_END_WAIT_AFTER_STOP);
        settles("the pump lets go of the engine's stream", feed.closed()).await;
        let some = io.read(OutputStream::Stdout, 64).await.expect("read");
        assert_eq!(some.as_deref(), Some(&b"some"[..]));
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let cut = io.read(stream, 64).await;
            assert_eq!(
                cut.as_ref().err().and_then(OwnerError::code),
                Some(OperationCode::Cancelled),
                "{cut:?}"
            );
        }
    }

    #[tokio::test]
    async fn dropped_streams_end_a_pump_waiting_for_staging_space() {
        let (feed, mut pieces) = mpsc::channel::<Bytes>(1);
        let stdout = futures::stream::poll_fn(move |cx| pieces.poll_recv(cx)).boxed();
        let channels = stdout_channels(stdout);
        let limits = StreamLimits {
            max_buffered_output_bytes: 4,
            ..StreamLimits::DEFAULT
        };
        let io = ProcessIo::new(channels, limits, Arc::new(|_| {}));
        for piece in [&b"abcd"[..], b"efgh", b"ijkl"] {
            settles("the pump reads", feed.send(Bytes::from_static(piece)))
                .await
                .expect("the pump listens");
        }
        // "abcd" is staged, the pump waits for room with "efgh", "ijkl" fills the slot.
        drop(io);
        settles("the pump lets go of the engine's stream", feed.closed()).await;
    }

    #[tokio::test]
    async fn a_discarded_stream_frees_its_staging_and_never_holds_the_other_stream() {
        let staging = 4 * (1_024 + crate::process::PIECE_BOOKKEEPING as u64);
        let (io, feed) = fed_process(StreamLimits {
            max_buffered_output_bytes: staging,
            ..StreamLimits::DEFAULT
        });
        // A read waiting on stdout when it is discarded ends as at its end.
        let waiting = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.read(OutputStream::Stdout, 1 << 20).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // stdout fills the whole staging; nobody reads it.
        for _ in 0..4 {
            feed.send(stdout_piece(1_024)).expect("fed");
        }
        settles("the discard", io.discard(OutputStream::Stdout)).await;
        assert_eq!(
            settles("the read in flight", waiting).await.ok(),
            Some(Ok(None))
        );
        // Far more than the staging, on stdout, then a line on stderr: the pump drops the one
        // and stages the other, so stderr is read whole and the pump never waits for room.
        for _ in 0..64 {
            feed.send(stdout_piece(1_024)).expect("fed");
        }
        feed.send(Ok((OutputStream::Stderr, Bytes::from_static(b"done\n"))))
            .expect("fed");
        let err = settles("stderr", io.read(OutputStream::Stderr, 64)).await;
        assert_eq!(err.expect("read").as_deref(), Some(&b"done\n"[..]));
        assert_eq!(io.read(OutputStream::Stdout, 64).await, Ok(None));
        drop(feed);
        assert_eq!(
            settles("stderr's end", io.read(OutputStream::Stderr, 64)).await,
            Ok(None)
        );
        // Every staging permit came back.
        assert_eq!(io.output_budget.available_permits() as u64, staging);
        settles("a second discard", io.discard(OutputStream::Stdout)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_discard_racing_the_pump_leaves_no_staging_space_taken() {
        for _ in 0..200 {
            let staging = 8 * (64 + crate::process::PIECE_BOOKKEEPING as u64);
            let (io, feed) = fed_process(StreamLimits {
                max_buffered_output_bytes: staging,
                ..StreamLimits::DEFAULT
            });
            // The pump stages on another worker while the discard closes and drains.
            for _ in 0..32 {
                feed.send(stdout_piece(64)).expect("fed");
            }
            settles("the discard", io.discard(OutputStream::Stdout)).await;
            drop(feed);
            settles("stderr's end", io.read(OutputStream::Stderr, 64))
                .await
                .expect("the pump ended");
            assert_eq!(io.output_budget.available_permits() as u64, staging);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_in_full_flow_is_read_in_larger_batches_within_a_bounded_wait() {
        let (io, feed) = output_process();
        feed.send(Bytes::from(vec![1; FLOWING_BYTES])).expect("fed");
        let first = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(first.map(|b| b.len()), Some(FLOWING_BYTES));
        // In full flow now: a piece here and one arriving within the wait make one read.
        let piece = || Bytes::from(vec![2; 32 * 1_024]);
        feed.send(piece()).expect("fed");
        let feeder = tokio::spawn({
            let feed = feed.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                feed.send(Bytes::from(vec![2; 32 * 1_024])).expect("fed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                feed.send(Bytes::from_static(b"late")).expect("fed");
            }
        });
        let started = tokio::time::Instant::now();
        let batch = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(batch.map(|b| b.len()), Some(64 * 1_024));
        assert_eq!(
            started.elapsed(),
            FLOWING_BATCH_WAIT,
            "it waited the bound, no longer"
        );
        // Still flowing (64 KiB): the next read waits for its first piece as any read does,
        // then at most the bound for more, and delivers what it has.
        let late = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(late.map(|b| b.len()), Some(4));
        feeder.await.expect("feeder");
        // Not flowing any more: a small message is delivered without any wait.
        feed.send(Bytes::from_static(b"next")).expect("fed");
        let started = tokio::time::Instant::now();
        let next = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(next.map(|b| b.len()), Some(4));
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    /// A process in full flow (its last read took `FLOWING_BYTES`), its engine fed by the test.
    async fn flowing_process() -> (Arc<ProcessIo>, EngineFeed) {
        let (io, feed) = fed_process(StreamLimits::DEFAULT);
        feed.send(Ok((
            OutputStream::Stdout,
            Bytes::from(vec![1; FLOWING_BYTES]),
        )))
        .expect("fed");
        let first = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(first.map(|b| b.len()), Some(FLOWING_BYTES));
        (io, feed)
    }

    fn stdout_piece(n: usize) -> Result<(OutputStream, Bytes), OwnerError> {
        Ok((OutputStream::Stdout, Bytes::from(vec![2; n])))
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_staged_while_a_read_gathers_ends_its_wait_at_once() {
        let (io, feed) = flowing_process().await;
        feed.send(stdout_piece(32 * 1_024)).expect("fed");
        let feeder = tokio::spawn({
            let feed = feed.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                for _ in 0..15 {
                    feed.send(stdout_piece(32 * 1_024)).expect("fed");
                }
            }
        });
        let started = tokio::time::Instant::now();
        let batch = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(batch.map(|b| b.len()), Some(FLOWING_BATCH_BYTES));
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(1),
            "it ended when the batch was staged, before its bound"
        );
        feeder.await.expect("feeder");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_while_a_read_gathers_ends_it_and_comes_after_the_bytes_before_it() {
        let (io, feed) = flowing_process().await;
        feed.send(stdout_piece(100)).expect("fed");
        let feeder = tokio::spawn({
            let feed = feed.clone();
            async move {
                tokio::time::sleep(Duration::from_micros(500)).await;
                feed.send(stdout_piece(200)).expect("fed");
                feed.send(Err(OwnerError::operation(
                    OperationCode::StreamFailure,
                    "the engine's stream broke",
                )))
                .expect("fed");
            }
        });
        let started = tokio::time::Instant::now();
        let before = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(before.map(|b| b.len()), Some(300), "the bytes come first");
        assert!(
            started.elapsed() < FLOWING_BATCH_WAIT,
            "the failure ended the wait"
        );
        let failed = io.read(OutputStream::Stdout, 1 << 20).await;
        assert_eq!(
            failed.err().and_then(|e| e.code()),
            Some(OperationCode::StreamFailure)
        );
        feeder.await.expect("feeder");
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_while_a_read_gathers_ends_it_and_the_next_read_reports_it() {
        let (io, feed) = flowing_process().await;
        feed.send(stdout_piece(100)).expect("fed");
        let feeder = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(500)).await;
            feed.send(stdout_piece(200)).expect("fed");
            drop(feed);
        });
        let started = tokio::time::Instant::now();
        let before = io.read(OutputStream::Stdout, 1 << 20).await.expect("read");
        assert_eq!(before.map(|b| b.len()), Some(300));
        assert!(
            started.elapsed() < FLOWING_BATCH_WAIT,
            "the end ended the wait"
        );
        assert_eq!(io.read(OutputStream::Stdout, 1 << 20).await, Ok(None));
        feeder.await.expect("feeder");
    }
}
