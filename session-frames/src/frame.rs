//! The frame header: `kind` (1 byte), `VERSION` (1 byte), flags (2 bytes, zero), the channel (4
//! bytes) and the payload's length (4 bytes), big-endian.

use std::fmt;

pub const HEADER_LEN: usize = 12;
/// The largest payload a frame carries: larger output or stdin is split into several frames.
pub const MAX_PAYLOAD: usize = 1 << 20;
pub const VERSION: u8 = 1;

/// What a frame is. Host to supervisor below `0x80`, supervisor to host from `0x80` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Spawn = 0x01,
    Stdin = 0x02,
    StdinEnd = 0x03,
    Signal = 0x04,
    Credit = 0x05,
    File = 0x10,
    FileChunk = 0x11,
    FileCommit = 0x12,
    FileAbort = 0x13,
    Spawned = 0x81,
    SpawnFailed = 0x82,
    Output = 0x83,
    OutputEnd = 0x84,
    Exit = 0x85,
    Refused = 0x86,
    StdinTaken = 0x87,
    FileBytes = 0x88,
    FileEntries = 0x89,
    FileDone = 0x8a,
    FileFailed = 0x8b,
}

impl Kind {
    pub fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            0x01 => Kind::Spawn,
            0x02 => Kind::Stdin,
            0x03 => Kind::StdinEnd,
            0x04 => Kind::Signal,
            0x05 => Kind::Credit,
            0x10 => Kind::File,
            0x11 => Kind::FileChunk,
            0x12 => Kind::FileCommit,
            0x13 => Kind::FileAbort,
            0x81 => Kind::Spawned,
            0x82 => Kind::SpawnFailed,
            0x83 => Kind::Output,
            0x84 => Kind::OutputEnd,
            0x85 => Kind::Exit,
            0x86 => Kind::Refused,
            0x87 => Kind::StdinTaken,
            0x88 => Kind::FileBytes,
            0x89 => Kind::FileEntries,
            0x8a => Kind::FileDone,
            0x8b => Kind::FileFailed,
            _ => return None,
        })
    }
}

/// One frame: its kind, the command it belongs to (0: the supervisor itself), its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub channel: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The frame's bytes, appended to `out`. A payload past `MAX_PAYLOAD` is the caller's bug.
    pub fn write(&self, out: &mut Vec<u8>) {
        debug_assert!(self.payload.len() <= MAX_PAYLOAD);
        out.reserve(HEADER_LEN + self.payload.len());
        out.extend_from_slice(&header(self.kind, self.channel, self.payload.len()));
        out.extend_from_slice(&self.payload);
    }
}

/// The header of a frame of `kind` on `channel` whose payload is `payload_len` bytes (at most
/// `MAX_PAYLOAD`).
pub(crate) fn header(kind: Kind, channel: u32, payload_len: usize) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0] = kind as u8;
    header[1] = VERSION;
    header[4..8].copy_from_slice(&channel.to_be_bytes());
    header[8..12].copy_from_slice(&(payload_len as u32).to_be_bytes());
    header
}

/// What was wrong with a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    UnknownKind(u8),
    Version(u8),
    Flags(u16),
    TooLong {
        len: u64,
        max: usize,
    },
    /// A payload that does not say what its kind says: `what` names the field.
    Payload {
        kind: Kind,
        what: &'static str,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownKind(byte) => write!(f, "unknown frame kind 0x{byte:02x}"),
            FrameError::Version(v) => write!(f, "frame version {v}, this side speaks {VERSION}"),
            FrameError::Flags(flags) => write!(f, "frame flags 0x{flags:04x} are not zero"),
            FrameError::TooLong { len, max } => {
                write!(
                    f,
                    "a frame payload of {len} bytes is past the {max}-byte bound"
                )
            }
            FrameError::Payload { kind, what } => {
                write!(f, "a {kind:?} frame's {what} is malformed")
            }
        }
    }
}

impl std::error::Error for FrameError {}
