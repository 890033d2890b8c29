//! One import: entries in, a tar stream out to the engine, with exact accounting. Headers are
//! built here; bodies pass through in the caller's chunks. Each step is checked and taken at once
//! (`*_now`, never waiting: the JavaScript thread calls them); `drain` then delivers what the
//! steps took. A step takes nothing while a drain is due, so at most about `GATHER_BYTES` and one
//! step's pieces wait (and one ledger batch).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::ledger::{EntryKind, Ledger};
use super::options::TransferQuotas;
use super::progress::Progress;
use super::summary::{entry_error, quota_error, Summary};
use super::tar_write::{end_of_archive, entry_header, Ownership};
use crate::input::{IssueCode, Seg};
use crate::lifecycle::driver::{ArchiveUpload, TransferSettings};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::paths::{check, Anchor};
use crate::policy::request::TransferBuffers;
use tar_framing::padding;

/// Pieces smaller than this (headers, padding, small bodies) are gathered into one piece of about
/// this size before they go to the engine, so a tree of small files costs few sends.
const GATHER_BYTES: usize = 64 * 1_024;
/// A drain is due after at most this many steps without one, also when they took no bytes
/// (empty chunks): the JavaScript caller's event loop turns at every drain, so a deadline or a
/// signal can end even a body of endless empty chunks.
const STEPS_PER_DRAIN: u32 = 256;
/// How long a failed send waits for the upload to say why it ended.
const UPLOAD_ERROR_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

struct OpenFile {
    index: u32,
    path: String,
    declared: u64,
    remaining: u64,
}

pub struct ImportSession {
    sink: Option<mpsc::Sender<Bytes>>,
    /// Small pieces not yet queued: less than `GATHER_BYTES`, queued before anything larger.
    gathered: BytesMut,
    /// Pieces taken, in archive order, that `drain` has not delivered yet.
    queued: VecDeque<Bytes>,
    /// Steps taken since the last drain.
    steps: u32,
    done: Option<BoxFuture<'static, Result<(), OwnerError>>>,
    ledger: Ledger,
    quotas: TransferQuotas,
    chunk_bytes: u64,
    owner: Ownership,
    mtime: u64,
    /// Directories already in the archive along the last entry's path.
    chain: Vec<String>,
    file: Option<OpenFile>,
    summary: Summary,
    /// What a caller polls while the import runs (bodies taken, files whole).
    progress: Arc<Progress>,
}

fn at(index: u32, field: &str) -> Vec<Seg> {
    vec![Seg::Index(index as usize), Seg::Key(field.into())]
}

/// An import dropped unfinished (its caller's future dropped, as a cancelled transfer's is)
/// ends as `abort` ends it: the upload first, so the engine sees a broken upload rather than a
/// short archive that ends cleanly, then the queue.
impl Drop for ImportSession {
    fn drop(&mut self) {
        drop(self.done.take());
        self.sink.take();
    }
}

impl ImportSession {
    pub fn new(
        upload: ArchiveUpload,
        settings: &TransferSettings,
        buffers: TransferBuffers,
        quotas: TransferQuotas,
    ) -> Self {
        Self {
            sink: Some(upload.sink),
            gathered: BytesMut::new(),
            queued: VecDeque::new(),
            steps: 0,
            done: Some(upload.done),
            ledger: Ledger::new(
                settings.spill_directory.as_deref(),
                buffers.metadata_batch_bytes,
                buffers.merge_fan_in,
            ),
            quotas,
            chunk_bytes: buffers.chunk_bytes,
            owner: Ownership {
                uid: settings.uid,
                gid: settings.gid,
            },
            mtime: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            chain: Vec::new(),
            file: None,
            summary: Summary::default(),
            progress: Arc::default(),
        }
    }

    /// The running counts, readable while the import runs.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Adds `bytes` to the archive: counted against the quotas at once, queued after the pieces
    /// taken before it (small pieces gathered into one).
    fn take(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        self.summary.archive_bytes += bytes.len() as u64;
        self.summary.check(&self.quotas, "the archive")?;
        if self.gathered.len() + bytes.len() < GATHER_BYTES {
            self.gathered.extend_from_slice(&bytes);
            return Ok(());
        }
        self.queue_gathered();
        if bytes.len() < GATHER_BYTES {
            self.gathered.extend_from_slice(&bytes);
        } else {
            self.queued.push_back(bytes);
        }
        Ok(())
    }

    /// Queues what is gathered, if anything.
    fn queue_gathered(&mut self) {
        if !self.gathered.is_empty() {
            self.queued.push_back(self.gathered.split().freeze());
        }
    }

    /// Whether a drain is due: pieces to deliver, a full ledger batch to spill, or
    /// `STEPS_PER_DRAIN` steps taken since the last drain. While it is, the steps that never
    /// wait refuse to take more, so what waits stays bounded (about `GATHER_BYTES` and one
    /// step's pieces, one ledger batch, `STEPS_PER_DRAIN` steps).
    pub fn drain_due(&self) -> bool {
        !self.queued.is_empty() || self.ledger.spill_due() || self.steps >= STEPS_PER_DRAIN
    }

    /// Delivers the queued pieces to the engine and spills a full ledger batch: waits while the
    /// engine takes no more.
    pub async fn drain(&mut self) -> Result<(), OwnerError> {
        self.steps = 0;
        self.ledger
            .spill_if_due()
            .await
            .map_err(|e| OwnerError::driver(e.to_string()))?;
        while let Some(bytes) = self.queued.pop_front() {
            self.deliver(bytes).await?;
        }
        Ok(())
    }

    /// `drain`, when one is due: what a caller that may wait runs after each step.
    pub async fn drain_if_due(&mut self) -> Result<(), OwnerError> {
        if self.drain_due() {
            self.drain().await?;
        }
        Ok(())
    }

    /// The steps that never wait take nothing while a drain is due; each one counts.
    fn drained(&mut self) -> Result<(), OwnerError> {
        if self.drain_due() {
            return Err(OwnerError::state(
                "the import must deliver what it holds before it takes more",
            ));
        }
        self.steps += 1;
        Ok(())
    }

    async fn deliver(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        let sink = self
            .sink
            .as_ref()
            .ok_or_else(|| OwnerError::state("the import is already finished"))?;
        if sink.send(bytes).await.is_ok() {
            return Ok(());
        }
        // The upload ended early; its own error says why (an engine gone, a refused archive, a
        // helper that failed).
        let why = match self.done.take() {
            Some(done) => match tokio::time::timeout(UPLOAD_ERROR_WAIT, done).await {
                Ok(Err(error)) => format!(": {error}"),
                _ => String::new(),
            },
            None => String::new(),
        };
        Err(OwnerError::operation(
            OperationCode::StreamFailure,
            format!("the sandbox stopped accepting the import archive{why}"),
        ))
    }

    fn checked_path(&self, index: u32, path: &str) -> Result<(), OwnerError> {
        if self.file.is_some() {
            return Err(OwnerError::state(
                "the previous file's body is not complete",
            ));
        }
        check(path, Anchor::Relative).map_err(|(code, message)| {
            entry_error(at(index, "path"), code, format!("{path:?}: {message}"))
        })
    }

    /// Emits headers for the ancestors of `path` not already in the archive, so every
    /// directory belongs to the sandbox user rather than being created by the engine as root.
    fn ancestors(&mut self, path: &str) -> Result<(), OwnerError> {
        let parts: Vec<&str> = path.split('/').collect();
        let mut prefix = String::new();
        let mut wanted = Vec::new();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            wanted.push(prefix.clone());
        }
        let common = self
            .chain
            .iter()
            .zip(&wanted)
            .take_while(|(a, b)| a == b)
            .count();
        self.chain.truncate(common);
        for directory in wanted.into_iter().skip(common) {
            let header = entry_header(&directory, true, 0, 0o755, self.owner, self.mtime);
            self.take(header.into())?;
            self.chain.push(directory);
        }
        Ok(())
    }

    /// A directory entry, checked and taken at once (never waits); refused while a drain is
    /// due.
    pub fn directory_now(&mut self, index: u32, path: String) -> Result<(), OwnerError> {
        self.drained()?;
        self.checked_path(index, &path)?;
        self.ledger.record(&path, EntryKind::Directory);
        self.ancestors(&path)?;
        let header = entry_header(&path, true, 0, 0o755, self.owner, self.mtime);
        self.take(header.into())?;
        self.chain.push(path);
        self.summary.directories += 1;
        Ok(())
    }

    /// A file's header, checked and taken at once (never waits); its body follows through
    /// `chunk_now`, then `end_file_now`. Refused while a drain is due.
    pub fn begin_file_now(
        &mut self,
        index: u32,
        path: String,
        byte_length: u64,
        executable: bool,
    ) -> Result<(), OwnerError> {
        self.drained()?;
        self.checked_path(index, &path)?;
        if let Some(limit) = self.quotas.max_file_bytes {
            if byte_length > limit {
                return Err(quota_error(
                    "maxFileBytes",
                    limit,
                    format!("{path} ({byte_length} bytes)"),
                ));
            }
        }
        self.summary.files += 1;
        self.summary.file_bytes += byte_length;
        self.summary.check(&self.quotas, &path)?;
        self.ledger.record(&path, EntryKind::File);
        self.ancestors(&path)?;
        let mode = if executable { 0o755 } else { 0o644 };
        let header = entry_header(&path, false, byte_length, mode, self.owner, self.mtime);
        self.take(header.into())?;
        self.file = Some(OpenFile {
            index,
            path,
            declared: byte_length,
            remaining: byte_length,
        });
        Ok(())
    }

    /// One chunk of the open file's body, checked and taken at once (never waits); refused
    /// while a drain is due.
    pub fn chunk_now(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        self.admit_chunk(bytes.len())?;
        self.take(bytes)
    }

    /// `chunk_now` for bytes the caller keeps: copied only once admitted, so a refused chunk
    /// (larger than `chunkBytes`, or than the body's rest) is never copied.
    pub fn chunk_now_copied(&mut self, chunk: &[u8]) -> Result<(), OwnerError> {
        self.admit_chunk(chunk.len())?;
        self.take(Bytes::copy_from_slice(chunk))
    }

    /// Checks a chunk of `len` bytes against the open body and counts it.
    fn admit_chunk(&mut self, len: usize) -> Result<(), OwnerError> {
        self.drained()?;
        let Some(file) = self.file.as_mut() else {
            return Err(OwnerError::state("no file body is open"));
        };
        let len = len as u64;
        if len > self.chunk_bytes {
            let (index, path) = (file.index, file.path.clone());
            return Err(entry_error(
                at(index, "open"),
                IssueCode::TooLarge,
                format!("{path}: a chunk of {len} bytes is larger than policy.transfers.chunkBytes ({})", self.chunk_bytes),
            ));
        }
        if len > file.remaining {
            let (index, path) = (file.index, file.path.clone());
            return Err(entry_error(
                at(index, "byteLength"),
                IssueCode::TooLarge,
                format!("{path}: the body is longer than its declared byteLength"),
            ));
        }
        file.remaining -= len;
        self.progress.add_bytes(len);
        Ok(())
    }

    /// The end of the open file's body, checked and taken at once (never waits); refused while
    /// a drain is due.
    pub fn end_file_now(&mut self) -> Result<(), OwnerError> {
        self.drained()?;
        let Some(file) = self.file.take() else {
            return Err(OwnerError::state("no file body is open"));
        };
        if file.remaining > 0 {
            return Err(entry_error(
                at(file.index, "byteLength"),
                IssueCode::TooSmall,
                format!(
                    "{}: the body ended {} bytes short of its declared byteLength",
                    file.path, file.remaining
                ),
            ));
        }
        let pad = padding(file.declared);
        if pad > 0 {
            self.take(Bytes::from(vec![0u8; pad]))?;
        }
        self.progress.add_file();
        Ok(())
    }

    /// Validates the whole tree, ends the archive and waits for the engine to extract it.
    pub async fn finish(mut self) -> Result<Summary, OwnerError> {
        if self.file.is_some() {
            return Err(OwnerError::state("the last file's body is not complete"));
        }
        let ledger = std::mem::replace(&mut self.ledger, Ledger::new(None, 1, 2));
        ledger.check().await.map_err(|e| match e {
            super::ledger::LedgerError::Spill(message) => OwnerError::driver(message),
            other => entry_error(vec![], IssueCode::Duplicate, other.to_string()),
        })?;
        self.take(end_of_archive().into())?;
        self.queue_gathered();
        self.drain().await?;
        self.sink.take();
        match self.done.take() {
            Some(done) => done.await?,
            None => return Err(OwnerError::state("the import is already finished")),
        }
        Ok(self.summary)
    }

    /// Abandons the archive unfinished: the upload itself is dropped first (the driver ends its
    /// request, so the engine sees a broken upload rather than a short archive that ends
    /// cleanly), then the queue. Nothing waits on the engine.
    pub async fn abort(mut self) {
        drop(self.done.take());
        self.sink.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::tar_write::end_of_archive;
    use futures::FutureExt;

    /// An import whose archive goes to a channel of `capacity` pieces the test reads.
    fn session(quotas: TransferQuotas, capacity: usize) -> (ImportSession, mpsc::Receiver<Bytes>) {
        session_with(quotas, capacity, None, TransferBuffers::DEFAULT)
    }

    /// `session`, spilling its ledger to `spill` with `buffers`.
    fn session_with(
        quotas: TransferQuotas,
        capacity: usize,
        spill: Option<std::path::PathBuf>,
        buffers: TransferBuffers,
    ) -> (ImportSession, mpsc::Receiver<Bytes>) {
        let done = futures::future::ready(Ok(())).boxed();
        upload_session(done, quotas, capacity, spill, buffers)
    }

    /// `session_with`, whose upload ends with `done`.
    fn upload_session(
        done: BoxFuture<'static, Result<(), OwnerError>>,
        quotas: TransferQuotas,
        capacity: usize,
        spill: Option<std::path::PathBuf>,
        buffers: TransferBuffers,
    ) -> (ImportSession, mpsc::Receiver<Bytes>) {
        let (sink, archive) = mpsc::channel(capacity);
        let upload = ArchiveUpload { sink, done };
        let settings = TransferSettings {
            uid: 65_532,
            gid: 65_532,
            spill_directory: spill,
        };
        (
            ImportSession::new(upload, &settings, buffers, quotas),
            archive,
        )
    }

    /// The steps of a directory and `files` files of `size` bytes, run as the JavaScript import
    /// runs them: each taken at once, a drain whenever one is due.
    async fn take_all(session: &mut ImportSession, files: u32, size: usize) -> usize {
        async fn drain_if_due(session: &mut ImportSession, drains: &mut usize) {
            if session.drain_due() {
                session.drain().await.expect("drained");
                *drains += 1;
            }
        }
        let mut drains = 0;
        session.directory_now(0, "d".into()).expect("directory");
        for index in 1..=files {
            drain_if_due(session, &mut drains).await;
            let path = format!("d/f{index}");
            session
                .begin_file_now(index, path, size as u64, false)
                .expect("header");
            drain_if_due(session, &mut drains).await;
            session
                .chunk_now(Bytes::from(vec![7u8; size]))
                .expect("chunk");
            drain_if_due(session, &mut drains).await;
            session.end_file_now().expect("end");
        }
        drains
    }

    async fn archive_of(session: ImportSession, mut archive: mpsc::Receiver<Bytes>) -> Vec<u8> {
        let reader = tokio::spawn(async move {
            let mut bytes = Vec::new();
            while let Some(piece) = archive.recv().await {
                bytes.extend_from_slice(&piece);
            }
            bytes
        });
        session.finish().await.expect("finished");
        reader.await.expect("reader")
    }

    /// The header fields of every 512-byte block but their modification times (each session
    /// reads the clock once).
    fn without_mtimes(mut archive: Vec<u8>) -> Vec<u8> {
        for block in archive.chunks_mut(512) {
            if block.len() == 512 && block[257..262] == *b"ustar" {
                block[136..148].fill(0);
                block[148..156].fill(0);
            }
        }
        archive
    }

    #[tokio::test]
    async fn steps_taken_at_once_write_the_archive_of_their_entries() {
        let (mut now, archive) = session(TransferQuotas::default(), 1_024);
        let drains = take_all(&mut now, 200, 4_096).await;
        // One drain per 64 KiB of archive, not one per step.
        assert!((12..=16).contains(&drains), "{drains} drains");
        let written = without_mtimes(archive_of(now, archive).await);
        // The same archive built block by block: a directory, each file's header and body
        // (4,096 bytes: no padding), the end.
        let owner = Ownership {
            uid: 65_532,
            gid: 65_532,
        };
        let mut expected = entry_header("d", true, 0, 0o755, owner, 0);
        for index in 1..=200 {
            let path = format!("d/f{index}");
            expected.extend(entry_header(&path, false, 4_096, 0o644, owner, 0));
            expected.extend(vec![7u8; 4_096]);
        }
        expected.extend(end_of_archive());
        assert_eq!(written.len(), expected.len());
        assert!(written == without_mtimes(expected), "the archives differ");
    }

    #[tokio::test]
    async fn a_full_ledger_batch_calls_for_a_drain_that_spills_it() {
        let spill = std::env::temp_dir().join(crate::digest::fresh_id("import-spill"));
        std::fs::create_dir(&spill).expect("spill directory");
        let buffers = TransferBuffers {
            metadata_batch_bytes: 64,
            ..TransferBuffers::DEFAULT
        };
        let (mut session, _archive) = session_with(
            TransferQuotas::default(),
            1_024,
            Some(spill.clone()),
            buffers,
        );
        let mut taken = 0;
        // Directory headers alone stay below the gathering size: only the ledger calls here.
        while !session.drain_due() {
            session
                .directory_now(taken, format!("d{taken}"))
                .expect("a directory");
            taken += 1;
        }
        assert!(taken > 1 && session.queued.is_empty() && session.ledger.spill_due());
        assert!(session.directory_now(taken, "late".into()).is_err());
        session.drain().await.expect("spilled");
        assert!(!session.ledger.spill_due());
        assert_eq!(session.ledger.spilled_records(), u64::from(taken));
        session.abort().await;
        std::fs::remove_dir(&spill).expect("no spill file is left");
    }

    #[tokio::test]
    async fn a_step_that_never_waits_takes_nothing_while_a_drain_is_due() {
        let (mut session, _archive) = session(TransferQuotas::default(), 1_024);
        session
            .begin_file_now(0, "big".into(), 70_000, false)
            .expect("header");
        session
            .chunk_now(Bytes::from(vec![1u8; 65_536]))
            .expect("a whole chunk");
        assert!(session.drain_due());
        let refused = session.chunk_now(Bytes::from(vec![1u8; 4_464]));
        assert_eq!(
            refused,
            Err(OwnerError::state(
                "the import must deliver what it holds before it takes more"
            ))
        );
        session.drain().await.expect("drained");
        assert!(!session.drain_due());
        session
            .chunk_now(Bytes::from(vec![1u8; 4_464]))
            .expect("taken after the drain");
        session.end_file_now().expect("the body is complete");
    }

    #[tokio::test]
    async fn a_chunk_the_caller_keeps_is_checked_before_it_is_taken() {
        let (mut session, _archive) = session(TransferQuotas::default(), 1_024);
        let limit = TransferBuffers::DEFAULT.chunk_bytes as usize;
        session
            .begin_file_now(0, "f".into(), 3, false)
            .expect("header");
        let before = session.summary.archive_bytes;
        let too_large = session
            .chunk_now_copied(&vec![1u8; limit + 1])
            .expect_err("larger than chunkBytes");
        assert!(
            format!("{too_large:?}").contains("chunkBytes"),
            "{too_large:?}"
        );
        assert_eq!(session.summary.archive_bytes, before, "nothing was taken");
        session.chunk_now_copied(&[1u8; 1]).expect("one byte");
        let longer = session
            .chunk_now_copied(&[1u8; 3])
            .expect_err("past the declared length");
        assert!(format!("{longer:?}").contains("longer than"), "{longer:?}");
    }

    #[tokio::test]
    async fn steps_that_take_no_bytes_still_call_for_a_drain() {
        let (mut session, _archive) = session(TransferQuotas::default(), 1_024);
        session
            .begin_file_now(0, "f".into(), 0, false)
            .expect("header");
        session.drain().await.expect("drained");
        let mut taken = 0;
        while !session.drain_due() {
            session.chunk_now(Bytes::new()).expect("an empty chunk");
            taken += 1;
        }
        assert_eq!(taken, STEPS_PER_DRAIN);
        assert!(
            session.chunk_now(Bytes::new()).is_err(),
            "refused until drained"
        );
        session.drain().await.expect("drained");
        session
            .chunk_now(Bytes::new())
            .expect("taken after the drain");
    }

    #[tokio::test]
    async fn a_refused_step_fails_at_once_and_takes_nothing() {
        let quotas = TransferQuotas {
            max_files: Some(1),
            ..TransferQuotas::default()
        };
        let (mut session, _archive) = session(quotas, 1_024);
        session
            .begin_file_now(0, "a".into(), 1, false)
            .expect("first");
        session.chunk_now(Bytes::from_static(b"x")).expect("body");
        session.end_file_now().expect("end");
        let before = session.summary.archive_bytes;
        let over = session
            .begin_file_now(1, "b".into(), 1, false)
            .expect_err("past maxFiles");
        assert!(format!("{over:?}").contains("maxFiles"), "{over:?}");
        assert_eq!(session.summary.archive_bytes, before, "no header was taken");
        let invalid = session
            .directory_now(2, "../out".into())
            .expect_err("an escaping path");
        assert!(format!("{invalid:?}").contains("path"), "{invalid:?}");
        let short = {
            let (mut other, _a) = self::session(TransferQuotas::default(), 1_024);
            other
                .begin_file_now(3, "s".into(), 5, true)
                .expect("header");
            other.chunk_now(Bytes::from_static(b"abc")).expect("body");
            other.end_file_now().expect_err("short")
        };
        assert!(format!("{short:?}").contains("2 bytes short"), "{short:?}");
    }

    /// An import whose archive nobody takes any more (the upload ended), with `done` as the
    /// upload's own outcome.
    fn refused_session(done: BoxFuture<'static, Result<(), OwnerError>>) -> ImportSession {
        let quotas = TransferQuotas::default();
        let (session, archive) = upload_session(done, quotas, 1, None, TransferBuffers::DEFAULT);
        drop(archive);
        session
    }

    /// A body large enough to go to the engine at the next drain, not gathered with others.
    fn queue_a_large_body(session: &mut ImportSession) {
        let size = GATHER_BYTES;
        session
            .begin_file_now(0, "f".into(), size as u64, false)
            .expect("header");
        session
            .chunk_now(Bytes::from(vec![7u8; size]))
            .expect("chunk");
        assert!(session.drain_due());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_send_reports_the_uploads_own_error() {
        let why = OwnerError::driver("the workspace helper ended");
        let mut session = refused_session(futures::future::ready(Err(why)).boxed());
        queue_a_large_body(&mut session);
        let error = session.drain().await.expect_err("refused");
        assert_eq!(
            error,
            OwnerError::operation(
                OperationCode::StreamFailure,
                "the sandbox stopped accepting the import archive: the workspace helper ended"
            )
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_send_waits_for_a_silent_upload_only_within_its_bound() {
        let mut session = refused_session(futures::future::pending().boxed());
        queue_a_large_body(&mut session);
        let started = tokio::time::Instant::now();
        // Paused time: a bound that is not there fails here instead of hanging.
        let error = tokio::time::timeout(UPLOAD_ERROR_WAIT * 2, session.drain())
            .await
            .expect("settled within the bound")
            .expect_err("refused");
        assert_eq!(started.elapsed(), UPLOAD_ERROR_WAIT);
        assert_eq!(
            error,
            OwnerError::operation(
                OperationCode::StreamFailure,
                "the sandbox stopped accepting the import archive"
            )
        );
    }
}
