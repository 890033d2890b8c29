//! Moving large file bodies between a pipe and a file in the kernel (`splice`), without copying
//! them through the helper: the archive's stdout pipe on export, its stdin pipe on import. A
//! descriptor that is no pipe, or a kernel that refuses, makes the caller copy as before.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsRawFd;

/// Bodies from this size on are moved with `splice`; smaller ones are copied with the rest of
/// the archive (a splice first hands over everything written before it).
pub const SPLICE_MIN: u64 = 256 * 1_024;
/// The most one `splice` call is asked to move.
const SPLICE_STEP: usize = 1_024 * 1_024;

/// What one splice did.
#[derive(Debug, PartialEq, Eq)]
pub enum Spliced {
    /// This many bytes moved (0: the end of the input).
    Moved(u64),
    /// Not now: bytes are buffered in front of the pipe (they are read first).
    Buffered,
    /// Never on these descriptors (no pipe, or a kernel that refuses): the caller copies.
    Unsupported,
}

/// `splice(from, to)` of at most `count` bytes.
fn splice(from: i32, to: i32, count: u64) -> std::io::Result<Spliced> {
    let step = usize::try_from(count).map_or(SPLICE_STEP, |count| count.min(SPLICE_STEP));
    loop {
        // SAFETY: both descriptors are open for the call; null offsets use (and advance) the
        // descriptors' own file positions, and nothing else is read or written by the kernel.
        let moved = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                step,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_MORE,
            )
        };
        if moved >= 0 {
            return Ok(Spliced::Moved(moved as u64));
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                return Ok(Spliced::Unsupported)
            }
            _ => return Err(error),
        }
    }
}

/// Where an export archive goes: file bodies may be spliced into it.
pub trait Sink: Write {
    /// Moves up to `count` bytes of `file` (from its position) into the archive.
    fn splice_from(&mut self, _file: &File, _count: u64) -> std::io::Result<Spliced> {
        Ok(Spliced::Unsupported)
    }
}

impl Sink for BufWriter<File> {
    fn splice_from(&mut self, file: &File, count: u64) -> std::io::Result<Spliced> {
        // What is buffered goes first, so the archive keeps its order.
        self.flush()?;
        splice(file.as_raw_fd(), self.get_ref().as_raw_fd(), count)
    }
}

impl Sink for Vec<u8> {}

/// Where an import archive comes from: file bodies may be spliced out of it.
pub trait Source: std::io::BufRead {
    /// Moves up to `count` bytes of the archive into `file` (at its position).
    fn splice_into(&mut self, _file: &File, _count: u64) -> std::io::Result<Spliced> {
        Ok(Spliced::Unsupported)
    }
}

impl Source for BufReader<File> {
    fn splice_into(&mut self, file: &File, count: u64) -> std::io::Result<Spliced> {
        // Buffered bytes come first: only an empty buffer lets the pipe be read past it.
        if !self.buffer().is_empty() {
            return Ok(Spliced::Buffered);
        }
        splice(self.get_ref().as_raw_fd(), file.as_raw_fd(), count)
    }
}

impl Source for &[u8] {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, Read};
    use std::os::fd::FromRawFd;

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors `pipe` writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: `pipe` just returned both descriptors, owned by nothing else.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    fn body() -> Vec<u8> {
        (0..700_000u32).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_body_spliced_into_the_archive_follows_what_was_buffered() {
        let path = std::env::temp_dir().join(format!("helper-splice-out-{}", std::process::id()));
        std::fs::write(&path, body()).expect("body");
        let (mut reader, writer) = pipe();
        let collected = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).expect("read");
            all
        });
        let mut out = BufWriter::new(writer);
        out.write_all(b"head").expect("head");
        let file = File::open(&path).expect("open");
        let mut left = body().len() as u64;
        while left > 0 {
            match out.splice_from(&file, left).expect("splice") {
                Spliced::Moved(n) => left -= n,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(out.splice_from(&file, 1).expect("end"), Spliced::Moved(0));
        out.write_all(b"tail").expect("tail");
        drop(out);
        let mut expected = b"head".to_vec();
        expected.extend(body());
        expected.extend(b"tail");
        assert!(collected.join().expect("reader") == expected);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn a_body_spliced_out_of_the_archive_comes_after_the_buffered_bytes() {
        let path = std::env::temp_dir().join(format!("helper-splice-in-{}", std::process::id()));
        let (reader, mut writer) = pipe();
        let fed = std::thread::spawn(move || {
            writer.write_all(b"head").expect("head");
            writer.write_all(&body()).expect("body");
        });
        let mut input = BufReader::with_capacity(16, reader);
        let mut head = [0u8; 4];
        input.read_exact(&mut head).expect("head");
        let mut file = File::create(&path).expect("create");
        let mut left = body().len() as u64;
        while left > 0 {
            match input.splice_into(&file, left).expect("splice") {
                Spliced::Moved(n) => left -= n,
                Spliced::Buffered => {
                    let n = input.fill_buf().expect("buffered").len().min(left as usize);
                    file.write_all(&input.buffer()[..n]).expect("write");
                    input.consume(n);
                    left -= n as u64;
                }
                Spliced::Unsupported => panic!("a pipe splices"),
            }
        }
        fed.join().expect("writer");
        assert_eq!(input.splice_into(&file, 1).expect("end"), Spliced::Moved(0));
        drop(file);
        assert_eq!(&head, b"head");
        assert!(std::fs::read(&path).expect("written") == body());
        std::fs::remove_file(&path).ok();
    }
}
