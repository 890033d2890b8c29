//! Child processes ending: SIGCHLD writes a byte to a pipe the loop polls (the one thing a
//! signal handler may safely do), and `reap` collects every ended child's wait status, the
//! commands' leaders and the orphans a supervisor (PID 1, or a child subreaper) inherits alike.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use session_frames::Exit;

/// The write end of the pipe, for the handler.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_child(_: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking, so a full pipe (a
        // wake already pending) drops this byte, which loses nothing: one wake reaps all.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// The read end the loop polls; readable once a child ended since the last `drain`.
pub struct ChildWake {
    read: OwnedFd,
    _write: OwnedFd,
}

impl ChildWake {
    pub fn install() -> Result<ChildWake, String> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        WAKE_FD.store(write.as_raw_fd(), Ordering::Relaxed);
        // SAFETY: a zeroed sigaction is a valid starting value; the handler only writes to a pipe
        // (async-signal-safe), and SA_RESTART keeps the loop's calls from failing with EINTR
        // except poll, which the loop retries.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_child as *const () as usize;
            action.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) != 0 {
                return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
            }
        }
        Ok(ChildWake {
            read,
            _write: write,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Empties the pipe (the loop then reaps).
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a local buffer of its length from a descriptor this owns.
        while unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {
        }
    }
}

/// Every child that ended, with how.
pub fn reap() -> Vec<(i32, Exit)> {
    let mut ended = Vec::new();
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG only writes the status it returns into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return ended;
        }
        if libc::WIFEXITED(status) {
            ended.push((pid, Exit::Exited(libc::WEXITSTATUS(status))));
        } else if libc::WIFSIGNALED(status) {
            ended.push((pid, Exit::Signaled(libc::WTERMSIG(status))));
        }
    }
}
