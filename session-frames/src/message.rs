//! What frames mean. Each message has one encoding, so `encode(decode(frame))` is the frame.

use crate::file::{
    put_answer, put_entries, put_request, read_answer, read_entries, read_request, FileAnswer,
    FileKind, FileRequest,
};
use crate::frame::{header, Frame, FrameError, Kind, HEADER_LEN, MAX_PAYLOAD};
use crate::wire::{put_bytes, put_u32, Cursor};

/// The stdin bytes of one command a host may have sent and not seen taken (`StdinTaken`).
pub const STDIN_WINDOW: u32 = 256 * 1024;
/// How long after a command's leader exited its output may stay open (a background child
/// holding it): then the supervisor closes its end and sends `OutputEnd`.
pub const OUTPUT_AFTER_EXIT_MS: u64 = 500;
/// How a `SpawnFailed` message begins when the working directory failed, not the program.
pub const SPAWN_FAILED_CWD: &str = "cwd: ";

/// An output stream of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout = 1,
    Stderr = 2,
}

impl Stream {
    fn read(cursor: &mut Cursor<'_>) -> Result<Stream, FrameError> {
        match cursor.u8("stream")? {
            1 => Ok(Stream::Stdout),
            2 => Ok(Stream::Stderr),
            _ => Err(cursor.bad("stream")),
        }
    }
}

/// The signals a host may send a command (the contract's `kill` names), by their Linux numbers
/// (the same on x86-64 and aarch64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Hup = 1,
    Int = 2,
    Quit = 3,
    Kill = 9,
    Usr1 = 10,
    Usr2 = 12,
    Term = 15,
}

impl Signal {
    pub fn from_number(n: u8) -> Option<Signal> {
        Some(match n {
            1 => Signal::Hup,
            2 => Signal::Int,
            3 => Signal::Quit,
            9 => Signal::Kill,
            10 => Signal::Usr1,
            12 => Signal::Usr2,
            15 => Signal::Term,
            _ => return None,
        })
    }

    pub fn from_name(name: &str) -> Option<Signal> {
        Some(match name {
            "SIGHUP" => Signal::Hup,
            "SIGINT" => Signal::Int,
            "SIGQUIT" => Signal::Quit,
            "SIGKILL" => Signal::Kill,
            "SIGUSR1" => Signal::Usr1,
            "SIGUSR2" => Signal::Usr2,
            "SIGTERM" => Signal::Term,
            _ => return None,
        })
    }
}

/// A command to start: its argv (the executable first), its whole environment, its working
/// directory, and whether it reads stdin from the host (else `/dev/null`). Every string is a C
/// string (no NUL byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn {
    pub argv: Vec<Vec<u8>>,
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub cwd: Vec<u8>,
    pub stdin: bool,
}

/// How a command's leader ended, from its own wait status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Exited(i32),
    Signaled(i32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Host: start this command on the frame's channel (a channel not in use).
    Spawn(Spawn),
    /// Host: bytes for the command's stdin.
    Stdin(Vec<u8>),
    /// Host: EOF for the command's stdin.
    StdinEnd,
    /// Host: signal the command's process group.
    Signal(Signal),
    /// Host: the supervisor may send this many more bytes of `stream` (flow control: output is
    /// read from a command's pipe only while its stream has credit).
    Credit { stream: Stream, bytes: u32 },
    /// Host: a file request on the frame's channel (a channel not in use); answered with
    /// `FileBytes` or `FileEntries` frames, then `FileDone` or `FileFailed`.
    File(FileRequest),
    /// Host: bytes of a file being written.
    FileChunk(Vec<u8>),
    /// Host: the file being written is whole: put it in place.
    FileCommit,
    /// Host: the file call is given up: a write's file is never put in place, a read's file is
    /// closed. Nothing answers it; frames already on their way for the channel are dropped.
    FileAbort,
    /// Supervisor: the command started, as this process (and process group).
    Spawned { pid: u32 },
    /// Supervisor: the command could not start (`errno`, and what was tried).
    SpawnFailed { errno: i32, message: Vec<u8> },
    /// Supervisor: bytes the command wrote.
    Output { stream: Stream, bytes: Vec<u8> },
    /// Supervisor: the stream reached its end (every writer closed it), or was given up (see
    /// the supervisor's bound after the exit).
    OutputEnd { stream: Stream },
    /// Supervisor: the leader's wait status. Comes after the command's `Spawned`; its output
    /// may still go on (a background child holding it).
    Exit(Exit),
    /// Supervisor: this many bytes of the command's stdin left its queue (written to the
    /// command, or dropped once the command closed its stdin): the host may send as many more.
    /// A host never has more than `STDIN_WINDOW` bytes of a command's stdin unacknowledged.
    StdinTaken { bytes: u32 },
    /// Supervisor: bytes of a file being read (on the host's `Credit` for `Stdout`).
    FileBytes(Vec<u8>),
    /// Supervisor: entries of a directory being listed.
    FileEntries(Vec<(FileKind, Vec<u8>)>),
    /// Supervisor: a file request is done.
    FileDone(FileAnswer),
    /// Supervisor: a file request failed: `refused` when the path leaves its root (a link, or
    /// a component that is not a directory), else the system's `errno`; what, in `message`.
    FileFailed {
        errno: i32,
        refused: bool,
        message: Vec<u8>,
    },
    /// Supervisor: a frame it could not act on (a channel in use, unknown, or a malformed
    /// spawn), and why.
    Refused { message: Vec<u8> },
}

impl Message {
    pub fn kind(&self) -> Kind {
        match self {
            Message::Spawn(_) => Kind::Spawn,
            Message::Stdin(_) => Kind::Stdin,
            Message::StdinEnd => Kind::StdinEnd,
            Message::Signal(_) => Kind::Signal,
            Message::Credit { .. } => Kind::Credit,
            Message::Spawned { .. } => Kind::Spawned,
            Message::SpawnFailed { .. } => Kind::SpawnFailed,
            Message::Output { .. } => Kind::Output,
            Message::OutputEnd { .. } => Kind::OutputEnd,
            Message::Exit(_) => Kind::Exit,
            Message::Refused { .. } => Kind::Refused,
            Message::StdinTaken { .. } => Kind::StdinTaken,
            Message::File(_) => Kind::File,
            Message::FileChunk(_) => Kind::FileChunk,
            Message::FileCommit => Kind::FileCommit,
            Message::FileAbort => Kind::FileAbort,
            Message::FileBytes(_) => Kind::FileBytes,
            Message::FileEntries(_) => Kind::FileEntries,
            Message::FileDone(_) => Kind::FileDone,
            Message::FileFailed { .. } => Kind::FileFailed,
        }
    }

    /// What `frame` says.
    pub fn decode(frame: &Frame) -> Result<Message, FrameError> {
        Message::decode_payload(frame.kind, &frame.payload)
    }

    /// The message a frame of `kind` carries in `payload`.
    pub fn decode_payload(kind: Kind, payload: &[u8]) -> Result<Message, FrameError> {
        let mut c = Cursor::new(kind, payload);
        let message = match kind {
            Kind::Spawn => {
                let stdin = match c.u8("stdin flag")? {
                    0 => false,
                    1 => true,
                    _ => return Err(c.bad("stdin flag")),
                };
                let argc = c.count(4, "argv")?;
                if argc == 0 {
                    return Err(c.bad("argv"));
                }
                let mut argv = Vec::with_capacity(argc);
                for _ in 0..argc {
                    argv.push(c.c_bytes("argv")?);
                }
                if argv[0].is_empty() {
                    return Err(c.bad("argv"));
                }
                let envc = c.count(8, "env")?;
                let mut env = Vec::with_capacity(envc);
                for _ in 0..envc {
                    let key = c.c_bytes("env")?;
                    if key.is_empty() || key.contains(&b'=') {
                        return Err(c.bad("env"));
                    }
                    env.push((key, c.c_bytes("env")?));
                }
                let cwd = c.c_bytes("cwd")?;
                if cwd.first() != Some(&b'/') {
                    return Err(c.bad("cwd"));
                }
                Message::Spawn(Spawn {
                    argv,
                    env,
                    cwd,
                    stdin,
                })
            }
            Kind::Stdin => Message::Stdin(c.rest().to_vec()),
            Kind::StdinEnd => Message::StdinEnd,
            Kind::Signal => {
                let n = c.u8("signal")?;
                Message::Signal(Signal::from_number(n).ok_or_else(|| c.bad("signal"))?)
            }
            Kind::Credit => Message::Credit {
                stream: Stream::read(&mut c)?,
                bytes: c.u32("credit")?,
            },
            Kind::Spawned => Message::Spawned { pid: c.u32("pid")? },
            Kind::SpawnFailed => Message::SpawnFailed {
                errno: c.i32("errno")?,
                message: c.rest().to_vec(),
            },
            Kind::Output => Message::Output {
                stream: Stream::read(&mut c)?,
                bytes: c.rest().to_vec(),
            },
            Kind::OutputEnd => Message::OutputEnd {
                stream: Stream::read(&mut c)?,
            },
            Kind::Exit => {
                let tag = c.u8("exit")?;
                let value = c.i32("exit")?;
                match tag {
                    0 => Message::Exit(Exit::Exited(value)),
                    1 => Message::Exit(Exit::Signaled(value)),
                    _ => return Err(c.bad("exit")),
                }
            }
            Kind::Refused => Message::Refused {
                message: c.rest().to_vec(),
            },
            Kind::StdinTaken => Message::StdinTaken {
                bytes: c.u32("taken")?,
            },
            Kind::File => Message::File(read_request(&mut c)?),
            Kind::FileChunk => Message::FileChunk(c.rest().to_vec()),
            Kind::FileCommit => Message::FileCommit,
            Kind::FileAbort => Message::FileAbort,
            Kind::FileBytes => Message::FileBytes(c.rest().to_vec()),
            Kind::FileEntries => Message::FileEntries(read_entries(&mut c)?),
            Kind::FileDone => Message::FileDone(read_answer(&mut c)?),
            Kind::FileFailed => {
                let errno = c.i32("errno")?;
                let refused = match c.u8("refused")? {
                    0 => false,
                    1 => true,
                    _ => return Err(c.bad("refused")),
                };
                Message::FileFailed {
                    errno,
                    refused,
                    message: c.rest().to_vec(),
                }
            }
        };
        c.finish("length")?;
        Ok(message)
    }
}

/// The bytes of an `Output` frame before the command's bytes.
pub const OUTPUT_PREFIX_LEN: usize = HEADER_LEN + 1;

/// What an `Output` frame of `len` command bytes on `channel` holds before them: for a sender
/// that reads output straight into its outgoing buffer (the bytes `encode` makes). `len` is at
/// most `MAX_PAYLOAD - 1`.
pub fn output_prefix(channel: u32, stream: Stream, len: usize) -> [u8; OUTPUT_PREFIX_LEN] {
    debug_assert!(len < MAX_PAYLOAD);
    let mut prefix = [0u8; OUTPUT_PREFIX_LEN];
    prefix[..HEADER_LEN].copy_from_slice(&header(Kind::Output, channel, len + 1));
    prefix[HEADER_LEN] = stream as u8;
    prefix
}

/// `message` on `channel` as a frame's bytes, appended to `out`. A payload past `MAX_PAYLOAD`
/// (stdin or output bytes, a spawn's strings) is the caller's to split or refuse.
pub fn encode(channel: u32, message: &Message, out: &mut Vec<u8>) {
    let mut payload = Vec::new();
    match message {
        Message::Spawn(spawn) => {
            payload.push(u8::from(spawn.stdin));
            put_u32(&mut payload, spawn.argv.len() as u32);
            for arg in &spawn.argv {
                put_bytes(&mut payload, arg);
            }
            put_u32(&mut payload, spawn.env.len() as u32);
            for (key, value) in &spawn.env {
                put_bytes(&mut payload, key);
                put_bytes(&mut payload, value);
            }
            put_bytes(&mut payload, &spawn.cwd);
        }
        Message::Stdin(bytes) => payload.extend_from_slice(bytes),
        Message::StdinEnd => {}
        Message::Signal(signal) => payload.push(*signal as u8),
        Message::Credit { stream, bytes } => {
            payload.push(*stream as u8);
            put_u32(&mut payload, *bytes);
        }
        Message::Spawned { pid } => put_u32(&mut payload, *pid),
        Message::SpawnFailed { errno, message } => {
            payload.extend_from_slice(&errno.to_be_bytes());
            payload.extend_from_slice(message);
        }
        Message::Output { stream, bytes } => {
            payload.push(*stream as u8);
            payload.extend_from_slice(bytes);
        }
        Message::OutputEnd { stream } => payload.push(*stream as u8),
        Message::Exit(exit) => {
            let (tag, value) = match exit {
                Exit::Exited(code) => (0u8, *code),
                Exit::Signaled(signal) => (1u8, *signal),
            };
            payload.push(tag);
            payload.extend_from_slice(&value.to_be_bytes());
        }
        Message::Refused { message } => payload.extend_from_slice(message),
        Message::StdinTaken { bytes } => put_u32(&mut payload, *bytes),
        Message::File(request) => put_request(&mut payload, request),
        Message::FileChunk(bytes) => payload.extend_from_slice(bytes),
        Message::FileCommit | Message::FileAbort => {}
        Message::FileBytes(bytes) => payload.extend_from_slice(bytes),
        Message::FileEntries(entries) => put_entries(&mut payload, entries),
        Message::FileDone(answer) => put_answer(&mut payload, answer),
        Message::FileFailed {
            errno,
            refused,
            message,
        } => {
            payload.extend_from_slice(&errno.to_be_bytes());
            payload.push(u8::from(*refused));
            payload.extend_from_slice(message);
        }
    }
    Frame {
        kind: message.kind(),
        channel,
        payload,
    }
    .write(out);
}
