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
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::failure::Failure;
use crate::fs::{last_error, open_at, os_failure};
use crate::splice::{Source, Spliced, SPLICE_MIN};
use crate::tar::{padding, BLOCK};

/// The longest GNU long name read (the host's paths are at most 1,024 bytes).
const LONG_NAME_MAX: u64 = 4_096;
/// Directories below one being removed, at most.
const REMOVE_DEPTH_MAX: usize = 256;
/// What the helper writes on stdout once a marked file's place is ready.
pub const READY: &[u8] = b"R";
/// What the helper writes on stdout once the whole archive is extracted.
pub const DONE: &[u8] = b"D";

/// One entry's header, its name already taken from a long-name entry when there was one.
struct Header {
    name: Vec<u8>,
    kind: Kind,
    size: u64,
    mode: u32,
    mtime: i64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    File,
    LongName,
    /// The next file's body comes through the engine.
    Marker,
}

/// A number field: octal digits (padded with spaces or NULs), or GNU base-256 when its first
/// byte has the high bit set.
fn number(field: &[u8], what: &str) -> Result<u64, Failure> {
    if field.first().is_some_and(|&b| b & 0x80 != 0) {
        let mut value: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            value = value
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(b)))
                .ok_or_else(|| refused(format!("the {what} field is too large")))?;
        }
        return Ok(value);
    }
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&b| b == b' ')
        .take_while(|&b| b != 0 && b != b' ')
        .collect();
    if digits.is_empty() {
        return Ok(0);
    }
    let text = std::str::from_utf8(&digits).map_err(|_| refused(format!("a bad {what} field")))?;
    u64::from_str_radix(text, 8).map_err(|_| refused(format!("a bad {what} field: {text:?}")))
}

fn refused(message: String) -> Failure {
    Failure::Refused(format!("the import archive: {message}"))
}

fn truncated() -> Failure {
    Failure::Io("the import archive ended before its end-of-archive blocks".into())
}

fn reading(e: &std::io::Error) -> Failure {
    Failure::Io(format!("reading the import archive: {e}"))
}

/// Fills `block` from `input`; `Ok(false)` at end of input before its first byte.
fn read_block(input: &mut impl Read, block: &mut [u8; BLOCK]) -> Result<bool, Failure> {
    let mut filled = 0;
    while filled < BLOCK {
        match input.read(&mut block[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(truncated()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(reading(&e)),
        }
    }
    Ok(true)
}

/// Reads and drops `count` bytes.
fn skip(input: &mut impl Read, count: u64) -> Result<(), Failure> {
    let copied = std::io::copy(&mut Read::by_ref(input).take(count), &mut std::io::sink())
        .map_err(|e| reading(&e))?;
    if copied < count {
        return Err(truncated());
    }
    Ok(())
}

/// The header in `block`, or `None` for an all-zero block (the end of the archive).
fn header(block: &[u8; BLOCK]) -> Result<Option<Header>, Failure> {
    if block.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let stored = number(&block[148..156], "checksum")?;
    let sum: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                u64::from(b' ')
            } else {
                u64::from(b)
            }
        })
        .sum();
    if stored != sum {
        return Err(refused("a header's checksum does not match".into()));
    }
    let field = |range: std::ops::Range<usize>| {
        let bytes = &block[range];
        bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())].to_vec()
    };
    let mut name = field(0..100);
    // POSIX ustar (not GNU, whose magic differs) may keep the name's start in the prefix field.
    if &block[257..263] == b"ustar\0" {
        let prefix = field(345..500);
        if !prefix.is_empty() {
            let mut joined = prefix;
            joined.push(b'/');
            joined.extend_from_slice(&name);
            name = joined;
        }
    }
    let kind = match block[156] {
        b'0' | 0 => Kind::File,
        b'5' => Kind::Directory,
        b'L' => Kind::LongName,
        b'N' => Kind::Marker,
        other => {
            return Err(refused(format!(
                "{}: entry type {:?} is not imported",
                String::from_utf8_lossy(&name),
                char::from(other)
            )))
        }
    };
    let mtime = number(&block[136..148], "mtime")?;
    Ok(Some(Header {
        name,
        kind,
        size: number(&block[124..136], "size")?,
        mode: u32::try_from(number(&block[100..108], "mode")? & 0o7777).unwrap_or(0o644),
        mtime: i64::try_from(mtime).unwrap_or(i64::MAX),
    }))
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
    let mut block = [0u8; BLOCK];
    let mut buffer = vec![0u8; 256 * 1024];
    let mut long_name: Option<Vec<u8>> = None;
    let mut marked = false;
    loop {
        if !read_block(input, &mut block)? {
            return Err(truncated());
        }
        let Some(mut entry) = header(&block)? else {
            break;
        };
        if entry.kind == Kind::Marker {
            if marked || entry.size != 0 {
                return Err(refused("a marker that does not mark one file".into()));
            }
            marked = true;
            continue;
        }
        if entry.kind == Kind::LongName {
            if entry.size > LONG_NAME_MAX {
                return Err(refused(format!("a long name of {} bytes", entry.size)));
            }
            let mut name = Vec::new();
            Read::by_ref(input)
                .take(entry.size)
                .read_to_end(&mut name)
                .map_err(|e| reading(&e))?;
            if name.len() as u64 != entry.size {
                return Err(truncated());
            }
            skip(input, padding(entry.size) as u64)?;
            while name.last() == Some(&0) {
                name.pop();
            }
            long_name = Some(name);
            continue;
        }
        if let Some(name) = long_name.take() {
            entry.name = name;
        }
        let parts = components(&entry.name)?;
        let shown = parts.join(&b'/');
        let last = parts[parts.len() - 1];
        let parent = chain.parent(root, &parts, &shown)?;
        match entry.kind {
            Kind::Directory if marked => {
                return Err(refused(format!(
                    "{}: a marked entry is not a file",
                    String::from_utf8_lossy(&shown)
                )))
            }
            Kind::Directory => {
                let fd = make_directory(parent, last, entry.mode, &shown)?;
                let body = entry
                    .size
                    .checked_add(padding(entry.size) as u64)
                    .ok_or_else(|| {
                        refused(format!(
                            "{}: a size too large",
                            String::from_utf8_lossy(&shown)
                        ))
                    })?;
                skip(input, body)?;
                chain.open.push((shown, fd, Some(entry.mtime)));
            }
            _ if marked => {
                remove(parent, last, &shown, 0)?;
                answer(answers, READY, "a marker")?;
                marked = false;
            }
            _ => {
                let mut file = create_file(parent, last, entry.mode, &shown)?;
                copy_body(input, &mut file, entry.size, &mut buffer, &shown)?;
                set_times(&file, entry.mtime, &shown)?;
                drop(file);
                skip(input, padding(entry.size) as u64)?;
            }
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

    #[test]
    fn numbers_read_octal_and_base_256() {
        assert!(matches!(number(b"0000644\0", "mode"), Ok(0o644)));
        assert!(matches!(number(b"   755 \0", "mode"), Ok(0o755)));
        assert!(matches!(number(b"\0\0\0\0", "size"), Ok(0)));
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[11] = 1;
        big[10] = 2;
        assert!(matches!(number(&big, "size"), Ok(513)));
        assert!(number(b"0009\0", "size").is_err());
    }

    /// An archive of `entries` (name, typeflag, body), as the host writes it.
    fn archive(entries: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, typeflag, body) in entries {
            if name.len() > 100 {
                let mut long = name.to_vec();
                long.push(0);
                out.extend_from_slice(&crate::tar::header(
                    b"././@LongLink",
                    long.len() as u64,
                    0o644,
                    b'L',
                    b"",
                ));
                out.extend_from_slice(&long);
                out.resize(out.len() + padding(long.len() as u64), 0);
            }
            let mode = if *typeflag == b'5' { 0o750 } else { 0o640 };
            out.extend_from_slice(&crate::tar::header(
                name,
                body.len() as u64,
                mode,
                *typeflag,
                b"",
            ));
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
        crate::tar::header(b"", 0, 0o644, b'N', b"").to_vec()
    }

    /// A file's header without its body.
    fn bodiless(name: &[u8], size: u64) -> Vec<u8> {
        crate::tar::header(name, size, 0o640, b'0', b"").to_vec()
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

    #[test]
    fn names_must_be_workspace_relative() {
        assert!(components(b"a/b/").is_ok());
        for bad in [&b"/a"[..], b"a//b", b"a/../b", b"./a", b""] {
            assert!(components(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
