//! File requests: a path is a root and its components, opened one component at a time below
//! the root's descriptor with `O_NOFOLLOW`, so no link (there before or swapped in meanwhile)
//! and no `..` ever leads outside the root. A link or a non-directory on the way is a refusal
//! naming the component; a missing component is `Absent`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use session_frames::{FileAnswer, FileKind, FileOp, FileRequest, Message, Root};

use crate::fs::{names_in, open_at, stat_at};

/// The roots' descriptors, in `Root::ALL`'s order, opened once at the supervisor's start.
pub struct Roots(Vec<OwnedFd>);

/// What a request comes to: its answer frames now, or a file to read on the host's credit.
pub enum Outcome {
    Answer(Vec<Message>),
    Read(OwnedFd),
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

/// Answers `request` below `roots`.
pub fn answer(roots: &Roots, request: &FileRequest) -> Outcome {
    let root = roots.root(request.root);
    let Some((last, parents)) = request.path.split_last() else {
        return answer_root(root, request.op);
    };
    // Each parent opened below the one before, never following a link.
    let mut dir: Option<OwnedFd> = None;
    for (i, component) in parents.iter().enumerate() {
        let base = dir.as_ref().unwrap_or(root);
        match open_at(base, component, libc::O_RDONLY | libc::O_DIRECTORY) {
            Ok(Ok(next)) => dir = Some(next),
            Ok(Err(errno)) => return refusal(base, errno, &request.path, i),
            Err(error) => return failed(0, true, failure_text(error)),
        }
    }
    let dir = dir.as_ref().unwrap_or(root);
    let at = request.path.len() - 1;
    match request.op {
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
        FileOp::Read { .. } => failed(libc::EISDIR, false, "the root is a directory".into()),
    }
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
