//! The framed protocol between the host and the guest supervisor (the static helper as a
//! sandbox's process supervisor): one connection carries every command's stdin, stdout, stderr,
//! signals and exit receipt, each frame naming its command by channel, so a command costs a
//! frame rather than an engine round trip.
//!
//! A frame is a 12-byte header (`frame.rs`) and a payload of at most `MAX_PAYLOAD` bytes; a
//! message (`message.rs`) is what a frame's kind and payload mean. The decoder (`decoder.rs`)
//! takes the connection's bytes in whatever pieces they arrive; a reader that pushes what it
//! asks for (`wanted`) holds one frame at most.
//!
//! Invariants:
//! - decoding never panics, and a forged length or count never makes it reserve memory the
//!   bytes it was given do not hold;
//! - every malformed header or payload is a `FrameError` naming what was wrong;
//! - `encode` of a decoded message gives back the frame's exact bytes (one encoding per message).

mod decoder;
mod file;
mod frame;
mod message;
mod wire;

pub use decoder::Decoder;
pub use file::{FileAnswer, FileKind, FileOp, FileRequest, Root, COMPONENT_MAX};
pub use frame::{Frame, FrameError, Kind, HEADER_LEN, MAX_PAYLOAD, VERSION};
pub use message::{
    encode, output_prefix, Exit, Message, Signal, Spawn, Stream, OUTPUT_AFTER_EXIT_MS,
    OUTPUT_PREFIX_LEN, SPAWN_FAILED_CWD, STDIN_WINDOW,
};

#[cfg(test)]
mod tests;
