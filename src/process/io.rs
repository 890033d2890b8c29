//! The owner's side of a process's streams: bounded staging in both directions, the
//! caller-selected totals, and an owned stop when a limit is crossed. Nothing is truncated:
//! crossing a limit fails the streams.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

use crate::lifecycle::driver::{OutputStream, ProcessChannels, ProcessExit};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::policy::request::StreamLimits;

type Received = Result<Bytes, OwnerError>;

/// The task that writes queued stdin to the guest; joinable by `end()`.
type StdinWriter = Shared<BoxFuture<'static, Result<(), OwnerError>>>;

/// One output stream's staged chunks, and a failure that arrived behind delivered bytes.
struct OutputReader {
    staged: mpsc::UnboundedReceiver<Received>,
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

impl OutputReader {
    fn new(staged: mpsc::UnboundedReceiver<Received>) -> tokio::sync::Mutex<Self> {
        tokio::sync::Mutex::new(Self {
            staged,
            failed: None,
            flowing: false,
        })
    }
}

/// Called once when a limit is crossed or a stream breaks: the owner stops the workload.
pub type OnViolation = Arc<dyn Fn() + Send + Sync>;

pub struct ProcessIo {
    limits: StreamLimits,
    /// Held only to clone or take the sender, never across a wait: a write waiting for staging
    /// space must not keep `end()` or `close()` out.
    stdin: Mutex<Option<mpsc::UnboundedSender<(Bytes, u32)>>>,
    /// Staging space for stdin. Closed when the writer fails (queued chunks are dropped with
    /// their space, so nobody may wait for it) and on `close()`.
    stdin_budget: Arc<Semaphore>,
    /// Why the stdin writer failed, for writes refused after it.
    stdin_failure: Arc<Mutex<Option<OwnerError>>>,
    stdin_total: AtomicU64,
    stdin_writer: Mutex<Option<StdinWriter>>,
    stdout: tokio::sync::Mutex<OutputReader>,
    stderr: tokio::sync::Mutex<OutputReader>,
    output_budget: Arc<Semaphore>,
    /// Wakes the output pump on `close()` (a stored permit if it is not waiting yet).
    closed: Arc<tokio::sync::Notify>,
    exit: Shared<BoxFuture<'static, ProcessExit>>,
    violated: Arc<AtomicBool>,
    on_violation: OnViolation,
}

fn permits(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl ProcessIo {
    /// Wires the raw channels; spawns the output pump and the stdin writer on the runtime.
    pub fn new(
        channels: ProcessChannels,
        limits: StreamLimits,
        on_violation: OnViolation,
    ) -> Arc<Self> {
        let ProcessChannels {
            mut input,
            output,
            exit,
        } = channels;
        let output_staging =
            usize::try_from(limits.max_buffered_output_bytes).unwrap_or(usize::MAX);
        let input_staging = usize::try_from(limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
        let output_budget = Arc::new(Semaphore::new(output_staging.min(Semaphore::MAX_PERMITS)));
        let stdin_budget = Arc::new(Semaphore::new(input_staging.min(Semaphore::MAX_PERMITS)));
        let (stdout_tx, stdout_rx) = mpsc::unbounded_channel();
        let (stderr_tx, stderr_rx) = mpsc::unbounded_channel();
        let (stdin_tx, mut stdin_rx) = mpsc::unbounded_channel::<(Bytes, u32)>();
        let violated = Arc::new(AtomicBool::new(false));

        let pump_budget = Arc::clone(&output_budget);
        let pump_violated = Arc::clone(&violated);
        let pump_violation = Arc::clone(&on_violation);
        let closed = Arc::new(tokio::sync::Notify::new());
        let pump_closed = Arc::clone(&closed);
        let max_output = limits.max_output_bytes;
        let piece = output_staging.clamp(1, 64 * 1024);
        tokio::spawn(async move {
            let mut output = output;
            let mut total: u64 = 0;
            // `close()` ends the pump even while the engine sends nothing, so a detached
            // attachment lets go of its connection at once. One wait for the whole pump (a
            // permit stored before it is first polled still counts).
            let closed = pump_closed.notified();
            tokio::pin!(closed);
            loop {
                let item = tokio::select! {
                    biased;
                    item = output.next() => item,
                    () = &mut closed => None,
                };
                let Some(item) = item else { break };
                let (which, bytes) = match item {
                    Ok(chunk) => chunk,
                    Err(error) => {
                        let _ = stdout_tx.send(Err(error.clone()));
                        let _ = stderr_tx.send(Err(error));
                        break;
                    }
                };
                total = total.saturating_add(bytes.len() as u64);
                if max_output.is_some_and(|max| total > max) {
                    let error = OwnerError::operation(
                        OperationCode::OutputLimit,
                        format!(
                            "the process wrote more than policy.streams.maxOutputBytes ({}) to stdout and stderr together; the sandbox is being stopped",
                            max_output.unwrap_or(0)
                        ),
                    );
                    let _ = stdout_tx.send(Err(error.clone()));
                    let _ = stderr_tx.send(Err(error));
                    if !pump_violated.swap(true, Ordering::SeqCst) {
                        pump_violation();
                    }
                    break;
                }
                let sender = match which {
                    OutputStream::Stdout => &stdout_tx,
                    OutputStream::Stderr => &stderr_tx,
                };
                let mut rest = bytes;
                while !rest.is_empty() {
                    let part = rest.split_to(rest.len().min(piece));
                    // Staging is full: stop reading from the engine until a reader takes bytes.
                    match pump_budget.acquire_many(permits(part.len())).await {
                        Ok(permit) => permit.forget(),
                        Err(_) => return,
                    }
                    if sender.send(Ok(part)).is_err() {
                        // Nobody reads this stream any more: give its budget back and go on.
                        continue;
                    }
                }
            }
        });

        let writer_budget = Arc::clone(&stdin_budget);
        let stdin_failure = Arc::new(Mutex::new(None));
        let writer_failure = Arc::clone(&stdin_failure);
        let writer = async move {
            let written = async {
                while let Some((chunk, taken)) = stdin_rx.recv().await {
                    let written = input.write_all(&chunk).await;
                    writer_budget.add_permits(taken as usize);
                    written.map_err(|e| {
                        OwnerError::operation(
                            OperationCode::StreamFailure,
                            format!("writing the process stdin failed: {e}"),
                        )
                    })?;
                }
                input.flush().await.ok();
                input.shutdown().await.map_err(|e| {
                    OwnerError::operation(
                        OperationCode::StreamFailure,
                        format!("closing the process stdin failed: {e}"),
                    )
                })
            }
            .await;
            if let Err(error) = &written {
                // The chunks still queued are dropped with their staging space: close the
                // budget so no write waits for space that will never come back.
                *writer_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(error.clone());
                writer_budget.close();
            }
            written
        }
        .boxed();
        let writer = tokio::spawn(writer);
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
            stdin: Mutex::new(Some(stdin_tx)),
            stdin_budget,
            stdin_failure,
            stdin_total: AtomicU64::new(0),
            stdin_writer: Mutex::new(Some(writer)),
            stdout: OutputReader::new(stdout_rx),
            stderr: OutputReader::new(stderr_rx),
            output_budget,
            closed,
            exit: exit.shared(),
            violated,
            on_violation,
        })
    }

    /// Whether a stream limit was crossed (the owned stop then comes from the streams).
    pub fn violated(&self) -> bool {
        self.violated.load(Ordering::SeqCst)
    }

    fn violation(&self) {
        if !self.violated.swap(true, Ordering::SeqCst) {
            (self.on_violation)();
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
                self.violation();
                return Err(OwnerError::operation(
                    OperationCode::InputLimit,
                    format!("stdin would exceed policy.streams.maxStdinBytes ({max}); the sandbox is being stopped"),
                ));
            }
        }
        Ok(())
    }

    /// Queues `chunk` for the guest; waits while the staging is full (backpressure).
    pub async fn write(&self, chunk: Bytes) -> Result<(), OwnerError> {
        self.count_stdin(chunk.len())?;
        let sender = self.stdin_sender()?;
        // A chunk larger than the whole staging waits for all of it, never for more.
        let staging = usize::try_from(self.limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
        let taken = permits(chunk.len().min(staging).min(Semaphore::MAX_PERMITS));
        match self.stdin_budget.acquire_many(taken).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(self.stdin_closed()),
        }
        sender.send((chunk, taken)).map_err(|_| {
            OwnerError::operation(OperationCode::StreamFailure, "the process stdin is closed")
        })
    }

    /// Queues `chunk` at once if the staging has room for it now: `Ok(true)` when queued,
    /// `Ok(false)` when the caller must wait through `write` (nothing was counted or taken).
    /// Never waits, so the JavaScript thread may call it.
    pub fn try_write(&self, chunk: Bytes) -> Result<bool, OwnerError> {
        let sender = self.stdin_sender()?;
        let staging = usize::try_from(self.limits.max_buffered_input_bytes).unwrap_or(usize::MAX);
        let taken = permits(chunk.len().min(staging).min(Semaphore::MAX_PERMITS));
        match self.stdin_budget.try_acquire_many(taken) {
            Ok(permit) => permit.forget(),
            Err(tokio::sync::TryAcquireError::NoPermits) => return Ok(false),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(self.stdin_closed()),
        }
        if let Err(error) = self.count_stdin(chunk.len()) {
            self.stdin_budget.add_permits(taken as usize);
            return Err(error);
        }
        sender.send((chunk, taken)).map_err(|_| {
            OwnerError::operation(OperationCode::StreamFailure, "the process stdin is closed")
        })?;
        Ok(true)
    }

    /// Why stdin takes no more: the writer's failure, else closed.
    fn stdin_closed(&self) -> OwnerError {
        self.stdin_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| OwnerError::state("stdin is closed"))
    }

    fn stdin_sender(&self) -> Result<mpsc::UnboundedSender<(Bytes, u32)>, OwnerError> {
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| OwnerError::state("stdin is already ended"))
    }

    fn drop_stdin_sender(&self) {
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Ends stdin: resolves once everything queued was written and EOF was delivered (a write
    /// still waiting for staging space is written first).
    pub async fn end(&self) -> Result<(), OwnerError> {
        self.drop_stdin_sender();
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
        let mut reader = match stream {
            OutputStream::Stdout => self.stdout.lock().await,
            OutputStream::Stderr => self.stderr.lock().await,
        };
        if let Some(error) = reader.failed.take() {
            return Err(error);
        }
        let first = match reader.staged.recv().await {
            Some(Ok(bytes)) => bytes,
            Some(Err(error)) => return Err(error),
            None => return Ok(None),
        };
        // Staged pieces are gathered first, so the buffer handed out is exactly as large as
        // the bytes it holds (a small read never pins a `max`-sized allocation).
        let mut total = first.len();
        let mut pieces = vec![first];
        while total < max {
            match reader.staged.try_recv() {
                Ok(Ok(bytes)) => {
                    total += bytes.len();
                    pieces.push(bytes);
                }
                Ok(Err(error)) => {
                    // Deliver what arrived before the failure; the failure comes next.
                    reader.failed = Some(error);
                    break;
                }
                Err(_) => break,
            }
        }
        // In full flow, wait (briefly) for a larger batch: the staging always has room for it,
        // since its pieces are only released once this read returns.
        let staging = usize::try_from(self.limits.max_buffered_output_bytes).unwrap_or(usize::MAX);
        let batch = FLOWING_BATCH_BYTES.min(max).min(staging / 2);
        if reader.flowing && reader.failed.is_none() && total < batch {
            let deadline = tokio::time::Instant::now() + FLOWING_BATCH_WAIT;
            while total < batch {
                match tokio::time::timeout_at(deadline, reader.staged.recv()).await {
                    Ok(Some(Ok(bytes))) => {
                        total += bytes.len();
                        pieces.push(bytes);
                    }
                    Ok(Some(Err(error))) => {
                        reader.failed = Some(error);
                        break;
                    }
                    // The end (the next read reports it) or the wait is over.
                    Ok(None) | Err(_) => break,
                }
            }
        }
        reader.flowing = total >= FLOWING_BYTES;
        let mut out = Vec::with_capacity(total);
        for piece in &pieces {
            out.extend_from_slice(piece);
        }
        self.output_budget.add_permits(out.len());
        Ok(Some(out))
    }

    pub async fn exit(&self) -> ProcessExit {
        self.exit.clone().await
    }

    /// Closes both directions (stop): pending writes and reads settle.
    pub async fn close(&self) {
        self.drop_stdin_sender();
        self.stdin_budget.close();
        self.output_budget.close();
        self.closed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, DuplexStream};

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
        (ProcessIo::new(channels, limits, Arc::new(|| {})), guest)
    }

    async fn settles<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(5), future)
            .await
            .unwrap_or_else(|_| panic!("{what} did not settle"))
    }

    #[tokio::test]
    async fn close_ends_the_output_even_while_the_engine_sends_nothing() {
        let (output_tx, output_rx) =
            mpsc::unbounded_channel::<Result<(OutputStream, Bytes), OwnerError>>();
        let (input, _guest) = tokio::io::duplex(16);
        let channels = ProcessChannels {
            input: Box::pin(input),
            output: tokio_stream_of(output_rx),
            exit: futures::future::pending().boxed(),
        };
        let io = ProcessIo::new(channels, StreamLimits::DEFAULT, Arc::new(|| {}));
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
    async fn try_write_queues_only_what_the_staging_holds_now_and_counts_it_once() {
        let (io, mut guest) = process(8);
        assert_eq!(io.try_write(Bytes::from_static(b"abcd")), Ok(true));
        assert_eq!(io.try_write(Bytes::from_static(b"efgh")), Ok(true));
        // The 16-byte pipe took the first eight bytes off the staging, maybe not yet: either
        // way a chunk that does not fit now is refused without being counted or queued.
        let refused = io.try_write(Bytes::from(vec![b'x'; 9]));
        assert_eq!(
            refused,
            Ok(false),
            "a chunk larger than the staging never fits at once"
        );
        settles("the waiting write", io.write(Bytes::from_static(b"ij")))
            .await
            .expect("queued");
        settles("end", io.end()).await.expect("ended");
        let mut seen = Vec::new();
        settles("the guest reads", guest.read_to_end(&mut seen))
            .await
            .expect("read");
        assert_eq!(seen, b"abcdefghij");
        assert_eq!(
            io.try_write(Bytes::from_static(b"late")),
            Err(OwnerError::state("stdin is already ended"))
        );
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
        let io = ProcessIo::new(channels, limits, Arc::new(|| {}));
        assert_eq!(io.try_write(Bytes::from_static(b"1234")), Ok(true));
        let crossing = io.try_write(Bytes::from_static(b"567"));
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

    fn tokio_stream_of(
        mut rx: mpsc::UnboundedReceiver<Result<(OutputStream, Bytes), OwnerError>>,
    ) -> futures::stream::BoxStream<'static, Result<(OutputStream, Bytes), OwnerError>> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
    }

    #[tokio::test]
    async fn a_write_waiting_for_staging_space_does_not_keep_close_out() {
        let (io, _guest) = process(64);
        settles("the first write", io.write(Bytes::from(vec![1; 64])))
            .await
            .ok();
        let pending = tokio::spawn({
            let io = Arc::clone(&io);
            async move { io.write(Bytes::from(vec![2; 32])).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        settles("close", io.close()).await;
        let refused = settles("the pending write", pending).await;
        assert!(matches!(refused, Ok(Err(_))));
    }

    #[tokio::test]
    async fn chunks_dropped_by_a_failed_writer_do_not_strand_later_writes() {
        let (io, guest) = process(64);
        settles("a write", io.write(Bytes::from(vec![1; 40])))
            .await
            .ok();
        settles("a queued write", io.write(Bytes::from(vec![2; 20])))
            .await
            .ok();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The guest goes away: the writer fails with 20 queued bytes that never return space.
        drop(guest);
        let later = settles("a later write", io.write(Bytes::from(vec![3; 60]))).await;
        let error = later.expect_err("a write after the writer failed is refused");
        assert!(error.to_string().contains("stdin"), "{error}");
        assert!(settles("end", io.end()).await.is_err());
    }

    /// A process whose stdout is fed by the test, one piece at a time.
    fn output_process() -> (Arc<ProcessIo>, mpsc::UnboundedSender<Bytes>) {
        let (feed, pieces) = mpsc::unbounded_channel::<Bytes>();
        let output = futures::stream::unfold(pieces, |mut pieces| async move {
            pieces
                .recv()
                .await
                .map(|bytes| (Ok((OutputStream::Stdout, bytes)), pieces))
        })
        .boxed();
        let channels = ProcessChannels {
            input: Box::pin(tokio::io::sink()),
            output,
            exit: futures::future::pending().boxed(),
        };
        (
            ProcessIo::new(channels, StreamLimits::DEFAULT, Arc::new(|| {})),
            feed,
        )
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
}
