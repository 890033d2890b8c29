//! File requests over the link: a path as a root and its components (never a string the
//! supervisor would have to parse), and the answers.

use crate::frame::FrameError;
use crate::wire::{put_bytes, put_u32, Cursor};

/// Where a path starts: the guest's workspace, its HOME, its TMPDIR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    Workspace = 0,
    Home = 1,
    Tmp = 2,
}

impl Root {
    pub const ALL: [Root; 3] = [Root::Workspace, Root::Home, Root::Tmp];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    /// What the path is, without following a link.
    Stat,
    /// The directory's entries (`FileEntries` frames, then `FileDone(Listed)`).
    List,
    /// The regular file's bytes (`FileBytes` frames on the host's credit, then
    /// `FileDone(ReadEnd)`); a file larger than `max` fails instead.
    Read { max: u64 },
    /// Replaces the file whole or not at all: the host sends `FileChunk` frames (acknowledged
    /// with `StdinTaken`, within `STDIN_WINDOW`), then `FileCommit` (or `FileAbort`); missing
    /// parents are created. `FileDone(Written)`.
    Write { mode: u32 },
    /// `FileDone(Done)`; `recursive`: missing parents are created and an existing directory is
    /// no failure.
    Mkdir { recursive: bool },
    /// `FileDone(Removed(was_there))`; a directory only when `recursive` or empty. A link is
    /// removed itself, never what it points to.
    Remove { recursive: bool },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRequest {
    pub op: FileOp,
    pub root: Root,
    /// Components below the root: each non-empty, without `/` or NUL, never `.` or `..`, at
    /// most 255 bytes. Empty: the root itself.
    pub path: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File = 0,
    Directory = 1,
    Symlink = 2,
    Other = 3,
}

impl FileKind {
    fn read(c: &mut Cursor<'_>) -> Result<FileKind, FrameError> {
        match c.u8("kind")? {
            0 => Ok(FileKind::File),
            1 => Ok(FileKind::Directory),
            2 => Ok(FileKind::Symlink),
            3 => Ok(FileKind::Other),
            _ => Err(c.bad("kind")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAnswer {
    /// Nothing is at the path (or a parent component is missing).
    Absent,
    Stat {
        kind: FileKind,
        size: u64,
        mode: u32,
        mtime_ms: i64,
    },
    /// Every entry was sent.
    Listed,
    /// Every byte was sent.
    ReadEnd,
    /// The file was replaced (renamed into place).
    Written,
    /// The directory exists.
    Done,
    /// Whether something was there to remove.
    Removed(bool),
}

/// The longest path component.
pub const COMPONENT_MAX: usize = 255;

fn flag(c: &mut Cursor<'_>, what: &'static str) -> Result<bool, FrameError> {
    match c.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(c.bad(what)),
    }
}

pub(crate) fn read_request(c: &mut Cursor<'_>) -> Result<FileRequest, FrameError> {
    let op = match c.u8("op")? {
        0 => FileOp::Stat,
        1 => FileOp::List,
        2 => FileOp::Read { max: c.u64("max")? },
        3 => FileOp::Write {
            mode: c.u32("mode")?,
        },
        4 => FileOp::Mkdir {
            recursive: flag(c, "recursive")?,
        },
        5 => FileOp::Remove {
            recursive: flag(c, "recursive")?,
        },
        _ => return Err(c.bad("op")),
    };
    let root = match c.u8("root")? {
        0 => Root::Workspace,
        1 => Root::Home,
        2 => Root::Tmp,
        _ => return Err(c.bad("root")),
    };
    let count = c.count(5, "path")?;
    let mut path = Vec::with_capacity(count);
    for _ in 0..count {
        let component = c.c_bytes("path")?;
        if component.is_empty()
            || component.len() > COMPONENT_MAX
            || component.contains(&b'/')
            || component == b"."
            || component == b".."
        {
            return Err(c.bad("path"));
        }
        path.push(component);
    }
    Ok(FileRequest { op, root, path })
}

pub(crate) fn put_request(out: &mut Vec<u8>, request: &FileRequest) {
    match request.op {
        FileOp::Stat => out.push(0),
        FileOp::List => out.push(1),
        FileOp::Read { max } => {
            out.push(2);
            out.extend_from_slice(&max.to_be_bytes());
        }
        FileOp::Write { mode } => {
            out.push(3);
            put_u32(out, mode);
        }
        FileOp::Mkdir { recursive } => {
            out.push(4);
            out.push(u8::from(recursive));
        }
        FileOp::Remove { recursive } => {
            out.push(5);
            out.push(u8::from(recursive));
        }
    }
    out.push(request.root as u8);
    put_u32(out, request.path.len() as u32);
    for component in &request.path {
        put_bytes(out, component);
    }
}

pub(crate) fn read_entries(c: &mut Cursor<'_>) -> Result<Vec<(FileKind, Vec<u8>)>, FrameError> {
    let count = c.count(5, "entries")?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = FileKind::read(c)?;
        let name = c.c_bytes("entries")?;
        if name.is_empty() || name.contains(&b'/') {
            return Err(c.bad("entries"));
        }
        entries.push((kind, name));
    }
    Ok(entries)
}

pub(crate) fn put_entries(out: &mut Vec<u8>, entries: &[(FileKind, Vec<u8>)]) {
    put_u32(out, entries.len() as u32);
    for (kind, name) in entries {
        out.push(*kind as u8);
        put_bytes(out, name);
    }
}

pub(crate) fn read_answer(c: &mut Cursor<'_>) -> Result<FileAnswer, FrameError> {
    Ok(match c.u8("answer")? {
        0 => FileAnswer::Absent,
        1 => FileAnswer::Stat {
            kind: FileKind::read(c)?,
            size: c.u64("size")?,
            mode: c.u32("mode")?,
            mtime_ms: c.u64("mtime")? as i64,
        },
        2 => FileAnswer::Listed,
        3 => FileAnswer::ReadEnd,
        4 => FileAnswer::Written,
        5 => FileAnswer::Done,
        6 => FileAnswer::Removed(flag(c, "removed")?),
        _ => return Err(c.bad("answer")),
    })
}

pub(crate) fn put_answer(out: &mut Vec<u8>, answer: &FileAnswer) {
    match answer {
        FileAnswer::Absent => out.push(0),
        FileAnswer::Stat {
            kind,
            size,
            mode,
            mtime_ms,
        } => {
            out.push(1);
            out.push(*kind as u8);
            out.extend_from_slice(&size.to_be_bytes());
            put_u32(out, *mode);
            out.extend_from_slice(&mtime_ms.to_be_bytes());
        }
        FileAnswer::Listed => out.push(2),
        FileAnswer::ReadEnd => out.push(3),
        FileAnswer::Written => out.push(4),
        FileAnswer::Done => out.push(5),
        FileAnswer::Removed(was) => {
            out.push(6);
            out.push(u8::from(*was));
        }
    }
}
