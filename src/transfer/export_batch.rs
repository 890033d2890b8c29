//! An export's entries in batches: several entries and their bodies cross to JavaScript at once,
//! read exactly as one-by-one reads would read them. A batch holds at most `max_entries` entries
//! and stops reading bodies once it holds `max_bytes` (so at most `max_bytes` and one chunk); a
//! body it stopped in continues through `ExportSession::read`.

use bytes::Bytes;

use super::export::{ExportEntry, ExportSession};
use crate::lifecycle::error::OwnerError;

/// One entry of a batch: its metadata and the body chunks read with it.
#[derive(Debug)]
pub struct BatchedEntry {
    pub entry: ExportEntry,
    pub chunks: Vec<Bytes>,
    /// Whether the body ended within the batch (always for a directory); only a batch's last
    /// entry may be incomplete.
    pub complete: bool,
}

/// What one `next_batch` read.
#[derive(Debug, Default)]
pub struct ExportBatch {
    pub entries: Vec<BatchedEntry>,
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
        let mut bytes = 0usize;
        while batch.entries.len() < max_entries.max(1) && bytes < max_bytes {
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
            while !batched.complete && bytes < max_bytes {
                match self.read().await {
                    Ok(Some(chunk)) => {
                        bytes += chunk.len();
                        batched.chunks.push(chunk);
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
        batch
    }
}

#[cfg(test)]
mod tests {
    use crate::transfer::export::tests_support::*;

    #[tokio::test]
    async fn a_batch_reads_what_one_by_one_reads_and_stops_at_its_size() {
        let body = vec![5u8; 3_000];
        let answer = archive(vec![file("a", b"one"), file("b", &body), file("c", b"")]);
        let mut session = files_session(Some(answer), &["a", "b", "c"]).await;
        // 1,000 bytes of bodies at most (and one chunk): the batch stops inside b's body.
        let first = session.next_batch(16, 1_000).await;
        assert!(first.failure.is_none() && !first.end);
        let shape: Vec<_> = first
            .entries
            .iter()
            .map(|e| (e.entry.path.as_str(), e.chunks.len(), e.complete))
            .collect();
        assert_eq!(shape, vec![("a", 1, true), ("b", 1, false)]);
        // The rest of b through read, then c and the end.
        let mut rest = first.entries[1].chunks[0].to_vec();
        while let Some(chunk) = session.read().await.expect("read") {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(rest, body);
        let second = session.next_batch(16, 1_000).await;
        let shape: Vec<_> = second
            .entries
            .iter()
            .map(|e| (e.entry.path.as_str(), e.chunks.len(), e.complete))
            .collect();
        assert_eq!(shape, vec![("c", 0, true)]);
        assert!(second.end && second.failure.is_none());
        let summary = session.finish().await.expect("finished");
        assert_eq!(summary.files, 3);
    }

    #[tokio::test]
    async fn a_batch_holds_at_most_its_entries_and_a_failure_comes_after_them() {
        let answer = archive(vec![file("a", b"1"), file("b", b"2"), file("z", b"3")]);
        let mut session = files_session(Some(answer), &["a", "b", "c"]).await;
        let first = session.next_batch(1, 1 << 20).await;
        assert_eq!(first.entries.len(), 1);
        let second = session.next_batch(16, 1 << 20).await;
        let paths: Vec<_> = second
            .entries
            .iter()
            .map(|e| e.entry.path.as_str())
            .collect();
        assert_eq!(
            paths,
            vec!["b"],
            "the entry before the failure is delivered"
        );
        assert!(second.entries[0].complete);
        let failure = format!("{:?}", second.failure.expect("c is missing"));
        assert!(failure.contains("c does not exist"), "{failure}");
        assert!(!second.end);
    }
}
