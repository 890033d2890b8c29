//! A host directory walked through descriptors, for imports of host directories (the Docker
//! backend's native import and, through the binding, JavaScript drivers' `importTree`): the root
//! is opened with `O_DIRECTORY | O_NOFOLLOW`, and every entry below it relative to its parent's
//! descriptor (`fstatat` without following, `openat` with `O_NOFOLLOW`), never by path. A
//! directory swapped for a link while the walk runs can therefore never lead it outside the tree
//! it was given: the swap fails the walk (the link is seen, or its open refuses to follow it), or
//! the walk goes on inside the directory it had already opened.
//!
//! Each directory is checked to be the one `fstatat` saw (device, inode), each file too, with
//! the size it had; a file is then read to exactly that size (`HostFile`), and one that was
//! truncated or grew meanwhile fails. Symbolic links and special files fail the walk; a FIFO or
//! device swapped in for a file is opened without waiting (`O_NONBLOCK`) and refused.
//!
//! Invariants: at most one directory stream is open per level of depth; nothing is ever opened
//! by a path below the root.

use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::lifecycle::error::{OperationCode, OwnerError};

/// A directory, opened without following a link at its last component.
const DIRECTORY_FLAGS: i32 =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
/// A file: a link fails instead of being followed; a FIFO or device swapped in returns at once
/// instead of waiting for a peer (and is refused as not a regular file).
const FILE_FLAGS: i32 = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

pub fn host_error(path: &Path, what: &str) -> OwnerError {
    OwnerError::operation(
        OperationCode::StreamFailure,
        format!("{}: {what}", path.display()),
    )
}

/// One entry of the walk, in walk order: each directory before its contents.
pub enum HostEntry {
    Directory {
        path: String,
    },
    /// A regular file as the walk saw it; `file.open()` opens and checks it.
    File {
        path: String,
        executable: bool,
        file: SeenFile,
    },
}

/// A regular file the walk saw, not opened yet: its parent directory's descriptor, its name in
/// it, and what `fstatat` said of it. Opening it later (a JavaScript driver may ask for its bytes
/// after the walk moved on) still goes through the parent's descriptor.
pub struct SeenFile {
    parent: Arc<OwnedFd>,
    name: CString,
    seen: libc::stat,
    host: PathBuf,
}

impl SeenFile {
    /// Where it is, for messages.
    pub fn host(&self) -> &Path {
        &self.host
    }

    /// The size the walk saw: exactly what its reads will deliver.
    pub fn size(&self) -> u64 {
        u64::try_from(self.seen.st_size).unwrap_or(0)
    }

    /// Opens it without following a link, checked to be the very regular file the walk saw
    /// (device, inode) with the size it had.
    pub fn open(&self) -> Result<HostFile, OwnerError> {
        let fd = open_at(self.parent.as_raw_fd(), &self.name, FILE_FLAGS).map_err(|e| {
            host_error(
                &self.host,
                &format!("cannot be opened without following links: {e}"),
            )
        })?;
        HostFile::checked(File::from(fd), &self.seen, &self.host)
    }
}

/// The depth-first walk: one open directory stream per level, never a whole listing.
pub struct HostWalk {
    levels: Vec<Level>,
}

struct Level {
    directory: Directory,
    /// Its descriptor, for `fstatat` and `openat` (shared with the files seen in it).
    fd: Arc<OwnedFd>,
    /// Where it is (for messages) and its workspace-relative path (empty for the root).
    host: PathBuf,
    relative: String,
}

impl Level {
    /// A level over the open directory `fd`.
    fn new(fd: OwnedFd, host: PathBuf, relative: String) -> Result<Self, OwnerError> {
        // The stream reads its own duplicate, so the level's descriptor stays usable on its own.
        let listed = fd
            .try_clone()
            .map_err(|e| host_error(&host, &format!("cannot be listed: {e}")))?;
        let directory = Directory::from_fd(listed).map_err(|e| host_error(&host, &e))?;
        Ok(Self {
            directory,
            fd: Arc::new(fd),
            host,
            relative,
        })
    }

    /// What `name` is in this directory, without following a link.
    fn stat_at(&self, name: &CStr) -> Result<libc::stat, std::io::Error> {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `name` is NUL-terminated and `stat` is large enough for what `fstatat` writes.
        let done = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if done < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fstatat` succeeded, so it filled `stat`.
        Ok(unsafe { stat.assume_init() })
    }

    /// The directory `name` that `seen` describes, opened without following a link.
    fn open_directory_at(&self, name: &CStr, seen: &libc::stat) -> Result<OwnedFd, String> {
        let fd = open_at(self.fd.as_raw_fd(), name, DIRECTORY_FLAGS)
            .map_err(|e| format!("cannot be opened as a directory without following links: {e}"))?;
        let opened = File::from(fd);
        let metadata = opened.metadata().map_err(|e| e.to_string())?;
        if !same_file(&metadata, seen) {
            return Err("was replaced while the directory was being read".into());
        }
        Ok(opened.into())
    }
}

fn open_at(directory: RawFd, name: &CStr, flags: i32) -> Result<OwnedFd, std::io::Error> {
    // SAFETY: `name` is NUL-terminated and `directory` an open descriptor for the call; the
    // descriptor returned is owned by the caller.
    let fd = unsafe { libc::openat(directory, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl HostWalk {
    /// Opens `root`, which must be a directory and not a link.
    pub fn open(root: &Path) -> Result<Self, OwnerError> {
        let path = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| host_error(root, "the path holds a NUL byte"))?;
        // SAFETY: `path` is a NUL-terminated string that lives for the call.
        let fd = unsafe { libc::open(path.as_ptr(), DIRECTORY_FLAGS) };
        if fd < 0 {
            return Err(host_error(
                root,
                &format!(
                    "cannot be opened as a directory without following links: {}",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            levels: vec![Level::new(owned, root.to_path_buf(), String::new())?],
        })
    }

    /// The next entry, or `None` once the whole tree was walked.
    pub fn next_entry(&mut self) -> Result<Option<HostEntry>, OwnerError> {
        while let Some(level) = self.levels.last_mut() {
            let Some(name) = level
                .directory
                .next_name()
                .map_err(|e| host_error(&level.host, &format!("cannot be listed: {e}")))?
            else {
                self.levels.pop();
                continue;
            };
            let host = level
                .host
                .join(OsString::from_vec(name.as_bytes().to_vec()));
            let utf8 = name.to_str().map_err(|_| {
                host_error(
                    &host,
                    "the name is not valid UTF-8 and cannot be a workspace path",
                )
            })?;
            let path = if level.relative.is_empty() {
                utf8.to_owned()
            } else {
                format!("{}/{utf8}", level.relative)
            };
            let seen = level
                .stat_at(&name)
                .map_err(|e| host_error(&host, &e.to_string()))?;
            match seen.st_mode & libc::S_IFMT {
                libc::S_IFLNK => return Err(host_error(&host, "symbolic links are not imported")),
                libc::S_IFDIR => {
                    let fd = level
                        .open_directory_at(&name, &seen)
                        .map_err(|e| host_error(&host, &e))?;
                    self.levels.push(Level::new(fd, host, path.clone())?);
                    return Ok(Some(HostEntry::Directory { path }));
                }
                libc::S_IFREG => {
                    let executable = seen.st_mode & 0o100 != 0;
                    let file = SeenFile {
                        parent: Arc::clone(&level.fd),
                        name,
                        seen,
                        host,
                    };
                    return Ok(Some(HostEntry::File {
                        path,
                        executable,
                        file,
                    }));
                }
                _ => return Err(host_error(&host, "special files are not imported")),
            }
        }
        Ok(None)
    }
}

/// An open directory stream. It owns its descriptor (`closedir` closes it).
struct Directory {
    stream: NonNull<libc::DIR>,
}

// SAFETY: a directory stream is only read through `&mut self` (`readdir`) and closed in `Drop`;
// the walk that owns it may move between threads as a whole, never share it.
unsafe impl Send for Directory {}

impl Drop for Directory {
    fn drop(&mut self) {
        // SAFETY: the stream is open (made by `fdopendir`) and closed exactly once, here.
        unsafe { libc::closedir(self.stream.as_ptr()) };
    }
}

impl Directory {
    fn from_fd(fd: OwnedFd) -> Result<Self, String> {
        let raw = fd.as_raw_fd();
        // SAFETY: `raw` is an open directory descriptor; on success the stream owns it.
        let stream = unsafe { libc::fdopendir(raw) };
        match NonNull::new(stream) {
            Some(stream) => {
                // The stream closes the descriptor from now on.
                std::mem::forget(fd);
                Ok(Self { stream })
            }
            None => Err(format!(
                "cannot be listed: {}",
                std::io::Error::last_os_error()
            )),
        }
    }

    /// The next name in the directory, without `.` and `..`.
    fn next_name(&mut self) -> Result<Option<CString>, std::io::Error> {
        loop {
            set_errno(0);
            // SAFETY: the stream is open and used by this thread only (`&mut self`).
            let entry = unsafe { libc::readdir(self.stream.as_ptr()) };
            if entry.is_null() {
                let error = std::io::Error::last_os_error();
                return match error.raw_os_error() {
                    Some(0) | None => Ok(None),
                    Some(_) => Err(error),
                };
            }
            // SAFETY: `readdir` returned an entry whose `d_name` is NUL-terminated and valid
            // until the next call on this stream; it is copied at once.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            return Ok(Some(name.to_owned()));
        }
    }
}

/// True when `metadata` (of an open descriptor) is the very object `seen` described.
// `st_dev` and `st_ino` have other types on other platforms; converted as std converts them.
#[allow(clippy::unnecessary_cast)]
fn same_file(metadata: &std::fs::Metadata, seen: &libc::stat) -> bool {
    metadata.dev() == seen.st_dev as u64 && metadata.ino() == seen.st_ino as u64
}

/// A regular file of the walk, read to exactly the size the walk saw.
pub struct HostFile {
    file: File,
    host: PathBuf,
    size: u64,
    remaining: u64,
}

impl HostFile {
    /// `file` checked to be the regular file `seen` described, with that size.
    fn checked(file: File, seen: &libc::stat, host: &Path) -> Result<Self, OwnerError> {
        let opened = file
            .metadata()
            .map_err(|e| host_error(host, &e.to_string()))?;
        if !opened.is_file() {
            return Err(host_error(host, "is not a regular file"));
        }
        if !same_file(&opened, seen) {
            return Err(host_error(
                host,
                "was replaced while the directory was being read",
            ));
        }
        let size = u64::try_from(seen.st_size).unwrap_or(0);
        if opened.len() != size {
            return Err(host_error(
                host,
                "changed size while the directory was being read",
            ));
        }
        Ok(Self {
            file,
            host: host.to_path_buf(),
            size,
            remaining: size,
        })
    }

    /// The size the walk saw, which is exactly what the reads deliver.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next bytes, at most `max` (at least one), never past the size the walk saw; `None`
    /// at its end, once it is checked that the file did not grow. A file truncated meanwhile
    /// fails.
    pub fn read_chunk(&mut self, max: usize) -> Result<Option<Vec<u8>>, OwnerError> {
        if self.remaining == 0 {
            let mut probe = [0u8; 1];
            let more = self
                .file
                .read(&mut probe)
                .map_err(|e| host_error(&self.host, &e.to_string()))?;
            if more != 0 {
                return Err(host_error(&self.host, "grew while it was being read"));
            }
            return Ok(None);
        }
        // Exactly what is left, up to `max`: small files cost their own size.
        let want = usize::try_from(self.remaining).map_or(max.max(1), |left| left.min(max.max(1)));
        let mut buffer = vec![0u8; want];
        let mut filled = 0;
        while filled < want {
            let n = self
                .file
                .read(&mut buffer[filled..])
                .map_err(|e| host_error(&self.host, &format!("reading failed: {e}")))?;
            if n == 0 {
                return Err(host_error(
                    &self.host,
                    "was truncated while it was being read",
                ));
            }
            filled += n;
        }
        self.remaining -= want as u64;
        Ok(Some(buffer))
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_errno(value: i32) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = value };
}

#[cfg(target_vendor = "apple")]
fn set_errno(value: i32) {
    // SAFETY: `__error` returns this thread's errno, valid for the thread's life.
    unsafe { *libc::__error() = value };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch(&format!("host-walk-{name}"))
    }

    /// Makes a FIFO at `path`.
    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo");
        assert!(made.success());
    }

    /// The whole walk as lines: `d path`, `f path size` with the file's bytes read in chunks of 3.
    fn walked(root: &Path) -> (Vec<String>, Option<String>) {
        let mut seen = Vec::new();
        let mut walk = match HostWalk::open(root) {
            Ok(walk) => walk,
            Err(error) => return (seen, Some(error.to_string())),
        };
        loop {
            match walk.next_entry() {
                Ok(None) => return (seen, None),
                Ok(Some(HostEntry::Directory { path })) => seen.push(format!("d {path}")),
                Ok(Some(HostEntry::File { path, file, .. })) => {
                    let mut file = match file.open() {
                        Ok(file) => file,
                        Err(error) => return (seen, Some(error.to_string())),
                    };
                    let mut bytes = Vec::new();
                    loop {
                        match file.read_chunk(3) {
                            Ok(Some(chunk)) => bytes.extend(chunk),
                            Ok(None) => break,
                            Err(error) => return (seen, Some(error.to_string())),
                        }
                    }
                    seen.push(format!("f {path} {}", String::from_utf8_lossy(&bytes)));
                }
                Err(error) => return (seen, Some(error.to_string())),
            }
        }
    }

    #[test]
    fn each_directory_comes_before_its_contents_and_files_are_read_whole() {
        let dir = scratch("order");
        fs::create_dir_all(dir.join("a/b")).expect("dirs");
        fs::write(dir.join("a/b/seven"), b"1234567").expect("file");
        let (seen, error) = walked(&dir);
        assert_eq!(error, None);
        assert_eq!(seen, ["d a", "d a/b", "f a/b/seven 1234567"]);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_root_that_is_a_link_is_refused() {
        let dir = scratch("root-link");
        fs::create_dir(dir.join("real")).expect("real");
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).expect("link");
        let (_, error) = walked(&dir.join("link"));
        assert!(error.expect("refused").contains("without following links"));
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn links_and_special_files_fail_the_walk() {
        let dir = scratch("links");
        std::os::unix::fs::symlink("/etc", dir.join("link")).expect("link");
        let (_, error) = walked(&dir);
        assert!(error
            .expect("refused")
            .contains("symbolic links are not imported"));
        fs::remove_file(dir.join("link")).expect("unlink");
        mkfifo(&dir.join("fifo"));
        let (_, error) = walked(&dir);
        assert!(error
            .expect("refused")
            .contains("special files are not imported"));
        fs::remove_dir_all(&dir).ok();
    }

    /// The root's level and what `fstatat` says of `name` in it.
    fn seen_in(dir: &Path, name: &str) -> (HostWalk, CString, libc::stat) {
        let walk = HostWalk::open(dir).expect("root");
        let name = CString::new(name).expect("name");
        let seen = walk.levels[0].stat_at(&name).expect("stat");
        (walk, name, seen)
    }

    /// The file `name` of the root as the walk saw it.
    fn seen_file(walk: &HostWalk, name: &CString, seen: libc::stat, host: &Path) -> SeenFile {
        SeenFile {
            parent: Arc::clone(&walk.levels[0].fd),
            name: name.clone(),
            seen,
            host: host.to_path_buf(),
        }
    }

    #[test]
    fn a_directory_swapped_for_a_link_after_it_was_seen_is_never_followed() {
        let dir = scratch("swap");
        let outside = scratch("swap-outside");
        fs::write(outside.join("secret"), b"outside").expect("secret");
        fs::create_dir(dir.join("a")).expect("a");
        let (walk, name, seen) = seen_in(&dir, "a");
        fs::rename(dir.join("a"), dir.join("a.moved")).expect("moved");
        std::os::unix::fs::symlink(&outside, dir.join("a")).expect("link");
        let Err(refused) = walk.levels[0].open_directory_at(&name, &seen) else {
            panic!("a swapped directory was opened");
        };
        assert!(refused.contains("without following links"), "{refused}");
        // Swapped for another real directory instead: not the one seen.
        fs::remove_file(dir.join("a")).expect("unlink");
        fs::create_dir(dir.join("a")).expect("another a");
        let Err(refused) = walk.levels[0].open_directory_at(&name, &seen) else {
            panic!("a swapped directory was opened");
        };
        assert!(refused.contains("was replaced"), "{refused}");
        fs::remove_dir_all(&dir).ok();
        fs::remove_dir_all(&outside).ok();
    }

    #[test]
    fn a_fifo_swapped_in_for_a_file_is_refused_at_once() {
        let dir = scratch("fifo");
        fs::write(dir.join("f"), b"abc").expect("file");
        let (walk, name, seen) = seen_in(&dir, "f");
        fs::remove_file(dir.join("f")).expect("unlink");
        mkfifo(&dir.join("f"));
        // Opening a FIFO without a writer would block without O_NONBLOCK: this returns at once.
        let Err(error) = seen_file(&walk, &name, seen, &dir.join("f")).open() else {
            panic!("a FIFO was opened as a file");
        };
        assert!(error.to_string().contains("not a regular file"), "{error}");
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_file_replaced_resized_truncated_or_grown_is_refused() {
        let dir = scratch("replaced");
        let host = dir.join("f");
        fs::write(&host, b"abcdef").expect("file");
        let (walk, name, seen) = seen_in(&dir, "f");
        let file = seen_file(&walk, &name, seen, &host);
        let open = || file.open();
        fs::write(&host, b"abcdefg").expect("grown");
        let Err(error) = open() else {
            panic!("resized: opened")
        };
        assert!(error.to_string().contains("changed size"), "{error}");
        fs::write(&host, b"abcdef").expect("back");
        // Truncated and grown after it was opened and checked.
        let mut file = open().expect("opened");
        assert_eq!(file.size(), 6);
        fs::write(&host, b"ab").expect("truncated");
        let Err(error) = file.read_chunk(64) else {
            panic!("truncated: read")
        };
        assert!(error.to_string().contains("truncated"), "{error}");
        fs::write(&host, b"abcdef").expect("back");
        let mut file = open().expect("opened");
        assert_eq!(
            file.read_chunk(64).expect("read").as_deref(),
            Some(&b"abcdef"[..])
        );
        fs::write(&host, b"abcdefgh").expect("grown");
        let Err(error) = file.read_chunk(64) else {
            panic!("grown: read")
        };
        assert!(error.to_string().contains("grew"), "{error}");
        // Made while the original still holds its inode, so the inode cannot be reused.
        fs::write(dir.join("other"), b"abcdef").expect("other");
        let keep = File::open(&host).expect("hold the original's inode");
        fs::rename(dir.join("other"), &host).expect("replaced");
        let Err(error) = open() else {
            panic!("replaced: opened")
        };
        assert!(error.to_string().contains("was replaced"), "{error}");
        drop(keep);
        fs::remove_dir_all(&dir).ok();
    }
}
