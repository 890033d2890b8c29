//! The incremental decoder: bytes in whatever pieces they arrive, frames out in order.

use crate::frame::{Frame, FrameError, Kind, HEADER_LEN, MAX_PAYLOAD, VERSION};
use crate::message::Message;

/// Holds what `push` was given until `next_frame` hands it out; a caller that pushes at most
/// `wanted()` bytes at a time keeps that to one frame (a header and `MAX_PAYLOAD` bytes).
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already handed out.
    start: usize,
    /// Set once a frame was malformed: the connection carries nothing trustworthy after it.
    failed: Option<FrameError>,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many more bytes `next_frame` needs before it can make progress (at least 1): a
    /// caller that reads from a connection asks for at most this much, so the decoder holds one
    /// frame at most.
    pub fn wanted(&self) -> usize {
        let held = &self.buffer[self.start..];
        if held.len() < HEADER_LEN {
            return HEADER_LEN - held.len();
        }
        let len = payload_len(held);
        (HEADER_LEN + len.min(MAX_PAYLOAD))
            .saturating_sub(held.len())
            .max(1)
    }

    /// Adds bytes the connection delivered.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start * 2 >= self.buffer.len() {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole frame, `None` until its bytes are all there, or why the stream is
    /// malformed (then every later call says the same).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        self.next_with(|kind, channel, payload| {
            Ok(Frame {
                kind,
                channel,
                payload: payload.to_vec(),
            })
        })
    }

    /// The next whole frame decoded as its channel and message, read where the decoder holds it
    /// (no copy of the payload but the message's own), `None` until its bytes are all there,
    /// or why the stream or the message is malformed (then every later call says the same).
    pub fn next_message(&mut self) -> Result<Option<(u32, Message)>, FrameError> {
        self.next_with(|kind, channel, payload| {
            Message::decode_payload(kind, payload).map(|message| (channel, message))
        })
    }

    /// Hands the next whole frame's kind, channel and payload to `read`, then drops its bytes.
    fn next_with<T>(
        &mut self,
        read: impl FnOnce(Kind, u32, &[u8]) -> Result<T, FrameError>,
    ) -> Result<Option<T>, FrameError> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        let held = &self.buffer[self.start..];
        if held.len() < HEADER_LEN {
            return Ok(None);
        }
        let (kind, channel, len) = match check_header(held) {
            Ok(header) => header,
            Err(error) => {
                self.failed = Some(error.clone());
                return Err(error);
            }
        };
        if held.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let read = read(kind, channel, &held[HEADER_LEN..HEADER_LEN + len]);
        self.start += HEADER_LEN + len;
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
        match read {
            Ok(read) => Ok(Some(read)),
            Err(error) => {
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Bytes given and not handed out yet (a connection that ends with some ended mid-frame).
    pub fn pending(&self) -> usize {
        self.buffer.len() - self.start
    }
}

fn payload_len(header: &[u8]) -> usize {
    let len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    usize::try_from(len).unwrap_or(usize::MAX)
}

fn check_header(header: &[u8]) -> Result<(Kind, u32, usize), FrameError> {
    let kind = Kind::from_byte(header[0]).ok_or(FrameError::UnknownKind(header[0]))?;
    if header[1] != VERSION {
        return Err(FrameError::Version(header[1]));
    }
    let flags = u16::from_be_bytes([header[2], header[3]]);
    if flags != 0 {
        return Err(FrameError::Flags(flags));
    }
    let channel = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let len = payload_len(header);
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLong {
            len: len as u64,
            max: MAX_PAYLOAD,
        });
    }
    Ok((kind, channel, len))
}
