//! An attach connection's output read as the owner's chunks: reads into one reused buffer
//! (grown while the connection has more than it holds, never shrunk), decoded in place
//! (`frames.rs`), and one exactly sized chunk per run of one stream's payload in a read. A fast
//! stream costs few reads and few chunks. A chunk owns its bytes (never a slice of the read
//! buffer), so a staged chunk keeps only its own allocation alive (the output pump's pieces of
//! one chunk share it). A guest that alternates tiny writes to stdout and stderr makes one run,
//! so one chunk, per write: the staging budget counts each staged piece's bookkeeping as well as
//! its bytes (`process::PIECE_BOOKKEEPING`), so such chunks fill it by their number too.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::frames::{FrameDecoder, FrameError};
use crate::lifecycle::driver::OutputStream;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// The read buffer starts this large (a connection that never had more holds no more)...
pub const FIRST_READ_BYTES: usize = 16 * 1024;
/// ...and doubles each time a read fills it, up to this.
pub const READ_BYTES: usize = 128 * 1024;

pub use crate::process::supervised::Chunks;

struct Demux<R> {
    reader: R,
    buffer: Vec<u8>,
    decoder: FrameDecoder,
    /// Payload runs of the last read, in order.
    runs: Vec<(OutputStream, Range<usize>)>,
    ready: VecDeque<(OutputStream, Bytes)>,
    /// A failure in the last read, reported once the chunks before it are handed on.
    failed: Option<OwnerError>,
    over: bool,
}

fn failure(message: String) -> OwnerError {
    OwnerError::operation(OperationCode::StreamFailure, message)
}

impl<R: AsyncRead + Unpin> Demux<R> {
    /// Decodes the `n` bytes just read into `ready`: every payload byte before a failure too,
    /// the failure then waiting behind them.
    fn decode(&mut self, n: usize) {
        let runs = &mut self.runs;
        runs.clear();
        let fed = self.decoder.feed(&self.buffer[..n], |stream, range| {
            runs.push((stream, range))
        });
        let mut rest = &self.runs[..];
        while let Some(&(stream, _)) = rest.first() {
            let same = rest.iter().take_while(|(s, _)| *s == stream).count();
            let (group, after) = rest.split_at(same);
            let total = group.iter().map(|(_, r)| r.len()).sum();
            let mut chunk = Vec::with_capacity(total);
            for (_, range) in group {
                chunk.extend_from_slice(&self.buffer[range.clone()]);
            }
            self.ready.push_back((stream, Bytes::from(chunk)));
            rest = after;
        }
        self.failed = match fed {
            Ok(()) => None,
            Err(e @ FrameError::Engine(_)) => Some(failure(e.to_string())),
            Err(e) => Some(failure(format!("the engine's output is malformed: {e}"))),
        };
        if n == self.buffer.len() && n < READ_BYTES {
            // The connection had more than the buffer holds: read more at once from now on.
            self.buffer = vec![0; (n * 2).min(READ_BYTES)];
        }
    }

    /// The next chunk, the end (`None`), or the one failure after which nothing follows.
    async fn next(&mut self) -> Option<Result<(OutputStream, Bytes), OwnerError>> {
        loop {
            if let Some(chunk) = self.ready.pop_front() {
                return Some(Ok(chunk));
            }
            if let Some(error) = self.failed.take() {
                self.over = true;
                return Some(Err(error));
            }
            if self.over {
                return None;
            }
            match self.reader.read(&mut self.buffer).await {
                Ok(0) => {
                    self.over = true;
                    if let Err(e) = self.decoder.finish() {
                        return Some(Err(failure(format!(
                            "the engine's output was cut short: {e}"
                        ))));
                    }
                }
                Ok(n) => self.decode(n),
                Err(e) => {
                    self.over = true;
                    return Some(Err(failure(format!(
                        "reading the engine's output failed: {e}"
                    ))));
                }
            }
        }
    }
}

/// The chunks `reader` (an attach connection, past its response) carries, in order, ending
/// with the connection, or with one `stream_failure` when it fails or breaks the format.
pub fn demultiplexed(reader: impl AsyncRead + Send + Unpin + 'static) -> Chunks {
    let demux = Demux {
        reader,
        buffer: vec![0; FIRST_READ_BYTES],
        decoder: FrameDecoder::default(),
        runs: Vec::new(),
        ready: VecDeque::new(),
        failed: None,
        over: false,
    };
    // Fused: polled again after its end, it says so again instead of panicking.
    futures::stream::unfold(demux, |mut demux| async move {
        let item = demux.next().await?;
        Some((item, demux))
    })
    .fuse()
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::frames::frame;
    use tokio::io::AsyncWriteExt;

    /// The items of a stream that carried `bytes` of stdout, then failed: its failure, a
    /// `stream_failure` (nothing follows it).
    fn stdout_then_failure<'a>(
        items: &'a [Result<(OutputStream, Bytes), OwnerError>],
        bytes: &'static [u8],
    ) -> &'a OwnerError {
        assert_eq!(
            items.len(),
            2,
            "the bytes before the failure, then the failure"
        );
        assert_eq!(
            items[0].as_ref().unwrap(),
            &(OutputStream::Stdout, Bytes::from_static(bytes))
        );
        let error = items[1].as_ref().unwrap_err();
        assert_eq!(error.code(), Some(OperationCode::StreamFailure));
        error
    }

    async fn collect(wire: Vec<u8>) -> Vec<Result<(OutputStream, Bytes), OwnerError>> {
        let (mut engine, owner) = tokio::io::duplex(wire.len().max(1));
        engine.write_all(&wire).await.unwrap();
        drop(engine);
        demultiplexed(owner).collect().await
    }

    #[tokio::test]
    async fn one_exact_chunk_per_run_of_a_stream_in_a_read() {
        let mut wire = frame(1, b"ab");
        wire.extend(frame(1, b"cd"));
        wire.extend(frame(2, b"oops"));
        wire.extend(frame(1, b"ef"));
        let chunks: Vec<_> = collect(wire)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            chunks,
            vec![
                (OutputStream::Stdout, Bytes::from_static(b"abcd")),
                (OutputStream::Stderr, Bytes::from_static(b"oops")),
                (OutputStream::Stdout, Bytes::from_static(b"ef")),
            ]
        );
        assert!(chunks
            .iter()
            .all(|(_, bytes)| Vec::from(bytes.clone()).capacity() == bytes.len()));
    }

    #[tokio::test]
    async fn a_large_stream_arrives_whole_in_reads_of_at_most_the_buffer() {
        let payload: Vec<u8> = (0..3 * READ_BYTES).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        for piece in payload.chunks(32 * 1024) {
            wire.extend(frame(1, piece));
        }
        let chunks: Vec<_> = collect(wire)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(chunks.iter().all(|(_, bytes)| bytes.len() <= READ_BYTES));
        // Reads that fill the buffer grow it: later chunks are larger than the first reads.
        assert!(chunks
            .iter()
            .any(|(_, bytes)| bytes.len() > FIRST_READ_BYTES));
        let joined: Vec<u8> = chunks.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!(joined, payload);
    }

    #[tokio::test]
    async fn a_connection_cut_inside_a_frame_fails_after_the_bytes_before_it() {
        let mut wire = frame(1, b"whole");
        wire.extend(&frame(1, b"cut short")[..11]);
        let items = collect(wire).await;
        let error = stdout_then_failure(&items, b"wholecut");
        assert!(error
            .to_string()
            .contains("6 bytes of its payload never arrived"));
    }

    #[tokio::test]
    async fn a_malformed_header_fails_the_stream_and_nothing_follows() {
        let mut wire = frame(1, b"fine");
        wire.extend(frame(5, b"bad"));
        wire.extend(frame(1, b"never"));
        let items = collect(wire).await;
        assert!(stdout_then_failure(&items, b"fine")
            .to_string()
            .contains("names stream 5"));
    }

    #[tokio::test]
    async fn a_stream_asked_again_after_its_end_says_so_again() {
        let (mut engine, owner) = tokio::io::duplex(64);
        engine.write_all(&frame(1, b"x")).await.unwrap();
        drop(engine);
        let mut chunks = demultiplexed(owner);
        assert!(chunks.next().await.is_some());
        assert!(chunks.next().await.is_none());
        assert!(chunks.next().await.is_none());
    }

    #[tokio::test]
    async fn the_engines_error_in_the_stream_fails_it_after_the_bytes_before_it() {
        let mut wire = frame(1, b"partial");
        wire.extend(frame(3, b"container stream broke"));
        let items = collect(wire).await;
        assert_eq!(
            stdout_then_failure(&items, b"partial").to_string(),
            "the engine reported an error in the stream: container stream broke"
        );
    }
}
