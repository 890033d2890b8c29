//! Extracting an import archive into the workspace, as the sandbox's user, the way the engine's
//! archive endpoint extracts it:
//! - a directory entry makes the directory, or keeps one already there (taking the entry's
//!   mode); anything else at its name is removed first;
//! - a file entry replaces whatever is at its name (a directory there is removed with all it
//!   holds), is created exclusively with exactly the entry's mode and bytes, and takes the
//!   entry's modification time;
//! - directories take their entries' modification times once nothing more is written in them
//!   (when the archive names a directory again before writing in it once more, as the host's
//!   always does; a directory only reopened as a parent keeps the time of its last change).
//!
//! Imports close before any guest process runs, so the workspace holds only the seed's root and
//! what earlier imports made (directories 0755, files 0644 or 0755, all the sandbox user's): the
//! helper, running as that user, can always write there, as the engine's root could.
//!
//! A marker entry (typeflag `N`, no body) says that the next file entry's body is not in the
//! archive: the host writes that file through the engine's archive endpoint, whose writes are
//! not charged to the holder's memory limit, so a large file stays in the page cache. The helper
//! prepares its place as for any file (its parents open, whatever is at its name removed), then
//! writes `READY` to stdout and goes on with the entry after it; the host writes the next entry
//! only once the engine has written the file. The file's directory takes its time afterwards,
//! as always, so the engine's write does not change it.
//!
//! Once the whole archive is extracted (directories have their times, the input is read to its
//! end), the helper writes `DONE` to stdout, its last act: the host's import is over then, before
//! the engine has seen the helper exit.
//!
//! Every component is opened relative to its parent with `O_NOFOLLOW`, from the workspace root,
//! so nothing is written through a link. The archive is the host's (`src/transfer/import.rs`):
//! ustar or GNU headers, GNU long names, directories and regular files only; anything else, a
//! bad checksum, a path that is not workspace-relative or a stream that ends before the
//! end-of-archive blocks fails the extraction, naming what was read.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::failure::Failure;
use crate::fs::{last_error, open_at, os_failure};
use crate::splice::{Source, Spliced, SPLICE_MIN};
use tar_framing::{Entry, Error as FramingError, Event, Framer, Options, Trailer};

/// The longest GNU long name read (the host's paths are at most 1,024 bytes).
const LONG_NAME_MAX: u64 = 4_096;
/// Directories below one being removed, at most.
const REMOVE_DEPTH_MAX: usize = 256;
/// What the helper writes on stdout once a marked file's place is ready.
pub const READY: &[u8] = b"R";
/// What the helper writes on stdout once the whole archive is extracted.
pub const DONE: &[u8] = b"D";

/// How the host's import archive is framed: checksums checked, GNU long names read, markers
/// found; any other extended header is an entry, which is refused.
const FRAMING: Options = Options {
    checksums: true,
    pax: false,
    pax_global: false,
    gnu_long_names: true,
    gnu_long_links: false,
    extended_max: LONG_NAME_MAX,
    markers: true,
    trailer: Trailer::Any,
};

fn refused(message: String) -> Failure {
    Failure::Refused(format!("the import archive: {message}"))
}

fn truncated() -> Failure {
    Failure::Io("the import archive ended before its end-of-archive blocks".into())
}

fn reading(e: &std::io::Error) -> Failure {
    Failure::Io(format!("reading the import archive: {e}"))
}

fn framing_failure(error: FramingError) -> Failure {
    match error {
        FramingError::ChecksumUnreadable => refused("a bad checksum field".into()),
        FramingError::ChecksumMismatch => refused("a header's checksum does not match".into()),
        FramingError::SizeUnreadable => refused("a bad size field".into()),
        FramingError::SizeTooLarge => refused("a size too large".into()),
        FramingError::ExtensionTooLarge { size, .. } => {
            refused(format!("a long name of {size} bytes"))
        }
        FramingError::Truncated => truncated(),
        other => refused(other.to_string()),
    }
}

/// What the archive holds next.
enum Next {
    /// An entry's header, its name taken from a long-name entry when there was one.
    Entry(Entry),
    /// A marker, with the size of its body.
    Marker(u64),
    End,
}

/// Reads `input` through `framer` up to the next entry, marker or end (the rest of what came
/// before, bodies and padding included).
fn next(input: &mut impl Source, framer: &mut Framer) -> Result<Next, Failure> {
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(reading(&e)),
        };
        if available.is_empty() {
            return Err(truncated());
        }
        let fed = framer.feed(available);
        input.consume(fed.consumed);
        match fed.event.map_err(framing_failure)? {
            Event::Entry(entry) => return Ok(Next::Entry(entry)),
            Event::Marker { size } => return Ok(Next::Marker(size)),
            Event::End => return Ok(Next::End),
            _ => {}
        }
    }
}

/// A number field of the last header read, `what` naming it when it is unreadable.
fn field(value: Option<u64>, what: &str) -> Result<u64, Failure> {
    value.ok_or_else(|| refused(format!("a bad {what} field")))
}

/// The components of an entry's name (a directory's trailing `/` dropped); refuses anything
/// but a workspace-relative path.
fn components(name: &[u8]) -> Result<Vec<&[u8]>, Failure> {
    let trimmed = name.strip_suffix(b"/").unwrap_or(name);
    let parts: Vec<&[u8]> = trimmed.split(|&b| b == b'/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == b"." || *p == b"..")
    {
        return Err(refused(format!(
            "{} is not a workspace-relative path",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(parts)
}

/// Sets `fd`'s access and modification times to `mtime`.
fn set_times(fd: &impl AsRawFd, mtime: i64, name: &[u8]) -> Result<(), Failure> {
    let time = libc::timespec {
        // `time_t` is 64 bits on every target the helper is built for (x86-64 glibc, arm64
        // musl); the field's own type is named by inference, as libc deprecates the alias on musl.
        tv_sec: mtime as _,
        tv_nsec: 0,
    };
    let times = [time, time];
    // SAFETY: `fd` is open for the call and `times` holds the two values `futimens` reads.
    if unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) } < 0 {
        return Err(last_error(&String::from_utf8_lossy(name)));
    }
    Ok(())
}

fn c_name(name: &[u8]) -> Result<std::ffi::CString, Failure> {
    std::ffi::CString::new(name).map_err(|_| refused("a path holds a NUL byte".into()))
}

/// `unlinkat(directory, name, flags)`; `Err(errno)` when it fails.
fn unlink_at(directory: &OwnedFd, name: &[u8], flags: i32) -> Result<Result<(), i32>, Failure> {
    let c = c_name(name)?;
    // SAFETY: `directory` is open for the call and `c` is NUL-terminated and outlives it.
    if unsafe { libc::unlinkat(directory.as_raw_fd(), c.as_ptr(), flags) } < 0 {
        return Ok(Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(0)));
    }
    Ok(Ok(()))
}

/// Removes `name` in `directory` and, when it is a directory, everything below it, never
/// following a link. `shown` names it in errors.
fn remove(directory: &OwnedFd, name: &[u8], shown: &[u8], depth: usize) -> Result<(), Failure> {
    match unlink_at(directory, name, 0)? {
        Ok(()) | Err(libc::ENOENT) => return Ok(()),
        Err(libc::EISDIR) => {}
        Err(code) => return Err(os_failure(shown, code)),
    }
    if depth > REMOVE_DEPTH_MAX {
        return Err(Failure::Io(format!(
            "{} is more than {REMOVE_DEPTH_MAX} directories deep",
            String::from_utf8_lossy(shown)
        )));
    }
    let inner = match open_at(directory, name, libc::O_RDONLY | libc::O_DIRECTORY)? {
        Ok(fd) => fd,
        Err(libc::ENOENT) => return Ok(()),
        Err(code) => return Err(os_failure(shown, code)),
    };
    for child in crate::fs::names_in(&inner, shown)? {
        let mut child_shown = shown.to_vec();
        child_shown.push(b'/');
        child_shown.extend_from_slice(&child);
        remove(&inner, &child, &child_shown, depth + 1)?;
    }
    match unlink_at(directory, name, libc::AT_REMOVEDIR)? {
        Ok(()) | Err(libc::ENOENT) => Ok(()),
        Err(code) => Err(os_failure(shown, code)),
    }
}

/// The directory `name` in `directory` with mode `mode`, made or kept; whatever else is there
/// is removed first.
fn make_directory(
    directory: &OwnedFd,
    name: &[u8],
    mode: u32,
    shown: &[u8],
) -> Result<OwnedFd, Failure> {
    let c = c_name(name)?;
    for _ in 0..2 {
        // SAFETY: `directory` is open for the call and `c` is NUL-terminated and outlives it.
        let made =
            unsafe { libc::mkdirat(directory.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
        if made == 0 {
            return match open_at(directory, name, libc::O_RDONLY | libc::O_DIRECTORY)? {
                Ok(fd) => Ok(fd),
                Err(code) => Err(os_failure(shown, code)),
            };
        }
        let code = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if code != libc::EEXIST {
            return Err(os_failure(shown, code));
        }
        match open_at(directory, name, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok(fd) => {
                // SAFETY: `fd` is an open descriptor owned here.
                if unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) } < 0 {
                    return Err(last_error(&String::from_utf8_lossy(shown)));
                }
                return Ok(fd);
            }
            // A link or a file in the directory's place is replaced.
            Err(libc::ELOOP | libc::ENOTDIR) => remove(directory, name, shown, 0)?,
            Err(code) => return Err(os_failure(shown, code)),
        }
    }
    Err(Failure::Io(format!(
        "{}: replaced while it was made",
        String::from_utf8_lossy(shown)
    )))
}

/// The file `name` in `directory`, created exclusively with mode `mode`; whatever is there is
/// removed first.
fn create_file(directory: &OwnedFd, name: &[u8], mode: u32, shown: &[u8]) -> Result<File, Failure> {
    let c = c_name(name)?;
    for _ in 0..2 {
        // SAFETY: `directory` is open for the call and `c` is NUL-terminated and outlives it.
        let fd = unsafe {
            libc::openat(
                directory.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd >= 0 {
            // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
            return Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        let code = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if code != libc::EEXIST {
            return Err(os_failure(shown, code));
        }
        remove(directory, name, shown, 0)?;
    }
    Err(Failure::Io(format!(
        "{}: replaced while it was created",
        String::from_utf8_lossy(shown)
    )))
}

/// The directories open along the last entry's path, each with the modification time its own
/// entry asked for (`None`: opened only as a parent).
struct Chain {
    open: Vec<(Vec<u8>, OwnedFd, Option<i64>)>,
}

impl Chain {
    /// Leaves every directory past the first `keep`, setting the times its entry asked for:
    /// nothing more is written in it until its entry comes again.
    fn truncate(&mut self, keep: usize) -> Result<(), Failure> {
        while self.open.len() > keep {
            if let Some((name, fd, Some(mtime))) = self.open.pop() {
                set_times(&fd, mtime, &name)?;
            }
        }
        Ok(())
    }

    /// The directory that holds `parts`' last component, opening the parents not yet open.
    fn parent<'a>(
        &'a mut self,
        root: &'a OwnedFd,
        parts: &[&[u8]],
        shown: &[u8],
    ) -> Result<&'a OwnedFd, Failure> {
        let parents = &parts[..parts.len() - 1];
        let common = self
            .open
            .iter()
            .zip(parents)
            .take_while(|((name, _, _), part)| name.rsplit(|&b| b == b'/').next() == Some(**part))
            .count();
        self.truncate(common)?;
        for (i, part) in parents.iter().enumerate().skip(common) {
            let directory = self.open.last().map_or(root, |(_, fd, _)| fd);
            let fd = match open_at(directory, part, libc::O_RDONLY | libc::O_DIRECTORY)? {
                Ok(fd) => fd,
                Err(code) => {
                    let at = parents[..=i].join(&b'/');
                    return Err(Failure::Io(format!(
                        "{}: its parent {}: {}",
                        String::from_utf8_lossy(shown),
                        String::from_utf8_lossy(&at),
                        std::io::Error::from_raw_os_error(code)
                    )));
                }
            };
            self.open.push((parents[..=i].join(&b'/'), fd, None));
        }
        Ok(self.open.last().map_or(root, |(_, fd, _)| fd))
    }
}

/// Copies exactly `size` bytes of the archive into `file`; a large body is spliced straight
/// from the input when it can be.
fn copy_body(
    input: &mut impl Source,
    file: &mut File,
    size: u64,
    buffer: &mut [u8],
    shown: &[u8],
) -> Result<(), Failure> {
    let writing =
        |e: std::io::Error| Failure::Io(format!("writing {}: {e}", String::from_utf8_lossy(shown)));
    let moving = |e: std::io::Error| {
        Failure::Io(format!(
            "moving the import archive's bytes into {}: {e}",
            String::from_utf8_lossy(shown)
        ))
    };
    let mut left = size;
    let mut splicing = size >= SPLICE_MIN;
    while left > 0 {
        if splicing {
            match input.splice_into(file, left) {
                Ok(Spliced::Moved(0)) => return Err(truncated()),
                Ok(Spliced::Moved(n)) => {
                    left -= n.min(left);
                    continue;
                }
                // The buffered bytes are read below; the next round splices past them.
                Ok(Spliced::Buffered) => {}
                Ok(Spliced::Unsupported) => splicing = false,
                Err(e) => return Err(moving(e)),
            }
        }
        let want = buffer
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match input.read(&mut buffer[..want]) {
            Ok(0) => return Err(truncated()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(reading(&e)),
        };
        file.write_all(&buffer[..n]).map_err(writing)?;
        left -= n as u64;
    }
    Ok(())
}

/// Extracts the archive on `input` into `root`, then reads `input` to its end; `answers` hears
/// `READY` once the place of each marked file is prepared, and `DONE` at the very end.
pub fn import(
    input: &mut impl Source,
    root: &OwnedFd,
    answers: &mut impl Write,
) -> Result<(), Failure> {
    // Modes are the entries' own, not narrowed by the holder's umask.
    // SAFETY: `umask` only sets this process's file mode creation mask.
    unsafe { libc::umask(0) };
    let mut chain = Chain { open: Vec::new() };
    let mut framer = Framer::new(FRAMING);
    let mut buffer = vec![0u8; 256 * 1024];
    let mut marked = false;
    loop {
        let entry = match next(input, &mut framer)? {
            Next::End => break,
            Next::Marker(size) => {
                if marked || size != 0 {
                    return Err(refused("a marker that does not mark one file".into()));
                }
                marked = true;
                continue;
            }
            Next::Entry(entry) => entry,
        };
        let directory = match entry.typeflag {
            b'0' | 0 => false,
            b'5' => true,
            other => {
                return Err(refused(format!(
                    "{}: entry type {:?} is not imported",
                    String::from_utf8_lossy(&entry.name),
                    char::from(other)
                )))
            }
        };
        let header = framer.header();
        let mtime = field(header.mtime(), "mtime")?;
        let mtime = i64::try_from(mtime).unwrap_or(i64::MAX);
        let mode = u32::try_from(field(header.mode(), "mode")? & 0o7777).unwrap_or(0o644);
        let parts = components(&entry.name)?;
        let shown = parts.join(&b'/');
        let last = parts[parts.len() - 1];
        let parent = chain.parent(root, &parts, &shown)?;
        if directory && marked {
            return Err(refused(format!(
                "{}: a marked entry is not a file",
                String::from_utf8_lossy(&shown)
            )));
        } else if directory {
            // Its body, if it has one, goes by before the next header.
            let fd = make_directory(parent, last, mode, &shown)?;
            chain.open.push((shown, fd, Some(mtime)));
        } else if marked {
            // Its body is not in the archive: the engine writes it.
            framer.skip_body();
            remove(parent, last, &shown, 0)?;
            answer(answers, READY, "a marker")?;
            marked = false;
        } else {
            let mut file = create_file(parent, last, mode, &shown)?;
            copy_body(input, &mut file, entry.size, &mut buffer, &shown)?;
            framer.body_taken(entry.size);
            set_times(&file, mtime, &shown)?;
            drop(file);
        }
    }
    if marked {
        return Err(refused("a marker that does not mark one file".into()));
    }
    chain.truncate(0)?;
    // The second end-of-archive block and anything after it: read to the end, so the host's
    // last writes always find a reader.
    std::io::copy(input, &mut std::io::sink()).map_err(|e| reading(&e))?;
    answer(answers, DONE, "the end of the import")
}

/// Writes `what` to the host at once (answering `about`).
fn answer(answers: &mut impl Write, what: &[u8], about: &str) -> Result<(), Failure> {
    answers
        .write_all(what)
        .and_then(|()| answers.flush())
        .map_err(|e| Failure::Io(format!("answering {about}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    use tar_framing::header::{Fields, Format, Header};
    use tar_framing::{padding, BLOCK};

    /// A header block as the host writes it (GNU, the sandbox user's).
    fn header(name: &[u8], size: u64, mode: u32, typeflag: u8) -> [u8; BLOCK] {
        *Header::encode(&Fields {
            name,
            link_name: b"",
            typeflag,
            size,
            mode,
            uid: 65_532,
            gid: 65_532,
            mtime: 0,
            format: Format::Gnu,
        })
        .as_bytes()
    }

    /// An archive of `entries` (name, typeflag, body), as the host writes it.
    fn archive(entries: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, typeflag, body) in entries {
            if name.len() > 100 {
                let mut long = name.to_vec();
                long.push(0);
                out.extend_from_slice(&header(b"././@LongLink", long.len() as u64, 0o644, b'L'));
                out.extend_from_slice(&long);
                out.resize(out.len() + padding(long.len() as u64), 0);
            }
            let mode = if *typeflag == b'5' { 0o750 } else { 0o640 };
            out.extend_from_slice(&header(name, body.len() as u64, mode, *typeflag));
            out.extend_from_slice(body);
            out.resize(out.len() + padding(body.len() as u64), 0);
        }
        out.resize(out.len() + 2 * BLOCK, 0);
        out
    }

    fn scratch() -> (std::path::PathBuf, OwnedFd) {
        let dir = std::env::temp_dir().join(format!(
            "helper-import-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("scratch");
        let fd = File::open(&dir).expect("open scratch");
        (dir, OwnedFd::from(fd))
    }

    #[test]
    fn extracts_and_replaces_as_the_engine_does() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, root) = scratch();
        std::fs::write(dir.join("was-file"), b"old").expect("seed");
        std::fs::create_dir_all(dir.join("was-dir/inner")).expect("seed");
        std::os::unix::fs::symlink("/etc", dir.join("was-link")).expect("seed");
        let long = format!("d/{}", "n".repeat(150));
        let input = archive(&[
            (b"d/", b'5', b""),
            (long.as_bytes(), b'0', b"long"),
            (b"was-file/", b'5', b""),
            (b"was-file/x", b'0', b"x"),
            (b"was-dir", b'0', b"now a file"),
            (b"was-link/", b'5', b""),
            (b"was-link/y", b'0', &[7u8; 70_000]),
        ]);
        let mut answers = Vec::new();
        import(&mut input.as_slice(), &root, &mut answers)
            .unwrap_or_else(|_| panic!("import failed"));
        assert_eq!(answers, DONE, "the end answered, once");
        assert_eq!(std::fs::read(dir.join(&long)).expect("long"), b"long");
        assert_eq!(std::fs::read(dir.join("was-file/x")).expect("x"), b"x");
        assert_eq!(
            std::fs::read(dir.join("was-dir")).expect("file"),
            b"now a file"
        );
        let link = std::fs::symlink_metadata(dir.join("was-link")).expect("was-link");
        assert!(link.is_dir(), "the link was replaced by a directory");
        assert_eq!(
            std::fs::read(dir.join("was-link/y")).expect("y").len(),
            70_000
        );
        let mode = std::fs::metadata(dir.join("was-dir"))
            .expect("mode")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o640);
        let mode = std::fs::metadata(dir.join("d"))
            .expect("mode")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o750);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// The marker entry, as the host writes it before a file whose body the engine writes.
    fn marker() -> Vec<u8> {
        tar_framing::write::marker(0).as_bytes().to_vec()
    }

    /// A file's header without its body.
    fn bodiless(name: &[u8], size: u64) -> Vec<u8> {
        header(name, size, 0o640, b'0').to_vec()
    }

    #[test]
    fn a_marked_file_has_its_place_prepared_and_no_body() {
        let (dir, root) = scratch();
        std::fs::create_dir_all(dir.join("d/big/inner")).expect("seed");
        std::fs::write(dir.join("d/big/inner/x"), b"x").expect("seed");
        let mut input = archive(&[(b"d/", b'5', b"")]);
        input.truncate(input.len() - 2 * BLOCK);
        input.extend(marker());
        input.extend(bodiless(b"d/big", 1 << 30));
        input.extend(archive(&[(b"d/after", b'0', b"after")]));
        let mut answers = Vec::new();
        import(&mut input.as_slice(), &root, &mut answers)
            .unwrap_or_else(|_| panic!("import failed"));
        assert_eq!(
            answers,
            [READY, DONE].concat(),
            "one answer for the one marker, then the end"
        );
        assert!(
            !dir.join("d/big").exists(),
            "what was at the marked name is removed"
        );
        assert_eq!(std::fs::read(dir.join("d/after")).expect("after"), b"after");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// Stands for the engine: writes the marked file once the helper answers the marker.
    struct Engine {
        file: std::path::PathBuf,
        done: bool,
    }

    impl Write for Engine {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            assert!(!self.done, "nothing after the end");
            if bytes == DONE {
                self.done = true;
            } else {
                assert_eq!(bytes, READY);
                std::fs::write(&self.file, b"through the engine")?;
            }
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_marked_file_with_a_long_name_is_left_to_the_engine_and_its_directory_keeps_its_time() {
        let (dir, root) = scratch();
        let long = format!("d/{}", "n".repeat(150));
        // The host's order: the long-name entry, the marker, the header without its body.
        let mut named = archive(&[(long.as_bytes(), b'0', b"")]);
        let header_at = named.len() - 3 * BLOCK;
        named.truncate(header_at);
        let mut input = archive(&[(b"d/", b'5', b"")]);
        input.truncate(input.len() - 2 * BLOCK);
        input.extend(named);
        input.extend(marker());
        input.extend(bodiless(long.as_bytes(), 1 << 30));
        input.extend(archive(&[(b"d/after", b'0', b"after")]));
        let mut engine = Engine {
            file: dir.join(&long),
            done: false,
        };
        import(&mut input.as_slice(), &root, &mut engine)
            .unwrap_or_else(|_| panic!("import failed"));
        assert!(engine.done, "the end answered after the engine's file");
        assert_eq!(
            std::fs::read(dir.join(&long)).expect("the engine's file"),
            b"through the engine"
        );
        let mtime = std::fs::metadata(dir.join("d"))
            .expect("d")
            .modified()
            .expect("mtime");
        assert_eq!(
            mtime,
            std::time::UNIX_EPOCH,
            "d takes its entry's time after the engine wrote in it"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_marker_marks_exactly_one_file() {
        let (dir, root) = scratch();
        let cases: [Vec<u8>; 3] = [
            [marker(), archive(&[(b"d/", b'5', b"")])].concat(),
            [marker(), marker(), bodiless(b"f", 1)].concat(),
            [marker(), vec![0u8; 2 * BLOCK]].concat(),
        ];
        for input in cases {
            let mut ready = Vec::new();
            assert!(
                matches!(import(&mut input.as_slice(), &root, &mut ready), Err(Failure::Refused(m)) if m.contains("mark")),
            );
            assert!(ready.is_empty());
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn refuses_what_it_does_not_extract() {
        let (dir, root) = scratch();
        let mut short = archive(&[(b"f", b'0', &[1u8; 1000])]);
        short.truncate(BLOCK + 600);
        let mut answers = Vec::new();
        assert!(
            matches!(import(&mut short.as_slice(), &root, &mut answers), Err(Failure::Io(m)) if m.contains("ended before"))
        );
        assert!(answers.is_empty(), "a failed import never answers its end");
        let link = archive(&[(b"l", b'2', b"")]);
        assert!(
            matches!(import(&mut link.as_slice(), &root, &mut Vec::new()), Err(Failure::Refused(m)) if m.contains("entry type '2'"))
        );
        let escape = archive(&[(b"../x", b'0', b"")]);
        assert!(matches!(
            import(&mut escape.as_slice(), &root, &mut Vec::new()),
            Err(Failure::Refused(_))
        ));
        let mut bad = archive(&[(b"f", b'0', b"")]);
        bad[0] = b'g';
        assert!(
            matches!(import(&mut bad.as_slice(), &root, &mut Vec::new()), Err(Failure::Refused(m)) if m.contains("checksum"))
        );
        assert!(!dir.join("x").exists() && !dir.join("../x").exists());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// Hands the archive over at most `step` bytes at a time, as a pipe may.
    struct Trickle<'a> {
        rest: &'a [u8],
        step: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let n = buffer.len().min(self.step).min(self.rest.len());
            buffer[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    impl std::io::BufRead for Trickle<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            Ok(&self.rest[..self.step.min(self.rest.len())])
        }

        fn consume(&mut self, count: usize) {
            self.rest = &self.rest[count..];
        }
    }

    impl Source for Trickle<'_> {}

    #[test]
    fn an_archive_read_in_small_pieces_extracts_the_same() {
        let long = format!("d/{}", "n".repeat(150));
        let body: Vec<u8> = (0..1_000u32).map(|i| i as u8).collect();
        let input = archive(&[
            (b"d/", b'5', b""),
            (long.as_bytes(), b'0', b"long"),
            (b"d/f", b'0', &body),
        ]);
        for step in [1, 7, 511, 513] {
            let (dir, root) = scratch();
            let mut answers = Vec::new();
            let mut trickle = Trickle { rest: &input, step };
            import(&mut trickle, &root, &mut answers)
                .unwrap_or_else(|_| panic!("import failed in pieces of {step}"));
            assert_eq!(answers, DONE);
            assert!(trickle.rest.is_empty(), "read to its end");
            assert_eq!(std::fs::read(dir.join(&long)).expect("long"), b"long");
            assert_eq!(std::fs::read(dir.join("d/f")).expect("f"), body);
            std::fs::remove_dir_all(&dir).expect("cleanup");
        }
    }

    #[test]
    fn pax_headers_and_long_names_past_their_bound_are_refused() {
        let (dir, root) = scratch();
        let pax = archive(&[(b"././@PaxHeader", b'x', b"12 size=600\n")]);
        assert!(
            matches!(import(&mut pax.as_slice(), &root, &mut Vec::new()), Err(Failure::Refused(m)) if m.contains("entry type 'x' is not imported"))
        );
        let mut long = header(b"././@LongLink", LONG_NAME_MAX + 1, 0o644, b'L').to_vec();
        long.resize(long.len() + 2 * 4_096 + BLOCK, b'n');
        assert!(
            matches!(import(&mut long.as_slice(), &root, &mut Vec::new()), Err(Failure::Refused(m)) if m.contains("a long name of 4097 bytes"))
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn names_must_be_workspace_relative() {
        assert!(components(b"a/b/").is_ok());
        for bad in [&b"/a"[..], b"a//b", b"a/../b", b"./a", b""] {
            assert!(components(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
