//! The tar framing the addon and its workspace helper share, std only and without `unsafe`:
//! - [`header`]: the 512-byte header block, its fields (octal or GNU base-256 numbers, ustar
//!   names and prefixes), its checksum, and its encoding;
//! - [`pax`]: PAX extended header records, read by their length prefix and written;
//! - [`framer`]: the one incremental state machine every reader of an archive runs: bytes in,
//!   in pieces of any size, events out (an entry's header with its extended headers applied,
//!   body bytes, padding, the end of the archive), never buffering a body;
//! - [`write`]: the header sequences the writers emit (GNU long names, PAX records, the
//!   project's marker entry) and the end of an archive.
//!
//! The framing frames and nothing more: which entry types, names, sizes and modes an archive
//! may hold is for each caller to judge.
#![forbid(unsafe_code)]

pub mod framer;
pub mod header;
pub mod pax;
pub mod write;

pub use framer::{Entry, Error, Event, Fed, Framer, NameSource, Options, Trailer};
pub use header::Header;

/// Bytes in one tar block: a header is one block, and a body is padded with zeros to a whole
/// number of them.
pub const BLOCK: usize = 512;

/// The typeflag of the project's marker entry: the workspace helper's tree archive marks a
/// file whose body the host reads through the engine instead (the marker's body is the file's
/// workspace-relative path), and the host's import archive marks, for the helper, a file whose
/// body the engine writes (no body). A marker stands before its file's extended headers or
/// between them and the file's header, and takes none of them.
pub const MARKER: u8 = b'N';

/// How many zero bytes pad a body of `size` bytes to a whole number of blocks (fewer than
/// `BLOCK`).
pub fn padding(size: u64) -> usize {
    let block = BLOCK as u64;
    ((block - size % block) % block) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_fills_the_last_block_and_only_it() {
        assert_eq!(padding(0), 0);
        assert_eq!(padding(1), 511);
        assert_eq!(padding(512), 0);
        assert_eq!(padding(513), 511);
        assert_eq!(padding(1_000), 24);
        assert_eq!(padding(u64::MAX), 1);
    }
}
