//! One import: entries in, a tar stream out to the engine, with exact accounting. Headers are
//! built here; bodies pass through in the caller's chunks. Nothing is held beyond one chunk.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::ledger::{EntryKind, Ledger};
use super::options::TransferQuotas;
use super::summary::{entry_error, quota_error, Summary};
use super::tar_write::{end_of_archive, entry_header, Ownership};
use crate::input::{IssueCode, Seg};
use crate::lifecycle::driver::{ArchiveUpload, TransferSettings};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::paths::{check, Anchor};
use crate::policy::request::TransferBuffers;
use crate::tar_block::padding;

/// Pieces smaller than this (headers, padding, small bodies) are gathered into one piece of about
/// this size before they go to the engine, so a tree of small files costs few sends.
const GATHER_BYTES: usize = 64 * 1_024;
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
    /// Small pieces not yet sent: less than `GATHER_BYTES`, sent before anything larger.
    gathered: BytesMut,
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
}

fn at(index: u32, field: &str) -> Vec<Seg> {
    vec![Seg::Index(index as usize), Seg::Key(field.into())]
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
        }
    }

    /// Adds `bytes` to the archive: counted against the quotas at once, sent with the pieces
    /// gathered before it.
    async fn send(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        self.summary.archive_bytes += bytes.len() as u64;
        self.summary.check(&self.quotas, "the archive")?;
        if self.gathered.len() + bytes.len() < GATHER_BYTES {
            self.gathered.extend_from_slice(&bytes);
            return Ok(());
        }
        self.flush().await?;
        if bytes.len() < GATHER_BYTES {
            self.gathered.extend_from_slice(&bytes);
            Ok(())
        } else {
            self.deliver(bytes).await
        }
    }

    /// Sends what is gathered, if anything.
    async fn flush(&mut self) -> Result<(), OwnerError> {
        if self.gathered.is_empty() {
            return Ok(());
        }
        let gathered = self.gathered.split().freeze();
        self.deliver(gathered).await
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
    async fn ancestors(&mut self, path: &str) -> Result<(), OwnerError> {
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
            self.send(header.into()).await?;
            self.chain.push(directory);
        }
        Ok(())
    }

    pub async fn directory(&mut self, index: u32, path: String) -> Result<(), OwnerError> {
        self.checked_path(index, &path)?;
        self.ledger
            .add(&path, EntryKind::Directory)
            .await
            .map_err(|e| OwnerError::driver(e.to_string()))?;
        self.ancestors(&path).await?;
        let header = entry_header(&path, true, 0, 0o755, self.owner, self.mtime);
        self.send(header.into()).await?;
        self.chain.push(path);
        self.summary.directories += 1;
        Ok(())
    }

    pub async fn begin_file(
        &mut self,
        index: u32,
        path: String,
        byte_length: u64,
        executable: bool,
    ) -> Result<(), OwnerError> {
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
        self.ledger
            .add(&path, EntryKind::File)
            .await
            .map_err(|e| OwnerError::driver(e.to_string()))?;
        self.ancestors(&path).await?;
        let mode = if executable { 0o755 } else { 0o644 };
        let header = entry_header(&path, false, byte_length, mode, self.owner, self.mtime);
        self.send(header.into()).await?;
        self.file = Some(OpenFile {
            index,
            path,
            declared: byte_length,
            remaining: byte_length,
        });
        Ok(())
    }

    pub async fn chunk(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        let Some(file) = self.file.as_mut() else {
            return Err(OwnerError::state("no file body is open"));
        };
        let len = bytes.len() as u64;
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
        self.send(bytes).await
    }

    pub async fn end_file(&mut self) -> Result<(), OwnerError> {
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
            self.send(Bytes::from(vec![0u8; pad])).await?;
        }
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
        self.send(end_of_archive().into()).await?;
        self.flush().await?;
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
