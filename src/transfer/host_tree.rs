//! Whole host directories through one transfer, for the `/node` directory helpers: one native
//! call per transfer, no per-file crossing into JavaScript. The import walks, checks and reads
//! files on one blocking thread that feeds the archive (by descriptors: `host_walk.rs`); the
//! export writes every entry on one blocking thread fed by the archive. Every file is checked
//! (descriptor identity against the walk, `O_NOFOLLOW`, exclusive creation, the umask). Between the two sides wait at most
//! `queue_depth` batches, besides the one being gathered and the one being handled: an import's
//! batch holds at most one chunk's bytes of bodies, an export's at most `export_batch_bytes`
//! (written with one vectored write per file), so about `IN_FLIGHT_BYTES` plus two batches.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::batch::Batch;
use super::export::ExportSession;
use super::host_walk::{HostEntry, HostWalk};
use super::import::ImportSession;
use super::staging_tree::{Identities, TreeWriter};
use crate::lifecycle::error::OwnerError;

/// Bytes allowed in flight between the two sides (rounded up to two chunks at least): batches
/// of small files fill it as well as large files' chunks do.
const IN_FLIGHT_BYTES: u64 = 1_024 * 1_024;
/// Batches in flight at most, whatever their size.
const QUEUE_MAX: usize = 64;

/// The bytes of bodies one export batch gathers: at least a quarter of `IN_FLIGHT_BYTES`, so a
/// large file wakes the writing thread once per quarter mebibyte, not once per chunk.
fn export_batch_bytes(chunk_bytes: u64) -> u64 {
    chunk_bytes.max(IN_FLIGHT_BYTES / 4)
}

/// How many batches may wait between the two sides: `IN_FLIGHT_BYTES` of chunks, at least two.
pub fn queue_depth(chunk_bytes: u64) -> usize {
    let chunks = IN_FLIGHT_BYTES / chunk_bytes.max(1);
    usize::try_from(chunks)
        .unwrap_or(QUEUE_MAX)
        .clamp(2, QUEUE_MAX)
}

/// What the walking thread hands to the archive side, in tree order.
enum Walked {
    Directory(String),
    File {
        path: String,
        size: u64,
        executable: bool,
    },
    Chunk(Bytes),
    FileEnd,
}

/// The walk's batches, then its error if it failed.
type WalkSender = mpsc::Sender<Result<Vec<Walked>, OwnerError>>;

/// The walking thread's side of the queue: entries gathered into batches.
struct WalkQueue<'a> {
    sender: &'a WalkSender,
    batch: Batch<Walked>,
}

impl WalkQueue<'_> {
    fn send(&mut self, item: Walked, bytes: u64) -> Result<(), Gone> {
        match self.batch.add(item, bytes) {
            Some(full) => self.sender.blocking_send(Ok(full)).map_err(|_| Gone),
            None => Ok(()),
        }
    }

    /// Hands over what is gathered.
    fn flush(&mut self) -> Result<(), Gone> {
        match self.batch.rest() {
            Some(rest) => self.sender.blocking_send(Ok(rest)).map_err(|_| Gone),
            None => Ok(()),
        }
    }
}

/// Imports the regular files and directories under `root` (a directory the caller checked is
/// not a link) into `session`, depth first, each directory before its contents. Entry indices
/// count from 0 in walk order. A symlink or special file fails the import, as does a file
/// replaced, truncated or grown between the walk and its read.
pub async fn import_host_directory(
    session: &mut ImportSession,
    root: PathBuf,
    chunk_bytes: u64,
) -> Result<(), OwnerError> {
    let (sender, mut walked) = mpsc::channel(queue_depth(chunk_bytes));
    let chunk = usize::try_from(chunk_bytes.max(1)).unwrap_or(usize::MAX);
    // The thread ends at its next send once this side is gone (an error, a cancelled step).
    let walker = tokio::task::spawn_blocking(move || {
        let mut queue = WalkQueue {
            sender: &sender,
            batch: Batch::new(chunk_bytes),
        };
        let walked = walk_tree(&root, chunk, &mut queue);
        // What was walked before an error goes first, so the session sees entries in order.
        if queue.flush().is_ok() {
            if let Err(error) = walked {
                let _ = sender.blocking_send(Err(error));
            }
        }
    });
    let mut index: u32 = 0;
    while let Some(batch) = walked.recv().await {
        for item in batch? {
            match item {
                Walked::Directory(path) => {
                    session.directory_now(index, path)?;
                    index = index.saturating_add(1);
                }
                Walked::File {
                    path,
                    size,
                    executable,
                } => {
                    session.begin_file_now(index, path, size, executable)?;
                    index = index.saturating_add(1);
                }
                Walked::Chunk(bytes) => session.chunk_now(bytes)?,
                Walked::FileEnd => session.end_file_now()?,
            }
            session.drain_if_due().await?;
        }
    }
    // The queue closed: the walk ended, completely only if its thread returned normally.
    walker
        .await
        .map_err(|e| OwnerError::driver(format!("the directory walk ended abnormally: {e}")))
}

/// The reader has gone: stop walking quietly (its own error, if any, is already reported).
struct Gone;

impl From<Gone> for OwnerError {
    fn from(_: Gone) -> Self {
        OwnerError::cancelled("the import ended before the walk")
    }
}

/// The depth-first walk (`HostWalk`: by descriptors, never following a link), each file read
/// to exactly the size the walk saw, in chunks.
fn walk_tree(root: &Path, chunk: usize, queue: &mut WalkQueue) -> Result<(), OwnerError> {
    let mut walk = HostWalk::open(root)?;
    while let Some(entry) = walk.next_entry()? {
        match entry {
            HostEntry::Directory { path } => queue.send(Walked::Directory(path), 0)?,
            HostEntry::File {
                path,
                executable,
                file,
            } => {
                let mut file = file.open()?;
                queue.send(
                    Walked::File {
                        path,
                        size: file.size(),
                        executable,
                    },
                    0,
                )?;
                while let Some(bytes) = file.read_chunk(chunk)? {
                    let len = bytes.len() as u64;
                    queue.send(Walked::Chunk(Bytes::from(bytes)), len)?;
                }
                queue.send(Walked::FileEnd, 0)?;
            }
        }
    }
    Ok(())
}

/// What the archive side hands to the writing thread, in archive order.
enum Staged {
    Directory(String),
    File { path: String, executable: bool },
    Chunk(Bytes),
    FileEnd,
}

/// The thread that writes an export into a staging directory.
pub struct StagingWriter {
    sender: Option<mpsc::Sender<Vec<Staged>>>,
    thread: tokio::task::JoinHandle<Result<(), OwnerError>>,
    batch_bytes: u64,
}

impl StagingWriter {
    /// Starts writing into `staging`, an existing private directory this call never creates
    /// (if it is removed meanwhile, every later write fails instead of recreating it), with the
    /// directories' identities recorded in `identities` (see `staging_tree.rs`).
    pub fn start(staging: PathBuf, identities: PathBuf, chunk_bytes: u64) -> Self {
        let batch_bytes = export_batch_bytes(chunk_bytes);
        let (sender, receiver) = mpsc::channel(queue_depth(batch_bytes));
        let tree = TreeWriter::new(staging, Identities::new(identities));
        let thread = tokio::task::spawn_blocking(move || write_tree(tree, receiver));
        Self {
            sender: Some(sender),
            thread,
            batch_bytes,
        }
    }

    /// Feeds every entry of `session` to the thread, in batches. When this future is dropped
    /// (a cancelled step), the thread finishes what is queued and ends; `finish` waits for it.
    pub async fn feed(&mut self, session: &mut ExportSession) -> Result<(), OwnerError> {
        let Some(sender) = self.sender.clone() else {
            return Err(OwnerError::state("the export writer is closed"));
        };
        // A failed send means the thread ended: `finish` reports why.
        let hand_over = |messages: Vec<Staged>| {
            let sender = sender.clone();
            async move {
                sender
                    .send(messages)
                    .await
                    .map_err(|_| OwnerError::state("the export writer ended"))
            }
        };
        let mut batch = Batch::new(self.batch_bytes);
        while let Some(entry) = session.next_entry().await? {
            let first = if entry.directory {
                Staged::Directory(entry.path)
            } else {
                Staged::File {
                    path: entry.path,
                    executable: entry.executable,
                }
            };
            if let Some(full) = batch.add(first, 0) {
                hand_over(full).await?;
            }
            if entry.directory {
                continue;
            }
            while let Some(chunk) = session.read().await? {
                let bytes = chunk.len() as u64;
                if let Some(full) = batch.add(Staged::Chunk(chunk), bytes) {
                    hand_over(full).await?;
                }
            }
            if let Some(full) = batch.add(Staged::FileEnd, 0) {
                hand_over(full).await?;
            }
        }
        match batch.rest() {
            Some(rest) => hand_over(rest).await,
            None => Ok(()),
        }
    }

    /// Closes the queue and waits for the thread to write (or refuse) what was queued: at most
    /// `queue_depth` batches. The thread's own error comes first: it is the cause of a failed
    /// send.
    pub async fn finish(mut self, fed: Result<(), OwnerError>) -> Result<(), OwnerError> {
        self.sender.take();
        let written = self.thread.await.unwrap_or_else(|e| {
            Err(OwnerError::driver(format!(
                "the export writer ended abnormally: {e}"
            )))
        });
        written.and(fed)
    }
}

fn write_tree(
    mut tree: TreeWriter,
    mut queue: mpsc::Receiver<Vec<Staged>>,
) -> Result<(), OwnerError> {
    while let Some(batch) = queue.blocking_recv() {
        for message in batch {
            match message {
                Staged::Directory(path) => tree.directory(&path)?,
                Staged::File { path, executable } => tree.file(&path, executable)?,
                Staged::Chunk(bytes) => tree.chunk(bytes)?,
                Staged::FileEnd => tree.file_end()?,
            }
        }
        tree.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_queue_holds_a_mebibyte_of_chunks_and_at_least_two() {
        assert_eq!(queue_depth(64 * 1_024), 16);
        assert_eq!(queue_depth(16 * 1_024), 64);
        assert_eq!(queue_depth(1_024 * 1_024), 2);
        assert_eq!(queue_depth(16 * 1_024 * 1_024), 2);
        assert_eq!(queue_depth(1), QUEUE_MAX);
        assert_eq!(queue_depth(0), QUEUE_MAX);
    }

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch(&format!("tree-{name}"))
    }

    #[test]
    fn the_writer_puts_a_batch_of_chunks_into_its_files_in_order() {
        let dir = scratch("chunks");
        let staging = dir.join("staging");
        let identities = dir.join("identities");
        fs::create_dir(&staging).expect("staging");
        fs::create_dir(&identities).expect("identities");
        let tree = || TreeWriter::new(staging.clone(), Identities::new(identities.clone()));
        let (sender, receiver) = mpsc::channel(4);
        let chunk = |text: &'static str| Staged::Chunk(Bytes::from_static(text.as_bytes()));
        let file = |path: &str| Staged::File {
            path: path.to_owned(),
            executable: false,
        };
        sender
            .try_send(vec![
                file("a/one"),
                chunk("he"),
                chunk("ll"),
                chunk("o"),
                Staged::FileEnd,
                file("a/two"),
                chunk("wor"),
            ])
            .expect("queued");
        // The second file goes on in the next batch.
        sender
            .try_send(vec![chunk("ld"), Staged::FileEnd])
            .expect("queued");
        drop(sender);
        write_tree(tree(), receiver).expect("written");
        assert_eq!(fs::read(staging.join("a/one")).expect("one"), b"hello");
        assert_eq!(fs::read(staging.join("a/two")).expect("two"), b"world");

        let (sender, receiver) = mpsc::channel(1);
        sender.try_send(vec![chunk("stray")]).expect("queued");
        drop(sender);
        let refused = write_tree(tree(), receiver).expect_err("no file is open");
        assert!(refused.to_string().contains("no file open"), "{refused}");
        fs::remove_dir_all(&dir).ok();
    }

    /// Walks `root` on this thread (the queue is deep enough for the small trees used here).
    fn walked(root: &Path) -> (Vec<String>, Option<String>) {
        let (sender, mut receiver) = mpsc::channel(QUEUE_MAX);
        let mut queue = WalkQueue {
            sender: &sender,
            batch: Batch::new(3),
        };
        let walked = walk_tree(root, 3, &mut queue);
        assert!(queue.flush().is_ok());
        drop(sender);
        let mut seen = Vec::new();
        while let Ok(batch) = receiver.try_recv() {
            for item in batch.expect("only Ok batches are sent") {
                seen.push(match item {
                    Walked::Directory(path) => format!("d {path}"),
                    Walked::File { path, size, .. } => format!("f {path} {size}"),
                    Walked::Chunk(bytes) => format!("c {}", bytes.len()),
                    Walked::FileEnd => "e".into(),
                });
            }
        }
        (seen, walked.err().map(|e| e.to_string()))
    }

    #[test]
    fn the_walk_sends_each_directory_before_its_contents_and_files_in_chunks() {
        let dir = scratch("walk");
        fs::create_dir_all(dir.join("a/b")).expect("dirs");
        fs::write(dir.join("a/b/seven"), b"1234567").expect("file");
        let (seen, error) = walked(&dir);
        assert_eq!(error, None);
        assert_eq!(
            seen,
            ["d a", "d a/b", "f a/b/seven 7", "c 3", "c 3", "c 1", "e"]
        );
        fs::remove_dir_all(&dir).ok();
    }
}
