//! The engine's multiplexed attach stream (a container without a terminal): every frame is an
//! 8-byte header (the stream: 0 stdin, 1 stdout, 2 stderr, 3 the engine's own error; three
//! zero bytes; the payload's length as a big-endian `u32`) followed by that many payload bytes.
//!
//! Invariants: bytes are decoded as they arrive, however the connection splits them, so a
//! payload is handed on in the pieces it arrives in and no frame is ever held whole (a frame
//! may announce up to 4 GiB); every stdout and stderr payload byte is handed on once, in order,
//! with its stream (stdin's, which an engine never sends, is skipped); the engine's error, a
//! header the format does not allow, and an end inside a frame fail the decoder for good, after
//! the bytes before them, so nothing is dropped or cut short silently.

use std::ops::Range;

use crate::lifecycle::driver::OutputStream;

pub const HEADER_BYTES: usize = 8;
/// The engine's error message is kept up to this many bytes.
const ENGINE_ERROR_BYTES: usize = 4 * 1_024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame header names stream {0}, which is none of stdin (0), stdout (1), stderr (2) or the engine's error (3)")]
    UnknownStream(u8),
    #[error("a frame header holds {0:?} where its bytes 1 to 3 must be zero")]
    MalformedHeader([u8; 3]),
    #[error("the engine reported an error in the stream: {0}")]
    Engine(String),
    #[error("the stream ended inside a frame header ({0} of its 8 bytes arrived)")]
    EndedInHeader(usize),
    #[error("the stream ended inside a frame: {0} bytes of its payload never arrived")]
    EndedInPayload(usize),
}

/// Where the decoder is: inside a header, or inside a payload (or the engine's error) of
/// `left` more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Header {
        have: usize,
    },
    /// `stream` is `None` for stdin, whose payload (never sent by an engine) is skipped.
    Payload {
        stream: Option<OutputStream>,
        left: usize,
    },
    /// The engine's error, its message gathered (up to `ENGINE_ERROR_BYTES`).
    EngineError {
        left: usize,
    },
}

#[derive(Debug)]
pub struct FrameDecoder {
    header: [u8; HEADER_BYTES],
    position: Position,
    engine_error: Vec<u8>,
    /// Once failed, every later call says so again: nothing after a bad header or the engine's
    /// error is decoded.
    failed: Option<FrameError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self {
            header: [0; HEADER_BYTES],
            position: Position::Header { have: 0 },
            engine_error: Vec::new(),
            failed: None,
        }
    }
}

impl FrameDecoder {
    /// Decodes `input`, the next bytes of the connection: hands every run of payload bytes in
    /// it to `emit`, as its stream and its range in `input`, in order.
    pub fn feed(
        &mut self,
        input: &[u8],
        mut emit: impl FnMut(OutputStream, Range<usize>),
    ) -> Result<(), FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut at = 0;
        while at < input.len() {
            match self.position {
                Position::Header { have } => {
                    let take = (HEADER_BYTES - have).min(input.len() - at);
                    self.header[have..have + take].copy_from_slice(&input[at..at + take]);
                    at += take;
                    self.position = if have + take < HEADER_BYTES {
                        Position::Header { have: have + take }
                    } else {
                        self.payload_position()?
                    };
                }
                Position::EngineError { left } => {
                    let take = left.min(input.len() - at);
                    let room = ENGINE_ERROR_BYTES.saturating_sub(self.engine_error.len());
                    let kept = take.min(room);
                    self.engine_error.extend_from_slice(&input[at..at + kept]);
                    at += take;
                    if take < left {
                        self.position = Position::EngineError { left: left - take };
                    } else {
                        let message = self.engine_message();
                        return Err(self.fail(FrameError::Engine(message)));
                    }
                }
                Position::Payload { stream, left } => {
                    let take = left.min(input.len() - at);
                    if let Some(stream) = stream {
                        emit(stream, at..at + take);
                    }
                    at += take;
                    self.position = if take == left {
                        Position::Header { have: 0 }
                    } else {
                        Position::Payload {
                            stream,
                            left: left - take,
                        }
                    };
                }
            }
        }
        Ok(())
    }

    /// The connection ended: an error unless that happened between two frames.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match self.position {
            Position::Header { have: 0 } => Ok(()),
            Position::Header { have } => Err(FrameError::EndedInHeader(have)),
            Position::Payload { left, .. } => Err(FrameError::EndedInPayload(left)),
            Position::EngineError { .. } => Err(FrameError::Engine(format!(
                "{} (cut short: the stream ended inside it)",
                self.engine_message()
            ))),
        }
    }

    /// The engine's error message gathered so far.
    fn engine_message(&self) -> String {
        match String::from_utf8_lossy(&self.engine_error).trim() {
            "" => "(no message)".to_owned(),
            message => message.to_owned(),
        }
    }

    fn fail(&mut self, error: FrameError) -> FrameError {
        self.failed = Some(error.clone());
        error
    }

    /// The payload the whole header in `self.header` announces.
    fn payload_position(&mut self) -> Result<Position, FrameError> {
        let [kind, z1, z2, z3, a, b, c, d] = self.header;
        if [z1, z2, z3] != [0, 0, 0] {
            return Err(self.fail(FrameError::MalformedHeader([z1, z2, z3])));
        }
        let left = u32::from_be_bytes([a, b, c, d]) as usize;
        let stream = match kind {
            0 => None,
            1 => Some(OutputStream::Stdout),
            2 => Some(OutputStream::Stderr),
            3 if left == 0 => return Err(self.fail(FrameError::Engine(self.engine_message()))),
            3 => return Ok(Position::EngineError { left }),
            other => return Err(self.fail(FrameError::UnknownStream(other))),
        };
        Ok(if left == 0 {
            Position::Header { have: 0 }
        } else {
            Position::Payload { stream, left }
        })
    }
}

/// One frame of `stream` carrying `payload`, as an engine sends it.
#[cfg(test)]
pub fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![stream, 0, 0, 0];
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes; every stream's bytes, in order.
    fn decode(wire: &[u8], step: usize) -> (Vec<u8>, Vec<u8>, Result<(), FrameError>) {
        let mut decoder = FrameDecoder::default();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for piece in wire.chunks(step) {
            let fed = decoder.feed(piece, |stream, range| match stream {
                OutputStream::Stdout => out.extend_from_slice(&piece[range]),
                OutputStream::Stderr => err.extend_from_slice(&piece[range]),
            });
            if let Err(error) = fed {
                return (out, err, Err(error));
            }
        }
        let finished = decoder.finish();
        (out, err, finished)
    }

    #[test]
    fn every_payload_byte_arrives_once_in_order_however_the_bytes_are_split() {
        let mut wire = frame(1, b"hello ");
        wire.extend(frame(2, b"warning"));
        wire.extend(frame(1, &[]));
        wire.extend(frame(1, b"world"));
        wire.extend(frame(0, b"ignored"));
        wire.extend(frame(2, &[7; 70_000]));
        for step in [1, 2, 7, 8, 9, 13, 4096, wire.len()] {
            let (out, err, finished) = decode(&wire, step);
            assert_eq!(out, b"hello world", "step {step}");
            let mut expected = b"warning".to_vec();
            expected.extend([7; 70_000]);
            assert_eq!(err, expected, "step {step}");
            assert_eq!(finished, Ok(()), "step {step}");
        }
    }

    #[test]
    fn a_payload_is_handed_on_as_it_arrives_not_held_whole() {
        let wire = frame(1, &[1; 100]);
        let mut decoder = FrameDecoder::default();
        let mut seen = Vec::new();
        decoder
            .feed(&wire[..58], |stream, range| seen.push((stream, range)))
            .unwrap();
        assert_eq!(seen, vec![(OutputStream::Stdout, 8..58)]);
        assert_eq!(decoder.finish(), Err(FrameError::EndedInPayload(50)));
    }

    #[test]
    fn an_end_inside_a_frame_is_an_error_never_a_short_stream() {
        let wire = frame(1, b"abcdef");
        assert_eq!(decode(&wire[..3], 1).2, Err(FrameError::EndedInHeader(3)));
        assert_eq!(decode(&wire[..10], 4).2, Err(FrameError::EndedInPayload(4)));
        assert_eq!(decode(&wire, 4).2, Ok(()));
        assert_eq!(decode(&[], 1).2, Ok(()));
    }

    #[test]
    fn an_unknown_stream_fails_the_decoder_for_good() {
        let mut wire = frame(1, b"before");
        wire.extend(frame(4, b"what"));
        wire.extend(frame(1, b"after"));
        let (out, _, result) = decode(&wire, wire.len());
        assert_eq!(out, b"before");
        assert_eq!(result, Err(FrameError::UnknownStream(4)));
        let mut garbage = frame(1, b"x");
        garbage[2] = 7;
        assert_eq!(
            decode(&garbage, 3).2,
            Err(FrameError::MalformedHeader([0, 7, 0]))
        );
        let mut decoder = FrameDecoder::default();
        assert!(decoder.feed(&frame(9, b""), |_, _| {}).is_err());
        assert_eq!(
            decoder.feed(&frame(1, b"x"), |_, _| panic!("decoded after a failure")),
            Err(FrameError::UnknownStream(9))
        );
        assert_eq!(decoder.finish(), Err(FrameError::UnknownStream(9)));
    }

    #[test]
    fn the_engines_own_error_fails_the_stream_with_its_message() {
        let mut wire = frame(1, b"partial output");
        wire.extend(frame(3, b"something broke\n"));
        wire.extend(frame(1, b"never"));
        for step in [1, 5, wire.len()] {
            let (out, _, result) = decode(&wire, step);
            assert_eq!(out, b"partial output", "step {step}");
            assert_eq!(
                result,
                Err(FrameError::Engine("something broke".into())),
                "step {step}"
            );
        }
        let long = frame(3, &[b'e'; 3 * ENGINE_ERROR_BYTES]);
        match decode(&long, 1000).2 {
            Err(FrameError::Engine(message)) => assert_eq!(message.len(), ENGINE_ERROR_BYTES),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decode(&frame(3, b"cut")[..9], 4).2,
            Err(FrameError::Engine(
                "c (cut short: the stream ended inside it)".into()
            ))
        );
        assert_eq!(
            decode(&frame(3, b""), 8).2,
            Err(FrameError::Engine("(no message)".into()))
        );
    }
}
