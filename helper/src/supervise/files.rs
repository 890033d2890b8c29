//! File requests: a path is a root and its components, opened one component at a time below
//! the root's descriptor with `O_NOFOLLOW`, so no link (there before or swapped in meanwhile)
//! and no `..` ever leads outside the root. A link or a non-directory on the way is a refusal
//! naming the component; a missing component is `Absent`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use session_frames::{FileAnswer, FileKind, FileOp, FileRequest, Message, Root};

use crate::fs::{names_in, open_at, stat_at};

/// The roots' descriptors, in `Root::ALL`'s order, opened once at the supervisor's start.
pub struct Roots(Vec<OwnedFd>);

/// What a request comes to: its answer frames now, a file to read on the host's credit, or
/// a file being written from the host's chunks.
pub enum Outcome {
    Answer(Vec<Message>),
    Read(OwnedFd),
    Write(Writing),
}

/// A file being written: a temporary file created exclusively beside its final name, renamed
/// into place on commit, removed otherwise (also when dropped: the host went away).
pub struct Writing {
    dir: OwnedFd,
    temp: CString,
    name: CString,
    file: OwnedFd,
    mode: u32,
    placed: bool,
}

impl Writing {
    /// Appends `bytes`; `Err` with what failed.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), Message> {
        while !bytes.is_empty() {
            // SAFETY: writes from a live slice of its length to a file this owns.
            let n =
                unsafe { libc::write(self.file.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(io_failure(&error, "writing the file failed"));
            }
            bytes = &bytes[n as usize..];
        }
        Ok(())
    }

    /// Gives the file its mode and renames it into place (whole, at once).
    pub fn commit(mut self) -> Message {
        // SAFETY: fchmod on a file this owns.
        if unsafe { libc::fchmod(self.file.as_raw_fd(), self.mode as libc::mode_t) } != 0 {
            return io_failure(
                &std::io::Error::last_os_error(),
                "setting the file's mode failed",
            );
        }
        // SAFETY: both names are NUL-terminated and relative to the same directory this owns.
        let renamed = unsafe {
            libc::renameat(
                self.dir.as_raw_fd(),
                self.temp.as_ptr(),
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
            )
        };
        if renamed != 0 {
            return io_failure(
                &std::io::Error::last_os_error(),
                "putting the file in place failed",
            );
        }
        self.placed = true;
        Message::FileDone(FileAnswer::Written)
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        if !self.placed {
            // SAFETY: unlinks the temporary name (never followed) in the directory this owns.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.temp.as_ptr(), 0) };
        }
    }
}

fn io_failure(error: &std::io::Error, what: &str) -> Message {
    Message::FileFailed {
        errno: error.raw_os_error().unwrap_or(0),
        refused: false,
        message: format!("{what}: {error}").into_bytes(),
    }
}

/// Entries per `FileEntries` frame.
const ENTRIES_PER_FRAME: usize = 1_024;

impl Roots {
    /// Opens each root (an absolute path) without following a link at any component.
    pub fn open(paths: &[String]) -> Result<Roots, String> {
        if paths.len() != Root::ALL.len() {
            return Err("--roots takes the workspace, HOME and TMPDIR".into());
        }
        let mut fds = Vec::new();
        for path in paths {
            let components: Vec<&[u8]> = path
                .as_bytes()
                .split(|b| *b == b'/')
                .filter(|c| !c.is_empty())
                .collect();
            if !path.starts_with('/') || components.iter().any(|c| *c == b"." || *c == b"..") {
                return Err(format!("the root {path:?} is not a plain absolute path"));
            }
            let mut dir = open_dir(c"/")?;
            for component in components {
                dir = match open_at(&dir, component, libc::O_RDONLY | libc::O_DIRECTORY) {
                    Ok(Ok(next)) => next,
                    _ => return Err(format!("the root {path:?} cannot be opened as a directory")),
                };
            }
            fds.push(dir);
        }
        Ok(Roots(fds))
    }

    fn root(&self, root: Root) -> &OwnedFd {
        &self.0[root as usize]
    }
}

fn open_dir(path: &std::ffi::CStr) -> Result<OwnedFd, String> {
    // SAFETY: `path` is NUL-terminated; the descriptor returned is owned below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "opening / failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn failure_text(failure: crate::failure::Failure) -> String {
    match failure {
        crate::failure::Failure::Io(message) | crate::failure::Failure::Refused(message) => message,
    }
}

fn failed(errno: i32, refused: bool, message: String) -> Outcome {
    Outcome::Answer(vec![Message::FileFailed {
        errno,
        refused,
        message: message.into_bytes(),
    }])
}

fn done(answer: FileAnswer) -> Outcome {
    Outcome::Answer(vec![Message::FileDone(answer)])
}

/// The path as the host's caller would read it below its root.
fn shown(path: &[Vec<u8>]) -> String {
    let joined: Vec<String> = path
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    joined.join("/")
}

fn kind_of(stat: &libc::stat) -> FileKind {
    match stat.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::File,
        libc::S_IFDIR => FileKind::Directory,
        libc::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// Where a component's open below `base` failed, as an answer. A link is never followed: the
/// kernel says `ELOOP` for one, or `ENOTDIR` when a directory was asked for, so what is there is
/// looked at (without following) to name it.
fn refusal(base: &OwnedFd, errno: i32, path: &[Vec<u8>], upto: usize) -> Outcome {
    let at = shown(&path[..=upto]);
    let is_link = || matches!(stat_at(base, &path[upto]), Ok(Ok(stat)) if kind_of(&stat) == FileKind::Symlink);
    match errno {
        libc::ENOENT => done(FileAnswer::Absent),
        libc::ELOOP | libc::ENOTDIR if is_link() => failed(
            errno,
            true,
            format!("{at} is a symbolic link, which is never followed"),
        ),
        libc::ENOTDIR => failed(errno, true, format!("{at} is not a directory")),
        _ => failed(
            errno,
            false,
            format!("{at}: {}", std::io::Error::from_raw_os_error(errno)),
        ),
    }
}

/// Opens every parent of `path` below `root`, each below the one before, never following a
/// link; `create`: a missing one is made (mode 0755). `None`: the root itself is the parent.
fn parents(root: &OwnedFd, path: &[Vec<u8>], create: bool) -> Result<Option<OwnedFd>, Outcome> {
    let mut dir: Option<OwnedFd> = None;
    for (i, component) in path[..path.len() - 1].iter().enumerate() {
        let base = dir.as_ref().unwrap_or(root);
        let mut opened = open_at(base, component, libc::O_RDONLY | libc::O_DIRECTORY);
        if create && matches!(opened, Ok(Err(libc::ENOENT))) {
            make_dir(base, component).map_err(|errno| refusal(base, errno, path, i))?;
            opened = open_at(base, component, libc::O_RDONLY | libc::O_DIRECTORY);
        }
        match opened {
            Ok(Ok(next)) => dir = Some(next),
            Ok(Err(errno)) => return Err(refusal(base, errno, path, i)),
            Err(error) => return Err(failed(0, true, failure_text(error))),
        }
    }
    Ok(dir)
}

/// mkdirat (mode 0755); one made meanwhile by someone else is no failure.
fn make_dir(dir: &OwnedFd, name: &[u8]) -> Result<(), i32> {
    let name = CString::new(name).map_err(|_| libc::EINVAL)?;
    // SAFETY: `name` is NUL-terminated, relative to a directory this borrows.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } != 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno != libc::EEXIST {
            return Err(errno);
        }
    }
    Ok(())
}

/// Answers `request` below `roots`.
pub fn answer(roots: &Roots, request: &FileRequest, channel: u32) -> Outcome {
    let root = roots.root(request.root);
    let Some(last) = request.path.last() else {
        return answer_root(root, request.op);
    };
    let create = matches!(
        request.op,
        FileOp::Write { .. } | FileOp::Mkdir { recursive: true }
    );
    let dir = match parents(root, &request.path, create) {
        Ok(dir) => dir,
        Err(outcome) => {
            // A parent missing is nothing to remove.
            return match (request.op, outcome) {
                (FileOp::Remove { .. }, Outcome::Answer(m))
                    if m == [Message::FileDone(FileAnswer::Absent)] =>
                {
                    done(FileAnswer::Removed(false))
                }
                (FileOp::Mkdir { .. }, Outcome::Answer(m))
                    if m == [Message::FileDone(FileAnswer::Absent)] =>
                {
                    failed(
                        libc::ENOENT,
                        false,
                        format!("a parent of {} is missing", shown(&request.path)),
                    )
                }
                (_, outcome) => outcome,
            };
        }
    };
    let dir_owned = dir;
    let dir = dir_owned.as_ref().unwrap_or(root);
    let at = request.path.len() - 1;
    match request.op {
        FileOp::Write { mode } => write(dir, last, mode, channel, &request.path),
        FileOp::Mkdir { recursive } => mkdir(dir, last, recursive, &request.path),
        FileOp::Remove { recursive } => remove(dir, last, recursive, &request.path),
        FileOp::Stat => match stat_at(dir, last) {
            Ok(Ok(stat)) => done(stat_answer(&stat)),
            Ok(Err(errno)) => refusal(dir, errno, &request.path, at),
            Err(error) => failed(0, true, failure_text(error)),
        },
        FileOp::List => match open_at(dir, last, libc::O_RDONLY | libc::O_DIRECTORY) {
            Ok(Ok(listed)) => list(&listed, &shown(&request.path)),
            Ok(Err(errno)) => refusal(dir, errno, &request.path, at),
            Err(error) => failed(0, true, failure_text(error)),
        },
        FileOp::Read { max } => {
            // Non-blocking: a FIFO put there never holds the supervisor.
            match open_at(dir, last, libc::O_RDONLY | libc::O_NONBLOCK) {
                Ok(Ok(file)) => read(file, max, &shown(&request.path)),
                Ok(Err(errno)) => refusal(dir, errno, &request.path, at),
                Err(error) => failed(0, true, failure_text(error)),
            }
        }
    }
}

fn answer_root(root: &OwnedFd, op: FileOp) -> Outcome {
    match op {
        FileOp::Stat => match fstat(root) {
            Ok(stat) => done(stat_answer(&stat)),
            Err(errno) => failed(errno, false, "the root".into()),
        },
        FileOp::List => list(root, "the root"),
        FileOp::Read { .. } | FileOp::Write { .. } => {
            failed(libc::EISDIR, false, "the root is a directory".into())
        }
        FileOp::Mkdir { .. } => done(FileAnswer::Done),
        FileOp::Remove { .. } => failed(libc::EBUSY, true, "a root is never removed".into()),
    }
}

fn write(dir: &OwnedFd, name: &[u8], mode: u32, channel: u32, path: &[Vec<u8>]) -> Outcome {
    let temp = format!(".native-sandbox-write-{}-{channel}", std::process::id());
    let (Ok(temp), Ok(final_name)) = (CString::new(temp), CString::new(name)) else {
        return failed(libc::EINVAL, true, "a name holds a NUL byte".into());
    };
    // What is at the final name now: a directory or a link is never replaced.
    match stat_at(dir, name) {
        Ok(Ok(stat)) if kind_of(&stat) == FileKind::Directory => {
            return failed(
                libc::EISDIR,
                false,
                format!("{} is a directory", shown(path)),
            )
        }
        Ok(Ok(stat)) if kind_of(&stat) == FileKind::Symlink => {
            return failed(
                libc::ELOOP,
                true,
                format!(
                    "{} is a symbolic link, which is never followed",
                    shown(path)
                ),
            )
        }
        _ => {}
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
    let file = match open_at(dir, temp.as_bytes(), flags) {
        Ok(Ok(file)) => file,
        Ok(Err(errno)) => {
            return failed(
                errno,
                false,
                format!(
                    "creating {} failed: {}",
                    shown(path),
                    std::io::Error::from_raw_os_error(errno)
                ),
            )
        }
        Err(error) => return failed(0, true, failure_text(error)),
    };
    let Ok(dir) = dup(dir) else {
        return failed(0, false, "duplicating a descriptor failed".into());
    };
    Outcome::Write(Writing {
        dir,
        temp,
        name: final_name,
        file,
        mode: mode & 0o7777,
        placed: false,
    })
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, i32> {
    // SAFETY: duplicates a descriptor this borrows; the duplicate is owned below.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `fcntl` just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

fn mkdir(dir: &OwnedFd, name: &[u8], recursive: bool, path: &[Vec<u8>]) -> Outcome {
    let Ok(c_name) = CString::new(name) else {
        return failed(libc::EINVAL, true, "a name holds a NUL byte".into());
    };
    // SAFETY: `c_name` is NUL-terminated, relative to a directory this borrows.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), 0o755) } == 0 {
        return done(FileAnswer::Done);
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let kind = match stat_at(dir, name) {
        Ok(Ok(stat)) => Some(kind_of(&stat)),
        _ => None,
    };
    match (errno, kind) {
        (libc::EEXIST, Some(FileKind::Directory)) if recursive => done(FileAnswer::Done),
        (libc::EEXIST, Some(FileKind::Symlink)) => failed(
            libc::ELOOP,
            true,
            format!(
                "{} is a symbolic link, which is never followed",
                shown(path)
            ),
        ),
        (libc::EEXIST, _) => failed(libc::EEXIST, false, format!("{} exists", shown(path))),
        _ => failed(
            errno,
            false,
            format!(
                "making {} failed: {}",
                shown(path),
                std::io::Error::from_raw_os_error(errno)
            ),
        ),
    }
}

fn remove(dir: &OwnedFd, name: &[u8], recursive: bool, path: &[Vec<u8>]) -> Outcome {
    let Ok(c_name) = CString::new(name) else {
        return failed(libc::EINVAL, true, "a name holds a NUL byte".into());
    };
    let kind = match stat_at(dir, name) {
        Ok(Ok(stat)) => kind_of(&stat),
        Ok(Err(libc::ENOENT)) => return done(FileAnswer::Removed(false)),
        Ok(Err(errno)) => return refusal(dir, errno, path, path.len() - 1),
        Err(error) => return failed(0, true, failure_text(error)),
    };
    let removed = if kind == FileKind::Directory {
        if recursive {
            match open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY) {
                Ok(Ok(inner)) => {
                    if let Err(errno) = empty_tree(&inner) {
                        return failed(
                            errno,
                            false,
                            format!(
                                "removing what is in {} failed: {}",
                                shown(path),
                                std::io::Error::from_raw_os_error(errno)
                            ),
                        );
                    }
                }
                Ok(Err(errno)) => return refusal(dir, errno, path, path.len() - 1),
                Err(error) => return failed(0, true, failure_text(error)),
            }
        }
        // SAFETY: removes the named directory (never followed) in a directory this borrows.
        unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), libc::AT_REMOVEDIR) }
    } else {
        // SAFETY: removes the named entry itself (a link is never followed).
        unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), 0) }
    };
    if removed != 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno == libc::ENOENT {
            return done(FileAnswer::Removed(false));
        }
        return failed(
            errno,
            false,
            format!(
                "removing {} failed: {}",
                shown(path),
                std::io::Error::from_raw_os_error(errno)
            ),
        );
    }
    done(FileAnswer::Removed(true))
}

/// Removes everything in `dir`, each directory opened below its parent without following.
fn empty_tree(dir: &OwnedFd) -> Result<(), i32> {
    let names = names_in(dir, b"").map_err(|_| libc::EIO)?;
    for name in names {
        let c_name = CString::new(name.as_slice()).map_err(|_| libc::EINVAL)?;
        let is_dir =
            matches!(stat_at(dir, &name), Ok(Ok(stat)) if kind_of(&stat) == FileKind::Directory);
        if is_dir {
            match open_at(dir, &name, libc::O_RDONLY | libc::O_DIRECTORY) {
                Ok(Ok(inner)) => empty_tree(&inner)?,
                Ok(Err(errno)) => return Err(errno),
                Err(_) => return Err(libc::EINVAL),
            }
        }
        let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: removes the named entry (never followed) in a directory this borrows.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), flags) } != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno != libc::ENOENT {
                return Err(errno);
            }
        }
    }
    Ok(())
}

fn fstat(fd: &OwnedFd) -> Result<libc::stat, i32> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `stat` is a valid place for the kernel to write.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    Ok(stat)
}

fn stat_answer(stat: &libc::stat) -> FileAnswer {
    FileAnswer::Stat {
        kind: kind_of(stat),
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mode: stat.st_mode & 0o7777,
        mtime_ms: stat.st_mtime.saturating_mul(1_000) + stat.st_mtime_nsec / 1_000_000,
    }
}

fn list(dir: &OwnedFd, shown: &str) -> Outcome {
    let names = match names_in(dir, shown.as_bytes()) {
        Ok(names) => names,
        Err(error) => return failed(0, false, failure_text(error)),
    };
    let mut messages = Vec::new();
    let mut entries = Vec::new();
    for name in names {
        // An entry gone meanwhile is left out.
        if let Ok(Ok(stat)) = stat_at(dir, &name) {
            entries.push((kind_of(&stat), name));
        }
        if entries.len() == ENTRIES_PER_FRAME {
            messages.push(Message::FileEntries(std::mem::take(&mut entries)));
        }
    }
    if !entries.is_empty() {
        messages.push(Message::FileEntries(entries));
    }
    messages.push(Message::FileDone(FileAnswer::Listed));
    Outcome::Answer(messages)
}

fn read(file: OwnedFd, max: u64, shown: &str) -> Outcome {
    let stat = match fstat(&file) {
        Ok(stat) => stat,
        Err(errno) => return failed(errno, false, shown.to_owned()),
    };
    if kind_of(&stat) != FileKind::File {
        return failed(
            libc::EISDIR,
            false,
            format!("{shown} is not a regular file"),
        );
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max {
        return failed(
            libc::EFBIG,
            false,
            format!("{shown} is {size} bytes, past the {max} asked for at most"),
        );
    }
    Outcome::Read(file)
}
