//! One command over the link: what the supervisor sent for it (queued for its output stream,
//! bounded by the credit given), its stdin window, its exit, and the handles the owner runs.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::future::FutureExt;
use futures::Stream as FuturesStream;
use session_frames::{
    Exit, Message, Signal, Spawn, Stream, MAX_PAYLOAD, SPAWN_FAILED_CWD, STDIN_WINDOW,
};
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;

use super::credit::Owed;
use super::link::{lock, Handled, Party, Shared};
use crate::input::{Issue, IssueCode, Seg};
use crate::lifecycle::driver::{OutputEvent, OutputStream, ProcessChannels, ProcessExit};
use crate::lifecycle::error::OwnerError;
use crate::process::signal_name::signal_name;

pub(super) struct Slot {
    state: Mutex<State>,
}

struct State {
    started: Option<oneshot::Sender<Result<u32, OwnerError>>>,
    events: VecDeque<Result<OutputEvent, OwnerError>>,
    /// stdout, stderr ended (or failed).
    ended: [bool; 2],
    /// Output bytes of each stream the supervisor may still send (the credit it was given and
    /// has not used): more is a broken supervisor, never buffered.
    credit: [u64; 2],
    reader: Option<Waker>,
    exit: Option<oneshot::Sender<ProcessExit>>,
    /// stdin bytes the supervisor will still take.
    window: u32,
    writer: Option<Waker>,
    failure: Option<OwnerError>,
    /// Set once the command is over for the host (its exit and both ends came): the link
    /// forgets it, so no `StdinTaken` comes any more, and its stdin takes nothing more.
    over: bool,
}

fn output_stream(stream: Stream) -> OutputStream {
    match stream {
        Stream::Stdout => OutputStream::Stdout,
        Stream::Stderr => OutputStream::Stderr,
    }
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

fn fate(exit: Exit) -> ProcessExit {
    match exit {
        Exit::Exited(code) => ProcessExit::Exited(i64::from(code)),
        Exit::Signaled(signal) => ProcessExit::Signaled(signal_name(i64::from(signal))),
    }
}

/// Why a command could not start: its working directory or its program, named as the field of
/// its spec, when the guest said which; any other failure is the supervisor's.
fn spawn_failure(errno: i32, message: &str) -> OwnerError {
    const ENOENT: i32 = 2;
    const ENOEXEC: i32 = 8;
    const EAGAIN: i32 = 11;
    const EACCES: i32 = 13;
    const ENOTDIR: i32 = 20;
    const EISDIR: i32 = 21;
    const ELOOP: i32 = 40;
    let field = |field: &str, text: String| {
        OwnerError::Validation(vec![Issue {
            code: IssueCode::InvalidValue,
            path: vec![Seg::from(field)],
            message: text,
        }])
    };
    if let Some(cwd) = message.strip_prefix(SPAWN_FAILED_CWD) {
        return field("cwd", format!("the working directory {cwd}"));
    }
    match errno {
        ENOENT | ENOEXEC | EACCES | ENOTDIR | EISDIR | ELOOP => field(
            "executable",
            format!("the program could not be run in the sandbox: {message}"),
        ),
        // fork's EAGAIN: most likely the sandbox's tasks are at its limit (the commands running,
        // what they started, the supervisor and the sandbox's init all count).
        EAGAIN => OwnerError::driver(format!(
            "the command could not start: no task could be made ({message}), most likely because the sandbox runs as many as its policy's resources.pids allows; wait for some to end, or ask for more"
        )),
        _ => OwnerError::driver(format!(
            "the command could not start: {message} (errno {errno})"
        )),
    }
}

/// A command's slot and the channels over it.
pub(super) fn open(
    shared: Arc<Shared>,
    channel: u32,
    started: oneshot::Sender<Result<u32, OwnerError>>,
) -> (Arc<Slot>, ProcessChannels) {
    let (exit, exit_rx) = oneshot::channel();
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            started: Some(started),
            events: VecDeque::new(),
            ended: [false, false],
            credit: [u64::from(super::CREDIT); 2],
            reader: None,
            exit: Some(exit),
            window: STDIN_WINDOW,
            writer: None,
            failure: None,
            over: false,
        }),
    });
    let channels = ProcessChannels {
        input: Box::pin(Input {
            shared: Arc::clone(&shared),
            slot: Arc::clone(&slot),
            channel,
            ended: false,
        }),
        output: Box::pin(Output {
            shared,
            slot: Arc::clone(&slot),
            channel,
            owed: Default::default(),
        }),
        // A receipt never sent (the connection ended first) is no fate anyone knows.
        exit: exit_rx
            .map(|fate| fate.unwrap_or(ProcessExit::Unavailable))
            .boxed(),
    };
    (slot, channels)
}

impl Handled for Slot {
    type Handles = ProcessChannels;
}

impl Party for Slot {
    /// Takes one of the supervisor's messages for this command: `Ok(true)` once the command has
    /// nothing more to receive (the link forgets it), `Err` when the supervisor sent more output
    /// than its credit (the link is then broken for every command).
    fn receive(&self, message: Message) -> Result<bool, OwnerError> {
        let mut state = lock(&self.state);
        let mut wake_reader = false;
        let mut wake_writer = false;
        match message {
            Message::Spawned { pid } => {
                if let Some(started) = state.started.take() {
                    let _ = started.send(Ok(pid));
                }
            }
            Message::SpawnFailed { errno, message } => {
                let why = spawn_failure(errno, &String::from_utf8_lossy(&message));
                drop(state);
                self.fail(why);
                return Ok(true);
            }
            Message::Refused { message } => {
                let why = OwnerError::driver(format!(
                    "the process supervisor refused the command: {}",
                    String::from_utf8_lossy(&message)
                ));
                drop(state);
                self.fail(why);
                return Ok(true);
            }
            Message::Output { stream, bytes } => {
                let stream = output_stream(stream);
                let credit = &mut state.credit[index(stream)];
                let Some(left) = credit.checked_sub(bytes.len() as u64) else {
                    return Err(OwnerError::operation(
                        crate::lifecycle::error::OperationCode::StreamFailure,
                        "the sandbox's process supervisor sent more output than it was given credit for",
                    ));
                };
                *credit = left;
                if !state.ended[index(stream)] {
                    state
                        .events
                        .push_back(Ok(OutputEvent::Bytes(stream, bytes.into())));
                    wake_reader = true;
                }
            }
            Message::OutputEnd { stream } => {
                let stream = output_stream(stream);
                if !std::mem::replace(&mut state.ended[index(stream)], true) {
                    state.events.push_back(Ok(OutputEvent::End(stream)));
                    wake_reader = true;
                }
            }
            Message::Exit(exit) => {
                if let Some(report) = state.exit.take() {
                    let _ = report.send(fate(exit));
                }
            }
            Message::StdinTaken { bytes } => {
                state.window = state.window.saturating_add(bytes).min(STDIN_WINDOW);
                wake_writer = true;
            }
            // Frames only the host sends: nothing the supervisor says.
            _ => {}
        }
        let finished = state.exit.is_none() && state.ended == [true, true];
        // A writer waiting for window the forgotten command will never give is told at once.
        state.over = finished;
        let reader = wake_reader.then(|| state.reader.take()).flatten();
        let writer = (wake_writer || finished)
            .then(|| state.writer.take())
            .flatten();
        drop(state);
        reader.into_iter().chain(writer).for_each(Waker::wake);
        Ok(finished)
    }

    /// The command is over for the host: whatever waits fails with `why`; an exit not reported
    /// is `Unavailable`.
    fn fail(&self, why: OwnerError) {
        let mut state = lock(&self.state);
        if let Some(started) = state.started.take() {
            let _ = started.send(Err(why.clone()));
        }
        if state.ended != [true, true] {
            state.ended = [true, true];
            state.events.push_back(Err(why.clone()));
        }
        if let Some(report) = state.exit.take() {
            let _ = report.send(ProcessExit::Unavailable);
        }
        state.failure.get_or_insert(why);
        let wakers: Vec<Waker> = [state.reader.take(), state.writer.take()]
            .into_iter()
            .flatten()
            .collect();
        drop(state);
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// A command's output: the supervisor's bytes and ends in order; every piece read gives its
/// credit back, so the supervisor sends as fast as the owner reads.
struct Output {
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    channel: u32,
    /// stdout's and stderr's credit taken and not given back yet.
    owed: [Owed; 2],
}

impl FuturesStream for Output {
    type Item = Result<OutputEvent, OwnerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut state = lock(&this.slot.state);
        let Some(event) = state.events.pop_front() else {
            if state.ended == [true, true] {
                return Poll::Ready(None);
            }
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let credit = match &event {
            Ok(OutputEvent::Bytes(stream, bytes)) if !state.ended[index(*stream)] => {
                let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                let back = this.owed[index(*stream)].took(len);
                if let Some(back) = back {
                    state.credit[index(*stream)] += u64::from(back);
                }
                back.map(|back| (*stream, back))
            }
            _ => None,
        };
        drop(state);
        if let Some((stream, bytes)) = credit {
            let stream = match stream {
                OutputStream::Stdout => Stream::Stdout,
                OutputStream::Stderr => Stream::Stderr,
            };
            this.shared
                .send(this.channel, &Message::Credit { stream, bytes });
        }
        Poll::Ready(Some(event))
    }
}

/// A command's stdin: writes go out as frames within the supervisor's window.
struct Input {
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    channel: u32,
    ended: bool,
}

impl AsyncWrite for Input {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.ended {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        }
        let mut state = lock(&self.slot.state);
        if let Some(failure) = &state.failure {
            return Poll::Ready(Err(std::io::Error::other(failure.clone())));
        }
        if state.over {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        }
        if state.window == 0 {
            state.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(state.window as usize).min(MAX_PAYLOAD);
        state.window -= n as u32;
        drop(state);
        let this = &mut *self;
        this.shared
            .send(this.channel, &Message::Stdin(buf[..n].to_vec()));
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// EOF: sent after every byte written before it.
    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if !std::mem::replace(&mut self.ended, true) {
            self.shared.send(self.channel, &Message::StdinEnd);
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Input {
    /// Dropped without its end, stdin still gets EOF.
    fn drop(&mut self) {
        if !self.ended {
            self.shared.send(self.channel, &Message::StdinEnd);
        }
    }
}

/// Signals a command's process group.
#[derive(Clone)]
pub struct CommandControl {
    shared: Arc<Shared>,
    channel: u32,
    /// Set once the host sent SIGKILL: the command's SIGKILL is then the host's, not the
    /// kernel's for memory.
    killed: Arc<std::sync::atomic::AtomicBool>,
}

impl CommandControl {
    pub(super) fn new(shared: Arc<Shared>, channel: u32) -> Self {
        Self {
            shared,
            channel,
            killed: Arc::default(),
        }
    }

    /// Whether the host sent this command SIGKILL.
    pub fn killed_by_host(&self) -> bool {
        self.killed.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn signal(&self, signal: Signal) {
        if signal == Signal::Kill {
            self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.shared.send(self.channel, &Message::Signal(signal));
    }
}

/// The frame that starts `executable` with `args`, with exactly the environment `env`, in `cwd`,
/// with a stdin pipe or `/dev/null`.
pub fn spawn_of(
    executable: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &str,
    stdin: bool,
) -> Spawn {
    let bytes = |text: &str| text.as_bytes().to_vec();
    Spawn {
        argv: std::iter::once(executable)
            .chain(args.iter().map(String::as_str))
            .map(bytes)
            .collect(),
        env: env.iter().map(|(k, v)| (bytes(k), bytes(v))).collect(),
        cwd: bytes(cwd),
        stdin,
    }
}
