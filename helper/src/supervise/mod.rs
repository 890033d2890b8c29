//! `--supervise`: the helper as a sandbox's process supervisor. Its stdin and stdout are the one
//! framed connection to the host (`session-frames`); every command it starts gets a process
//! group and stdio pipes of its own, so no command can reach the connection. One thread polls
//! the connection, every command's pipes and the child-exit pipe:
//! - a command's output is read only while the host gave it credit, and only while the frames
//!   queued for the host stay under `QUEUED_MAX`, so the supervisor's memory is bounded by the
//!   host's reading, never by a command's writing;
//! - a command's exit comes from its leader's own wait status (`Exit`), never from the end of its
//!   output; an output still open `OUTPUT_AFTER_EXIT_MS` after the exit (a background child
//!   holding it) is closed and ended (`OutputEnd`) once its pipe holds nothing (what is in it
//!   waits for the host's credit: nothing a command wrote is dropped);
//! - stdin the host sends is written as the command takes it and acknowledged (`StdinTaken`), so
//!   the host never has more than `STDIN_WINDOW` bytes of it in flight;
//! - the host's connection ending (the host is gone) kills every command's process group and
//!   ends the supervisor.
//!
//! The supervisor makes itself non-dumpable (no command can open its descriptors through
//! `/proc`), ignores the signals a command can send it (`signals.rs`), and reaps every child (as
//! PID 1, or as a child subreaper elsewhere).

mod children;
mod command;
mod files;
mod signals;
mod spliced_output;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use std::os::fd::{AsRawFd, OwnedFd};

use session_frames::{
    encode, output_prefix, Decoder, FileAnswer, Message, Stream, MAX_PAYLOAD, OUTPUT_AFTER_EXIT_MS,
    OUTPUT_PREFIX_LEN, STDIN_WINDOW,
};

use children::{reap, ChildWake};
use command::{index, Command, STREAMS};
use files::{Outcome, Roots, Writing};
use spliced_output::{Pending, Progress, SPLICE_OUTPUT_MIN};

/// Frames queued for the host past which no output is read.
const QUEUED_MAX: usize = 4 * 1024 * 1024;
/// One read of a command's output, at most.
const READ_MAX: usize = 128 * 1024;
/// One read of the connection, at least (frames from the host are mostly small).
const CONNECTION_READ: usize = 64 * 1024;
const CONNECTION_IN: i32 = 0;
const CONNECTION_OUT: i32 = 1;

/// `args`: `[--as-user <uid:gid>] [--roots <workspace> <home> <tmp>]`. `--as-user`: started as
/// root with CAP_SETUID and CAP_SETGID, the supervisor takes an identity of its own and runs
/// every command as that user (`identity.rs`); `--roots`: file requests are served below them.
pub fn run(args: &[String]) -> Result<(), String> {
    let (as_user, args) = match args {
        [flag, user, rest @ ..] if flag == "--as-user" => {
            (Some(crate::identity::parse(user)?), rest)
        }
        _ => (None, args),
    };
    if let Some((uid, gid)) = as_user {
        crate::identity::become_supervisor(uid, gid)?;
    }
    let roots = match args.split_first() {
        None => None,
        Some((flag, paths)) if flag == "--roots" => Some(Roots::open(paths)?),
        Some((other, _)) => return Err(format!("unknown supervisor argument {other}")),
    };
    // SAFETY: prctl with these options only changes this process's own attributes.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        if libc::getpid() != 1 {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        // A command that closed its stdin makes a write fail with EPIPE, never kill the
        // supervisor (std restores the default in every command it starts).
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    signals::ignore_sent_signals();
    let wake = ChildWake::install()?;
    set_non_blocking(CONNECTION_IN);
    set_non_blocking(CONNECTION_OUT);
    // SAFETY: F_SETPIPE_SZ on the connection's pipe changes only its capacity; on anything
    // else (or when refused) it fails and the default stays, which only costs speed.
    unsafe {
        libc::fcntl(CONNECTION_OUT, libc::F_SETPIPE_SZ, 1 << 20);
    }
    let mut supervisor = Supervisor {
        decoder: Decoder::new(),
        connection_buffer: Vec::new(),
        queued: Vec::new(),
        written: 0,
        commands: HashMap::new(),
        leaders: HashMap::new(),
        groups: HashSet::new(),
        roots,
        as_user,
        reads: HashMap::new(),
        writes: HashMap::new(),
        host_gone: false,
        splice_outputs: spliced_output::is_pipe(CONNECTION_OUT),
        pending: None,
    };
    supervisor.serve(&wake)
}

struct Supervisor {
    decoder: Decoder,
    /// Where the connection is read into (kept: the same buffer for every read).
    connection_buffer: Vec<u8>,
    /// Frames for the host, written from `written` on.
    queued: Vec<u8>,
    written: usize,
    commands: HashMap<u32, Command>,
    /// Leader pid → channel.
    leaders: HashMap<i32, u32>,
    /// Every command's process group that may still have members (a command that finished
    /// may have left background children).
    groups: HashSet<i32>,
    /// Where file requests are served, when they are.
    roots: Option<Roots>,
    /// The user every command runs as, when the supervisor has an identity of its own.
    as_user: Option<(u32, u32)>,
    /// Files being read, by channel.
    reads: HashMap<u32, Reading>,
    /// Files being written, by channel (dropped unfinished: their temporary files go).
    writes: HashMap<u32, Writing>,
    host_gone: bool,
    /// Whether outputs may be spliced into the connection (a pipe, and no refusal yet).
    splice_outputs: bool,
    /// An output frame whose prefix was written and whose bytes are still being spliced:
    /// nothing else is written, and no output read, until it is done (`spliced_output.rs`).
    pending: Option<Pending>,
}

/// A file being read on the host's credit.
struct Reading {
    file: OwnedFd,
    credit: u64,
    /// The most the host asked for, and what was sent: a file that grows past it fails.
    max: u64,
    sent: u64,
}

/// What a poll entry stands for.
#[derive(Clone, Copy)]
enum Slot {
    ConnectionIn,
    ConnectionOut,
    ChildWake,
    Output(u32, Stream),
    Stdin(u32),
}

impl Supervisor {
    fn serve(&mut self, wake: &ChildWake) -> Result<(), String> {
        loop {
            let (mut fds, slots) = self.interests(wake);
            // A file with credit is read at once (a regular file is always ready).
            let timeout = if self.reads_runnable() {
                0
            } else {
                self.next_deadline()
            };
            // SAFETY: `fds` is a valid array of its length for poll to fill in.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll: {error}"));
            }
            for (fd, slot) in fds.iter().zip(slots) {
                if fd.revents == 0 {
                    continue;
                }
                match slot {
                    Slot::ConnectionIn => self.read_connection()?,
                    Slot::ConnectionOut => self.write_connection()?,
                    Slot::ChildWake => {
                        wake.drain();
                        self.reaped();
                    }
                    Slot::Output(channel, stream) => self.read_output(channel, stream)?,
                    Slot::Stdin(channel) => self.write_stdin(channel),
                }
            }
            self.read_files();
            self.close_lingering_outputs()?;
            self.commands.retain(|_, command| !command.finished());
            if self.host_gone {
                for &group in &self.groups {
                    // SAFETY: kill(2) on a process group this supervisor made.
                    unsafe { libc::kill(-group, libc::SIGKILL) };
                }
                return Ok(());
            }
        }
    }

    fn interests(&self, wake: &ChildWake) -> (Vec<libc::pollfd>, Vec<Slot>) {
        let mut fds = Vec::new();
        let mut slots = Vec::new();
        let mut add = |fd: i32, events: i16, slot: Slot| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            slots.push(slot);
        };
        add(CONNECTION_IN, libc::POLLIN, Slot::ConnectionIn);
        add(wake.fd(), libc::POLLIN, Slot::ChildWake);
        if self.written < self.queued.len() || self.pending.is_some() {
            add(CONNECTION_OUT, libc::POLLOUT, Slot::ConnectionOut);
        }
        let room = self.queued.len() - self.written < QUEUED_MAX && self.pending.is_none();
        for (&channel, command) in &self.commands {
            for stream in STREAMS {
                if let Some(output) = &command.outputs[index(stream)] {
                    if room && output.credit > 0 {
                        add(
                            std::os::fd::AsRawFd::as_raw_fd(&output.fd),
                            libc::POLLIN,
                            Slot::Output(channel, stream),
                        );
                    }
                }
            }
            if let Some(fd) = &command.stdin.fd {
                if !command.stdin.queue.is_empty() {
                    add(
                        std::os::fd::AsRawFd::as_raw_fd(fd),
                        libc::POLLOUT,
                        Slot::Stdin(channel),
                    );
                }
            }
        }
        (fds, slots)
    }

    /// Milliseconds until the first lingering output's bound, or -1 (none). None while a
    /// spliced frame is pending: no output is read or ended until the connection takes it, and
    /// the connection's readiness wakes the loop.
    fn next_deadline(&self) -> i32 {
        if self.pending.is_some() {
            return -1;
        }
        let bound = Duration::from_millis(OUTPUT_AFTER_EXIT_MS);
        self.commands
            .values()
            .filter(|c| c.outputs.iter().flatten().any(|o| o.credit > 0))
            .filter_map(|c| c.exited)
            .map(|at| (at + bound).saturating_duration_since(Instant::now()))
            .min()
            .map_or(-1, |left| {
                i32::try_from(left.as_millis() + 1).unwrap_or(i32::MAX)
            })
    }

    fn send(&mut self, channel: u32, message: &Message) {
        self.make_room();
        encode(channel, message, &mut self.queued);
    }

    /// Drops the frames already written once they are at least half of what is queued, so
    /// the queue never grows past twice what is unwritten.
    fn make_room(&mut self) {
        if self.written > 0 && self.written * 2 >= self.queued.len() {
            self.queued.drain(..self.written);
            self.written = 0;
        }
    }

    fn write_connection(&mut self) -> Result<(), String> {
        self.advance_pending()?;
        if self.pending.is_some() {
            return Ok(());
        }
        while self.written < self.queued.len() {
            let rest = &self.queued[self.written..];
            // SAFETY: writes from a live buffer of `rest.len()` bytes.
            let n = unsafe { libc::write(CONNECTION_OUT, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                return match error.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(()),
                    // The host is gone.
                    _ => {
                        self.host_gone = true;
                        Ok(())
                    }
                };
            }
            self.written += n as usize;
        }
        self.queued.clear();
        self.written = 0;
        Ok(())
    }

    fn read_connection(&mut self) -> Result<(), String> {
        // What the decoder wants, or a connection read's worth when that is less (several
        // small frames, a credit or a signal, arrive in one read): the decoder holds one frame
        // and at most `CONNECTION_READ` bytes more.
        let want = self
            .decoder
            .wanted()
            .clamp(CONNECTION_READ, READ_MAX.max(CONNECTION_READ));
        let buf = &mut self.connection_buffer;
        buf.resize(want, 0);
        // SAFETY: reads into a live buffer of its length.
        let n = unsafe { libc::read(CONNECTION_IN, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            self.host_gone = true;
            return Ok(());
        }
        if n < 0 {
            let error = std::io::Error::last_os_error();
            if matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                return Ok(());
            }
            self.host_gone = true;
            return Ok(());
        }
        self.decoder.push(&self.connection_buffer[..n as usize]);
        loop {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => match Message::decode(&frame) {
                    Ok(message) => self.handle(frame.channel, message),
                    Err(error) => self.refuse(frame.channel, &error.to_string()),
                },
                Ok(None) => return Ok(()),
                // Nothing after a malformed frame can be trusted: the host is treated as gone.
                Err(error) => return Err(format!("the host's frames: {error}")),
            }
        }
    }

    fn refuse(&mut self, channel: u32, why: &str) {
        self.send(
            channel,
            &Message::Refused {
                message: why.as_bytes().to_vec(),
            },
        );
    }

    fn handle(&mut self, channel: u32, message: Message) {
        match message {
            Message::File(request) => {
                if self.in_use(channel) {
                    return self.refuse(channel, "the channel is in use");
                }
                let Some(roots) = &self.roots else {
                    return self.send(
                        channel,
                        &Message::FileFailed {
                            errno: 0,
                            refused: true,
                            message: b"this supervisor serves no files".to_vec(),
                        },
                    );
                };
                let max = match request.op {
                    session_frames::FileOp::Read { max } => max,
                    _ => 0,
                };
                match files::answer(roots, &request, channel) {
                    Outcome::Answer(messages) => {
                        for message in messages {
                            self.send(channel, &message);
                        }
                    }
                    Outcome::Write(writing) => {
                        self.writes.insert(channel, writing);
                    }
                    Outcome::Read(file) => {
                        self.reads.insert(
                            channel,
                            Reading {
                                file,
                                credit: 0,
                                max,
                                sent: 0,
                            },
                        );
                    }
                }
            }
            Message::FileChunk(bytes) => {
                let Some(writing) = self.writes.get_mut(&channel) else {
                    return self.refuse(channel, "no file is being written on this channel");
                };
                let taken = bytes.len() as u32;
                match writing.write(&bytes) {
                    Ok(()) => self.send(channel, &Message::StdinTaken { bytes: taken }),
                    Err(failure) => {
                        self.writes.remove(&channel);
                        self.send(channel, &failure);
                    }
                }
            }
            Message::FileCommit => match self.writes.remove(&channel) {
                Some(writing) => {
                    let answer = writing.commit();
                    self.send(channel, &answer);
                }
                None => self.refuse(channel, "no file is being written on this channel"),
            },
            Message::FileAbort => {
                // The host gave the call up: a write's temporary file goes (nothing is put in
                // place), a read's file is closed. Nothing answers an abort.
                self.writes.remove(&channel);
                self.reads.remove(&channel);
            }
            Message::Spawn(spawn) => {
                if self.in_use(channel) {
                    return self.refuse(channel, "the channel is in use");
                }
                match command::start(&spawn, self.as_user) {
                    Ok(command) => {
                        let pid = command.pid;
                        self.leaders.insert(pid, channel);
                        self.groups.insert(pid);
                        self.commands.insert(channel, command);
                        self.send(channel, &Message::Spawned { pid: pid as u32 });
                    }
                    Err(error) => self.send(
                        channel,
                        &Message::SpawnFailed {
                            errno: error.raw_os_error().unwrap_or(0),
                            message: error.to_string().into_bytes(),
                        },
                    ),
                }
            }
            Message::Stdin(bytes) => {
                let Some(command) = self.commands.get_mut(&channel) else {
                    return self.refuse(channel, "no such command");
                };
                let input = &mut command.stdin;
                if input.queue.len() + bytes.len() > STDIN_WINDOW as usize || input.ending {
                    return self.refuse(channel, "stdin past its window, or after its end");
                }
                if input.fd.is_none() {
                    // The command closed its stdin: dropped, and said taken.
                    let taken = bytes.len() as u32;
                    return self.send(channel, &Message::StdinTaken { bytes: taken });
                }
                input.queue.extend(bytes);
            }
            Message::StdinEnd => {
                let Some(command) = self.commands.get_mut(&channel) else {
                    return self.refuse(channel, "no such command");
                };
                command.stdin.ending = true;
                if command.stdin.queue.is_empty() {
                    command.stdin.fd = None;
                }
            }
            Message::Signal(signal) => {
                if let Some(command) = self.commands.get(&channel) {
                    command.signal(signal as i32);
                }
            }
            Message::Credit { stream, bytes } => {
                if let Some(reading) = self.reads.get_mut(&channel) {
                    reading.credit = reading.credit.saturating_add(u64::from(bytes));
                }
                if let Some(command) = self.commands.get_mut(&channel) {
                    if let Some(output) = &mut command.outputs[index(stream)] {
                        output.credit = output.credit.saturating_add(u64::from(bytes));
                    }
                }
            }
            _ => self.refuse(channel, "a frame only the supervisor sends"),
        }
    }

    /// Moves the pending output frame's bytes on, as far as the connection takes them.
    fn advance_pending(&mut self) -> Result<(), String> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        match pending.advance(CONNECTION_OUT)? {
            Progress::Done => {}
            Progress::Blocked(pending) => self.pending = Some(pending),
            Progress::Refused(rest) => {
                // The frame's rest goes before every frame queued meanwhile.
                self.splice_outputs = false;
                self.queued.splice(self.written..self.written, rest);
            }
            Progress::HostGone => self.host_gone = true,
        }
        Ok(())
    }

    /// Sends what the output's pipe holds by splice, when the connection is idle and the pipe
    /// holds enough to be worth it; false: read it as usual.
    fn splice_output(&mut self, channel: u32, stream: Stream, want: usize) -> Result<bool, String> {
        if !self.splice_outputs || self.pending.is_some() || self.written < self.queued.len() {
            return Ok(false);
        }
        let Some(output) = self
            .commands
            .get_mut(&channel)
            .and_then(|c| c.outputs[index(stream)].as_mut())
        else {
            return Ok(false);
        };
        let n = spliced_output::held(output.fd.as_raw_fd()).min(want);
        if n < SPLICE_OUTPUT_MIN {
            return Ok(false);
        }
        let Ok(pending) = Pending::new(&output.fd, n) else {
            return Ok(false);
        };
        let prefix = output_prefix(channel, stream, n);
        // SAFETY: writes from a live array of its length. A pipe takes a write this small
        // whole or not at all (it is under PIPE_BUF).
        let wrote = unsafe { libc::write(CONNECTION_OUT, prefix.as_ptr().cast(), prefix.len()) };
        if wrote < 0 {
            let kind = std::io::Error::last_os_error().kind();
            if !matches!(
                kind,
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                self.host_gone = true;
                return Ok(true);
            }
            return Ok(false);
        }
        if wrote as usize != prefix.len() {
            return Err("the connection took part of a frame's prefix".into());
        }
        output.credit -= n as u64;
        self.pending = Some(pending);
        self.advance_pending()?;
        Ok(true)
    }

    fn read_output(&mut self, channel: u32, stream: Stream) -> Result<(), String> {
        if self.pending.is_some() {
            // The pending frame's bytes may be this pipe's next: nothing is read past them.
            return Ok(());
        }
        let Some((fd, credit)) = self
            .commands
            .get(&channel)
            .and_then(|c| c.outputs[index(stream)].as_ref())
            .map(|output| (std::os::fd::AsRawFd::as_raw_fd(&output.fd), output.credit))
        else {
            return Ok(());
        };
        let most = usize::try_from(credit)
            .unwrap_or(usize::MAX)
            .min(MAX_PAYLOAD - 1);
        if self.splice_output(channel, stream, most)? {
            return Ok(());
        }
        let want = most.min(READ_MAX);
        // The output is read straight into the frames for the host, after room for its
        // prefix: no buffer of its own, no copy.
        self.make_room();
        let start = self.queued.len();
        self.queued.reserve(OUTPUT_PREFIX_LEN + want);
        // SAFETY: `reserve` made room for `OUTPUT_PREFIX_LEN + want` bytes past `start`, and
        // read writes at most `want` bytes there, past the prefix's room; only the bytes it
        // reports written are made part of the vector (`set_len` below).
        let n = unsafe {
            libc::read(
                fd,
                self.queued
                    .as_mut_ptr()
                    .add(start + OUTPUT_PREFIX_LEN)
                    .cast(),
                want,
            )
        };
        if n > 0 {
            let n = n as usize;
            if let Some(output) = self
                .commands
                .get_mut(&channel)
                .and_then(|c| c.outputs[index(stream)].as_mut())
            {
                output.credit -= n as u64;
            }
            let prefix = output_prefix(channel, stream, n);
            // SAFETY: the prefix is copied into `start..start + OUTPUT_PREFIX_LEN`, inside the
            // capacity reserved above and apart from `prefix`; read wrote the `n` bytes after it,
            // so every byte up to the new length is initialized. Nothing touched the vector
            // between the read and here.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    prefix.as_ptr(),
                    self.queued.as_mut_ptr().add(start),
                    OUTPUT_PREFIX_LEN,
                );
                self.queued.set_len(start + OUTPUT_PREFIX_LEN + n);
            }
            return Ok(());
        }
        if n < 0 {
            let kind = std::io::Error::last_os_error().kind();
            if matches!(
                kind,
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                return Ok(());
            }
        }
        // The end (every writer closed it), or a read error: the stream ends here.
        self.end_output(channel, stream);
        Ok(())
    }

    fn in_use(&self, channel: u32) -> bool {
        self.commands.contains_key(&channel)
            || self.reads.contains_key(&channel)
            || self.writes.contains_key(&channel)
    }

    fn reads_runnable(&self) -> bool {
        self.queued.len() - self.written < QUEUED_MAX && self.reads.values().any(|r| r.credit > 0)
    }

    /// One read of each file being read that has credit, while the frames for the host stay
    /// under `QUEUED_MAX`.
    fn read_files(&mut self) {
        let channels: Vec<u32> = self
            .reads
            .iter()
            .filter(|(_, r)| r.credit > 0)
            .map(|(c, _)| *c)
            .collect();
        for channel in channels {
            if self.queued.len() - self.written >= QUEUED_MAX {
                return;
            }
            let Some(reading) = self.reads.get_mut(&channel) else {
                continue;
            };
            let want = usize::try_from(reading.credit)
                .unwrap_or(usize::MAX)
                .min(READ_MAX);
            let mut buf = vec![0u8; want];
            // SAFETY: reads into a live buffer of its length from a file this owns.
            let n = unsafe { libc::read(reading.file.as_raw_fd(), buf.as_mut_ptr().cast(), want) };
            let message = if n > 0 {
                buf.truncate(n as usize);
                reading.credit -= n as u64;
                reading.sent += n as u64;
                if reading.sent > reading.max {
                    self.reads.remove(&channel);
                    Message::FileFailed {
                        errno: libc::EFBIG,
                        refused: false,
                        message:
                            b"the file grew past the bytes asked for at most while it was read"
                                .to_vec(),
                    }
                } else {
                    Message::FileBytes(buf)
                }
            } else if n == 0 {
                self.reads.remove(&channel);
                Message::FileDone(FileAnswer::ReadEnd)
            } else {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                self.reads.remove(&channel);
                Message::FileFailed {
                    errno: error.raw_os_error().unwrap_or(0),
                    refused: false,
                    message: format!("reading failed: {error}").into_bytes(),
                }
            };
            self.send(channel, &message);
        }
    }

    fn end_output(&mut self, channel: u32, stream: Stream) {
        if let Some(command) = self.commands.get_mut(&channel) {
            if command.outputs[index(stream)].take().is_some() {
                self.send(channel, &Message::OutputEnd { stream });
            }
        }
    }

    fn write_stdin(&mut self, channel: u32) {
        let Some(command) = self.commands.get_mut(&channel) else {
            return;
        };
        let input = &mut command.stdin;
        let Some(fd) = &input.fd else {
            return;
        };
        let (front, _) = input.queue.as_slices();
        // SAFETY: writes from a live slice of its length to a pipe this owns.
        let n = unsafe {
            libc::write(
                std::os::fd::AsRawFd::as_raw_fd(fd),
                front.as_ptr().cast(),
                front.len(),
            )
        };
        let taken = if n >= 0 {
            input.queue.drain(..n as usize);
            n as usize
        } else {
            let kind = std::io::Error::last_os_error().kind();
            if matches!(
                kind,
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                return;
            }
            // The command closed its stdin (EPIPE): what is queued is dropped, and said taken.
            input.fd = None;
            let dropped = input.queue.len();
            input.queue.clear();
            dropped
        };
        if input.queue.is_empty() && input.ending {
            input.fd = None;
        }
        if taken > 0 {
            self.send(
                channel,
                &Message::StdinTaken {
                    bytes: taken as u32,
                },
            );
        }
    }

    fn reaped(&mut self) {
        // Groups with no member left are forgotten.
        // SAFETY: kill(2) with signal 0 only asks whether the group has a member.
        self.groups
            .retain(|&group| unsafe { libc::kill(-group, 0) } == 0);
        for (pid, exit) in reap() {
            let Some(channel) = self.leaders.remove(&pid) else {
                // An orphan the supervisor inherited: reaped, nothing to report.
                continue;
            };
            if let Some(command) = self.commands.get_mut(&channel) {
                command.exited = Some(Instant::now());
            }
            self.send(channel, &Message::Exit(exit));
        }
    }

    /// Once a leader exited, its stdin closes when what is queued was written; its outputs
    /// and its stdin still open `OUTPUT_AFTER_EXIT_MS` after the exit (a background child holding
    /// them) are closed, and stdin nobody read is dropped (and said taken).
    fn close_lingering_outputs(&mut self) -> Result<(), String> {
        let bound = Duration::from_millis(OUTPUT_AFTER_EXIT_MS);
        let now = Instant::now();
        let mut due = Vec::new();
        let mut dropped = Vec::new();
        for (&channel, command) in &mut self.commands {
            let Some(at) = command.exited else {
                continue;
            };
            let past = now >= at + bound;
            if command.stdin.queue.is_empty() || past {
                command.stdin.fd = None;
                let left = command.stdin.queue.len();
                command.stdin.queue.clear();
                if left > 0 {
                    dropped.push((channel, left));
                }
            }
            if past {
                for stream in STREAMS {
                    if command.outputs[index(stream)].is_some() {
                        due.push((channel, stream));
                    }
                }
            }
        }
        for (channel, bytes) in dropped {
            self.send(
                channel,
                &Message::StdinTaken {
                    bytes: bytes as u32,
                },
            );
        }
        for (channel, stream) in due {
            self.end_if_drained(channel, stream)?;
        }
        Ok(())
    }

    /// Ends an output past its bound once nothing is left in its pipe; one the host gives no
    /// credit keeps what it holds until the host reads (nothing a command wrote is dropped).
    fn end_if_drained(&mut self, channel: u32, stream: Stream) -> Result<(), String> {
        let Some(output) = self
            .commands
            .get(&channel)
            .and_then(|c| c.outputs[index(stream)].as_ref())
        else {
            return Ok(());
        };
        if output.credit == 0 {
            return Ok(());
        }
        if spliced_output::held(output.fd.as_raw_fd()) > 0 {
            // Read first; the next pass ends it.
            return self.read_output(channel, stream);
        }
        self.end_output(channel, stream);
        Ok(())
    }
}

fn set_non_blocking(fd: i32) {
    // SAFETY: F_GETFL/F_SETFL on one of this process's standard descriptors.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}
