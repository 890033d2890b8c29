//! The host–supervisor frame decoder over arbitrary bytes in arbitrary pieces (the first byte
//! picks the piece size): no panic, no allocation past one frame, the same frames whether the
//! bytes arrive whole or in pieces, and every message that decodes encodes back to its frame's
//! exact bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use session_frames::{encode, Decoder, Frame, FrameError, Message};

/// Every frame (or the first failure) of `bytes` pushed `piece` bytes at a time.
fn frames(bytes: &[u8], piece: usize) -> (Vec<Frame>, Option<FrameError>) {
    let mut decoder = Decoder::new();
    let mut frames = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        decoder.push(chunk);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => return (frames, Some(error)),
            }
        }
    }
    (frames, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, bytes)) = data.split_first() else {
        return;
    };
    let whole = frames(bytes, bytes.len());
    let pieces = frames(bytes, usize::from(shape % 17) + 1);
    assert_eq!(whole, pieces);
    for frame in &whole.0 {
        if let Ok(message) = Message::decode(frame) {
            let mut again = Vec::new();
            encode(frame.channel, &message, &mut again);
            let mut original = Vec::new();
            frame.write(&mut original);
            assert_eq!(again, original);
        }
    }
});
