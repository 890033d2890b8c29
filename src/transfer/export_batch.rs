//! An export's entries in batches: several entries and their bodies cross to JavaScript at once,
//! read exactly as one-by-one reads would read them. A batch holds at most `max_entries` entries
//! and stops reading bodies once it holds `max_bytes` (so at most `max_bytes` and one chunk, in
//! one buffer allocated once, never more than twice its bytes); a body it stopped in continues
//! through `ExportSession::read`.

use super::export::{ExportEntry, ExportSession};
use crate::lifecycle::error::OwnerError;

/// One entry of a batch: its metadata and the lengths of the body chunks read with it.
#[derive(Debug)]
pub struct BatchedEntry {
    pub entry: ExportEntry,
    /// The chunks' lengths, in order: the chunks lie back to back in `ExportBatch::bytes`.
    pub chunks: Vec<usize>,
    /// Whether the body's end was read within the batch (always for a directory); only a
    /// batch's last entry may be incomplete.
    pub complete: bool,
}

/// What one `next_batch` read.
#[derive(Debug, Default)]
pub struct ExportBatch {
    pub entries: Vec<BatchedEntry>,
    /// Every chunk of every entry, back to back.
    pub bytes: Vec<u8>,
    /// Every selected entry was delivered: the next call is `finish`.
    pub end: bool,
    /// A read failed after the entries before it: the last entry's body (when it is
    /// incomplete) or the next entry fails with it, exactly where a one-by-one read would.
    pub failure: Option<OwnerError>,
}

impl ExportSession {
    /// The next entries and their bodies, up to `max_entries` entries and `max_bytes` of bodies
    /// (plus at most one chunk).
    pub async fn next_batch(&mut self, max_entries: usize, max_bytes: usize) -> ExportBatch {
        let mut batch = ExportBatch::default();
        while batch.entries.len() < max_entries.max(1) && batch.bytes.len() < max_bytes {
            let entry = match self.next_entry().await {
                Ok(Some(entry)) => entry,
                Ok(None) => {
                    batch.end = true;
                    break;
                }
                Err(error) => {
                    batch.failure = Some(error);
                    break;
                }
            };
            let mut batched = BatchedEntry {
                complete: entry.directory,
                entry,
                chunks: Vec::new(),
            };
            let mut delivered = 0u64;
            // A body whose every byte is in already has its end read too: that read takes
            // nothing from the engine, and the entry then needs no read of its own.
            while !batched.complete
                && (batch.bytes.len() < max_bytes || delivered == batched.entry.byte_length)
            {
                match self.read().await {
                    Ok(Some(chunk)) => {
                        delivered += chunk.len() as u64;
                        if batch.bytes.capacity() == 0 {
                            // Room for the whole batch at once: it never grows chunk by chunk
                            // (at most once more, for the chunk that crosses `max_bytes`).
                            batch.bytes.reserve(max_bytes.max(chunk.len()));
                        }
                        batch.bytes.extend_from_slice(&chunk);
                        batched.chunks.push(chunk.len());
                    }
                    Ok(None) => batched.complete = true,
                    Err(error) => {
                        batch.failure = Some(error);
                        break;
                    }
                }
            }
            let complete = batched.complete;
            batch.entries.push(batched);
            if !complete {
                break;
            }
        }
        // The buffer goes to JavaScript whole: a small batch does not keep a large allocation.
        if batch.bytes.capacity() > 2 * batch.bytes.len() {
            batch.bytes.shrink_to_fit();
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::request::TransferBuffers;
    use crate::transfer::export::tests_support::*;

    /// Path, chunk count and completeness of each entry of a batch.
    fn shape(batch: &super::ExportBatch) -> Vec<(&str, usize, bool)> {
        batch
            .entries
            .iter()
            .map(|e| (e.entry.path.as_str(), e.chunks.len(), e.complete))
            .collect()
    }

    #[tokio::test]
    async fn a_batch_stops_at_its_size_and_the_body_continues_through_read() {
        let body = vec![5u8; 3_000];
        let answer = archive(vec![file("a", b"one"), file("b", &body), file("c", b"")]);
        let buffers = TransferBuffers {
            chunk_bytes: 1_000,
            ..TransferBuffers::DEFAULT
        };
        let mut session = files_session_with(Some(answer), &["a", "b", "c"], buffers).await;
        let first = session.next_batch(16, 1_000).await;
        assert!(first.failure.is_none() && !first.end);
        // a's 3 bytes, then one 1,000-byte chunk of b: past 1,000 bytes, the batch stops in b.
        assert_eq!(shape(&first), vec![("a", 1, true), ("b", 1, false)]);
        assert_eq!(first.entries[1].chunks, vec![1_000]);
        assert_eq!(&first.bytes[..3], b"one");
        let mut rest = first.bytes[3..].to_vec();
        let mut reads = 0;
        while let Some(chunk) = session.read().await.expect("read") {
            rest.extend_from_slice(&chunk);
            reads += 1;
        }
        assert_eq!((rest, reads), (body, 2));
        let second = session.next_batch(16, 1_000).await;
        assert_eq!(shape(&second), vec![("c", 0, true)]);
        assert!(second.end && second.failure.is_none());
        assert_eq!(session.finish().await.expect("finished").files, 3);
    }

    #[tokio::test]
    async fn a_batch_buffer_is_allocated_once_and_never_far_larger_than_its_bytes() {
        let pieces: Vec<Vec<u8>> = (0..40)
            .map(|i| file(&format!("f{i}"), &[3u8; 100]))
            .collect();
        let paths: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let mut session = files_session(Some(archive(pieces)), &paths).await;
        let batch = session.next_batch(256, 1_000).await;
        // Ten bodies of 100 bytes fill the batch's 1,000 bytes.
        assert_eq!(batch.entries.len(), 10);
        assert_eq!(batch.bytes.len(), 1_000);
        assert!(
            batch.bytes.capacity() <= 2 * batch.bytes.len(),
            "{}",
            batch.bytes.capacity()
        );
        let small = session.next_batch(1, 1 << 20).await;
        assert_eq!(small.bytes.len(), 100);
        assert!(small.bytes.capacity() <= 200, "{}", small.bytes.capacity());
    }

    #[tokio::test]
    async fn a_body_that_fills_the_batch_exactly_is_complete() {
        let answer = archive(vec![file("a", &[1u8; 1_000]), file("b", b"2")]);
        let buffers = TransferBuffers {
            chunk_bytes: 1_000,
            ..TransferBuffers::DEFAULT
        };
        let mut session = files_session_with(Some(answer), &["a", "b"], buffers).await;
        let first = session.next_batch(16, 1_000).await;
        assert_eq!(shape(&first), vec![("a", 1, true)]);
        let second = session.next_batch(16, 1_000).await;
        assert_eq!(shape(&second), vec![("b", 1, true)]);
        assert!(second.end);
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_its_entries_and_a_failure_comes_after_them() {
        let answer = archive(vec![file("a", b"1"), file("b", b"2"), file("z", b"3")]);
        let mut session = files_session(Some(answer), &["a", "b", "c"]).await;
        let first = session.next_batch(1, 1 << 20).await;
        assert_eq!(shape(&first), vec![("a", 1, true)]);
        let second = session.next_batch(16, 1 << 20).await;
        assert_eq!(
            shape(&second),
            vec![("b", 1, true)],
            "the entry before the failure"
        );
        let failure = format!("{:?}", second.failure.expect("c is missing"));
        assert!(failure.contains("c does not exist"), "{failure}");
        assert!(!second.end);
    }

    #[tokio::test]
    async fn a_body_that_fails_partway_ends_the_batch_inside_it() {
        let mut pieces = file("a", b"1");
        let mut b = file("b", &[9u8; 2_000]);
        b.truncate(512 + 700);
        pieces.extend(b);
        let answer = vec![
            Ok(bytes::Bytes::from(pieces)),
            Err("the engine went away".to_owned()),
        ];
        let buffers = TransferBuffers {
            chunk_bytes: 500,
            ..TransferBuffers::DEFAULT
        };
        let mut session = files_session_with(Some(answer), &["a", "b"], buffers).await;
        let batch = session.next_batch(16, 1 << 20).await;
        // b's body: what arrived, in chunks of at most 500 bytes, then the failure.
        assert_eq!(batch.entries.len(), 2);
        assert!(batch.entries[0].complete && !batch.entries[1].complete);
        assert_eq!(batch.entries[1].chunks.iter().sum::<usize>(), 700);
        let failure = format!("{:?}", batch.failure.expect("the body failed"));
        assert!(failure.contains("went away"), "{failure}");
        assert!(!batch.end);
    }
}
