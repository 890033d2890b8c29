//! One command: its leader (the head of its own process group), the pipes the supervisor holds
//! (stdin to write, stdout and stderr to read), what the host may still be sent of each output
//! (its credit), and its stdin not yet written.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Instant;

use session_frames::{Spawn, Stream, SPAWN_FAILED_CWD};

pub struct Output {
    pub fd: OwnedFd,
    /// Bytes the host will take now.
    pub credit: u64,
}

pub struct Input {
    pub fd: Option<OwnedFd>,
    pub queue: VecDeque<u8>,
    /// The host sent its end: close once the queue is written.
    pub ending: bool,
}

pub struct Command {
    pub pid: i32,
    pub stdin: Input,
    /// stdout, stderr; `None` once ended.
    pub outputs: [Option<Output>; 2],
    /// When the leader's exit was seen (its outputs then get a bound).
    pub exited: Option<Instant>,
}

pub fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

pub const STREAMS: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

/// Starts `spawn` as the head of a process group of its own, its stdio pipes of its own (every
/// other descriptor of the supervisor is close-on-exec), with exactly the environment given, as
/// `as_user` in every id when the supervisor has an identity of its own.
pub fn start(spawn: &Spawn, as_user: Option<(u32, u32)>) -> std::io::Result<Command> {
    let cwd = std::path::Path::new(OsStr::from_bytes(&spawn.cwd));
    // Like the engine's working directory, a missing one is made (as the supervisor's user).
    std::fs::create_dir_all(cwd).map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!("{SPAWN_FAILED_CWD}{}: {error}", cwd.display()),
        )
    })?;
    let program = OsStr::from_bytes(&spawn.argv[0]);
    let mut command = std::process::Command::new(program);
    command
        .args(spawn.argv[1..].iter().map(|arg| OsStr::from_bytes(arg)))
        .env_clear()
        .envs(
            spawn
                .env
                .iter()
                .map(|(key, value)| (OsStr::from_bytes(key), OsStr::from_bytes(value))),
        )
        .current_dir(OsStr::from_bytes(&spawn.cwd))
        .process_group(0)
        .stdin(if spawn.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: runs in the forked child before exec, making only raw system calls
    // (setresgid/setresuid, prctl: async-signal-safe) and allocating nothing.
    unsafe {
        command.pre_exec(move || {
            if let Some((uid, gid)) = as_user {
                crate::identity::become_user(uid, gid)?;
            }
            // After the identity change, which clears it: a supervisor that dies (killed from
            // inside where the guest can reach it) takes its commands' leaders with it.
            if libc::syscall(
                libc::SYS_prctl,
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let stdin = child.stdin.take().map(OwnedFd::from);
    let stdout = child.stdout.take().map(OwnedFd::from);
    let stderr = child.stderr.take().map(OwnedFd::from);
    // The child is reaped by the supervisor's `waitpid(-1)`, never through `Child`.
    drop(child);
    for fd in [&stdin, &stdout, &stderr].into_iter().flatten() {
        non_blocking(fd);
    }
    for fd in [&stdout, &stderr].into_iter().flatten() {
        larger_pipe(fd);
    }
    let output = |fd: Option<OwnedFd>| fd.map(|fd| Output { fd, credit: 0 });
    Ok(Command {
        pid,
        stdin: Input {
            fd: stdin,
            queue: VecDeque::new(),
            ending: false,
        },
        outputs: [output(stdout), output(stderr)],
        exited: None,
    })
}

/// Output pipes of 1 MiB (the unprivileged most), so a fast command writes long runs between
/// the supervisor's reads; a refusal leaves the default size, which only costs speed.
fn larger_pipe(fd: &OwnedFd) {
    // SAFETY: F_SETPIPE_SZ on a pipe this owns changes only its capacity.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

fn non_blocking(fd: &OwnedFd) {
    // SAFETY: F_GETFL/F_SETFL on a descriptor this owns; a failure leaves it blocking, which
    // only costs a wait (poll said it was ready).
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

impl Command {
    /// Signals the command's whole process group.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on this command's own process group (its leader's pid); ESRCH when
        // the group is gone is nothing to do.
        unsafe { libc::kill(-self.pid, signal) };
    }

    /// Nothing left to do for it: its leader exited, its outputs ended, its stdin is closed.
    pub fn finished(&self) -> bool {
        self.exited.is_some() && self.outputs.iter().all(Option::is_none) && self.stdin.fd.is_none()
    }
}
