//! The host's side of the guest supervisor (the helper's `--supervise` mode): one framed
//! connection (`session-frames`) carries every command, and each command comes back as the
//! `ProcessChannels` every process runs through (`ProcessIo`: staging, limits, failures), so a
//! command costs a frame, not an engine round trip.
//!
//! Invariants:
//! - what the link holds for a command is bounded by the protocol's windows: at most `CREDIT`
//!   bytes of each output stream (credit is given back only as the command's output stream is
//!   read, in batches (`credit.rs`); a supervisor that sends more breaks the link, it is never
//!   buffered), and at most
//!   `STDIN_WINDOW` bytes of stdin unacknowledged by the supervisor;
//! - a command's exit is its leader's wait status, independent of its output's end;
//! - once the connection ends or fails (the supervisor is gone), every command's spawn, output
//!   and stdin fail with `stream_failure` naming it, and every exit not reported yet is
//!   `Unavailable`: nothing waits for ever.

mod command;
mod credit;
mod files;
mod last_words;
mod link;
mod paths;
mod supervisor_output;

pub use command::{spawn_of, CommandControl};
pub use files::FileStat;
pub use last_words::LastWords;
pub use link::{Link, Spawned};
pub use paths::{guest_path, GuestPath, GuestRoots};
pub use supervisor_output::{frames_of, Chunks};

/// Output bytes of one stream the supervisor may send before the host reads them.
pub const CREDIT: u32 = 512 * 1024;

#[cfg(test)]
mod tests;
