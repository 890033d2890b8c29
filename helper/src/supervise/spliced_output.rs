//! A command's output moved into the host's connection in the kernel: the frame's prefix is
//! written, then its bytes are spliced from the command's pipe into the connection's pipe, never
//! passing through the supervisor's memory (two copies and two system calls fewer per read).
//!
//! Invariants:
//! - a splice starts only when every queued frame was written, so the frame lands in order;
//! - the prefix names exactly the bytes the command's pipe already holds (`FIONREAD`), and the
//!   supervisor is that pipe's only reader, so the frame can always be completed;
//! - while a frame is `Pending`, nothing else is written to the connection and no output is
//!   read: the frame's remaining bytes come next on the wire, and they are the next bytes in
//!   the command's pipe;
//! - a kernel that refuses the splice midway has the rest read and written by copy
//!   (`Pending::copy_rest`), so no frame is ever left incomplete.

use std::os::fd::{AsRawFd, OwnedFd};

/// Outputs holding fewer bytes than this are read and queued as before (a splice costs two
/// system calls whatever its size).
pub const SPLICE_OUTPUT_MIN: usize = 32 * 1024;

/// Whether `fd` is a pipe, the only kind of connection a splice can write to.
pub fn is_pipe(fd: i32) -> bool {
    // SAFETY: fstat writes into a zeroed `stat` of its own type.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a live, writable `libc::stat`.
    unsafe { libc::fstat(fd, &mut stat) == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFIFO }
}

/// The bytes `fd` holds now, or 0 when it cannot tell.
pub fn held(fd: i32) -> usize {
    let mut held: libc::c_int = 0;
    // SAFETY: FIONREAD writes the bytes the pipe holds into `held`.
    let asked = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut held) };
    if asked == 0 {
        usize::try_from(held).unwrap_or(0)
    } else {
        0
    }
}

/// A frame whose prefix is on the wire and whose bytes are still in the command's pipe.
pub struct Pending {
    /// The command's pipe (a duplicate: the command may be forgotten meanwhile).
    source: OwnedFd,
    left: usize,
}

/// What moving a pending frame's bytes came to.
pub enum Progress {
    /// Every byte is on the wire.
    Done,
    /// The connection is full: go on when it can be written.
    Blocked(Pending),
    /// The kernel refused to splice here: the caller writes these bytes (the rest of the
    /// frame, read by copy) before anything else, and splices no more.
    Refused(Vec<u8>),
    /// The connection failed: the host is gone.
    HostGone,
}

impl Pending {
    pub fn new(source: &OwnedFd, left: usize) -> std::io::Result<Self> {
        Ok(Self {
            source: source.try_clone()?,
            left,
        })
    }

    /// Splices as much of the frame's bytes into `connection` as it takes now.
    pub fn advance(mut self, connection: i32) -> Result<Progress, String> {
        while self.left > 0 {
            // SAFETY: both descriptors are open pipes for the call; null offsets read and write
            // at the pipes' own positions, and the kernel touches nothing else.
            let moved = unsafe {
                libc::splice(
                    self.source.as_raw_fd(),
                    std::ptr::null_mut(),
                    connection,
                    std::ptr::null_mut(),
                    self.left,
                    libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
                )
            };
            if moved > 0 {
                self.left -= moved as usize;
                continue;
            }
            if moved == 0 {
                return Err("a command's pipe lost bytes it held".into());
            }
            let error = std::io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(Progress::Blocked(self)),
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                    return self.copy_rest().map(Progress::Refused)
                }
                _ => return Ok(Progress::HostGone),
            }
        }
        Ok(Progress::Done)
    }

    /// Reads the frame's remaining bytes, which the pipe holds already.
    fn copy_rest(self) -> Result<Vec<u8>, String> {
        let mut rest = vec![0u8; self.left];
        let mut got = 0;
        while got < rest.len() {
            // SAFETY: reads into the live tail of `rest`, of its length.
            let n = unsafe {
                libc::read(
                    self.source.as_raw_fd(),
                    rest[got..].as_mut_ptr().cast(),
                    rest.len() - got,
                )
            };
            if n > 0 {
                got += n as usize;
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                return Err("a command's pipe lost bytes it held".into());
            }
        }
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        // SAFETY: `pipe2` just returned both descriptors, owned by nothing else.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_frame_blocked_by_a_full_connection_completes_in_order() {
        let (source_read, mut source_write) = pipe();
        let (mut wire_read, wire_write) = pipe();
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        source_write.write_all(&body).expect("the command writes");
        let source = OwnedFd::from(source_read);
        assert!(is_pipe(source.as_raw_fd()));
        assert_eq!(held(source.as_raw_fd()), body.len());
        // A connection that takes one page at a time.
        // SAFETY: F_SETPIPE_SZ only changes the test pipe's capacity.
        unsafe { libc::fcntl(wire_write.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        let mut pending = Pending::new(&source, body.len()).expect("dup");
        let mut wire = Vec::new();
        loop {
            match pending.advance(wire_write.as_raw_fd()).expect("advance") {
                Progress::Done => break,
                Progress::Blocked(more) => {
                    pending = more;
                    let mut page = [0u8; 4096];
                    let n = wire_read.read(&mut page).expect("the host reads");
                    wire.extend_from_slice(&page[..n]);
                }
                Progress::Refused(_) | Progress::HostGone => panic!("a pipe splices"),
            }
        }
        drop(wire_write);
        wire_read.read_to_end(&mut wire).expect("the rest");
        assert!(wire == body);
        assert_eq!(held(source.as_raw_fd()), 0);
    }

    #[test]
    fn a_refused_splice_hands_back_exactly_the_frames_rest() {
        let (source_read, mut source_write) = pipe();
        source_write
            .write_all(b"0123456789")
            .expect("the command writes");
        let source = OwnedFd::from(source_read);
        // Eight of the ten bytes are the frame's: the copy takes exactly those.
        let pending = Pending::new(&source, 8).expect("dup");
        let rest = pending.copy_rest().expect("copied");
        assert_eq!(rest, b"01234567");
        assert_eq!(held(source.as_raw_fd()), 2);
        assert!(!is_pipe(
            File::open("/proc/self/stat").expect("a file").as_raw_fd()
        ));
    }
}
