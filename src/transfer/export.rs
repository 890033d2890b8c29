//! One export: archives of the selected workspace paths from the engine, parsed as untrusted
//! input, delivered entry by entry with paths relative to the workspace. Everything delivered is
//! provisional until `finish` has validated the whole tree.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::ledger::{EntryKind, Ledger, LedgerError};
use super::options::TransferQuotas;
use super::summary::{entry_error, quota_error, Summary};
use super::tar_read::{TarError, TarReader};
use crate::input::{IssueCode, Seg};
use crate::lifecycle::driver::DriverReservation;
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::paths::{check, Anchor};
use crate::policy::request::TransferBuffers;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    Workspace,
    Files(Vec<String>),
    Subtree(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Workspace,
    File { index: usize, path: String },
    Subtree { path: String },
}

/// One delivered entry's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportEntry {
    pub path: String,
    pub directory: bool,
    pub byte_length: u64,
    pub executable: bool,
}

pub struct ExportSession {
    driver: Arc<dyn DriverReservation>,
    targets: VecDeque<Target>,
    current: Option<(Target, TarReader, bool)>,
    finished_archive_bytes: u64,
    ledger: Ledger,
    quotas: TransferQuotas,
    chunk_bytes: u64,
    summary: Summary,
    subtree_root_seen: bool,
    body_open: bool,
}

fn selection_error(path: Vec<Seg>, code: IssueCode, message: String) -> OwnerError {
    entry_error(path, code, message)
}

fn tar_error(error: TarError) -> OwnerError {
    match error {
        TarError::Transport(message) => {
            OwnerError::operation(OperationCode::StreamFailure, message)
        }
        other => OwnerError::operation(
            OperationCode::StreamFailure,
            format!("the exported archive was refused: {other}"),
        ),
    }
}

fn ledger_error(error: LedgerError) -> OwnerError {
    match error {
        LedgerError::Spill(message) => OwnerError::driver(message),
        other => OwnerError::operation(
            OperationCode::StreamFailure,
            format!("the exported tree is invalid: {other}"),
        ),
    }
}

impl ExportSession {
    /// Validates the selection (paths, `maxPaths`, duplicates and conflicts among requested
    /// files) before any engine call.
    pub async fn new(
        driver: Arc<dyn DriverReservation>,
        selection: Selection,
        spill: Option<&std::path::Path>,
        buffers: TransferBuffers,
        quotas: TransferQuotas,
    ) -> Result<Self, OwnerError> {
        let roots: u64 = match &selection {
            Selection::Workspace => 0,
            Selection::Files(paths) => paths.len() as u64,
            Selection::Subtree(_) => 1,
        };
        if let Some(limit) = quotas.max_paths {
            if roots > limit {
                return Err(quota_error(
                    "maxPaths",
                    limit,
                    format!("the selection's {roots} path(s)"),
                ));
            }
        }
        let mut selection_ledger =
            Ledger::new(spill, buffers.metadata_batch_bytes, buffers.merge_fan_in);
        let targets: VecDeque<Target> = match selection {
            Selection::Workspace => VecDeque::from([Target::Workspace]),
            Selection::Subtree(path) => {
                check(&path, Anchor::Relative).map_err(|(code, message)| {
                    selection_error(vec!["path".into()], code, format!("{path:?}: {message}"))
                })?;
                VecDeque::from([Target::Subtree { path }])
            }
            Selection::Files(paths) => {
                let mut targets = VecDeque::with_capacity(paths.len());
                for (index, path) in paths.into_iter().enumerate() {
                    check(&path, Anchor::Relative).map_err(|(code, message)| {
                        selection_error(
                            vec!["paths".into(), index.into()],
                            code,
                            format!("{path:?}: {message}"),
                        )
                    })?;
                    selection_ledger
                        .add(&path, EntryKind::File)
                        .await
                        .map_err(ledger_error)?;
                    targets.push_back(Target::File { index, path });
                }
                selection_ledger.check().await.map_err(|e| {
                    selection_error(vec!["paths".into()], IssueCode::Duplicate, e.to_string())
                })?;
                targets
            }
        };
        Ok(Self {
            driver,
            targets,
            current: None,
            finished_archive_bytes: 0,
            ledger: Ledger::new(spill, buffers.metadata_batch_bytes, buffers.merge_fan_in),
            quotas,
            chunk_bytes: buffers.chunk_bytes,
            summary: Summary::default(),
            subtree_root_seen: false,
            body_open: false,
        })
    }

    fn archive_bytes(&self) -> u64 {
        self.finished_archive_bytes
            + self
                .current
                .as_ref()
                .map_or(0, |(_, reader, _)| reader.consumed)
    }

    fn account_archive(&mut self) -> Result<(), OwnerError> {
        self.summary.archive_bytes = self.archive_bytes();
        self.summary.check(&self.quotas, "the export")
    }

    async fn open_next(&mut self) -> Result<bool, OwnerError> {
        let Some(target) = self.targets.pop_front() else {
            return Ok(false);
        };
        let relative = match &target {
            Target::Workspace => String::new(),
            Target::File { path, .. } | Target::Subtree { path } => path.clone(),
        };
        let download = Arc::clone(&self.driver)
            .open_export(relative.clone())
            .await?;
        let Some(download) = download else {
            let at = match &target {
                Target::File { index, .. } => vec!["paths".into(), (*index).into()],
                _ => vec!["path".into()],
            };
            return Err(selection_error(
                at,
                IssueCode::InvalidValue,
                format!("{relative} does not exist in the workspace"),
            ));
        };
        self.current = Some((target, TarReader::new(download), false));
        Ok(true)
    }

    /// The next entry, or `None` when every selected archive is read.
    pub async fn next_entry(&mut self) -> Result<Option<ExportEntry>, OwnerError> {
        self.body_open = false;
        loop {
            if self.current.is_none() && !self.open_next().await? {
                return Ok(None);
            }
            let Some((target, reader, seen_root)) = self.current.as_mut() else {
                continue;
            };
            let raw = reader.next_entry().await.map_err(tar_error)?;
            let Some(raw) = raw else {
                let (target, reader, seen_root) = self
                    .current
                    .take()
                    .ok_or_else(|| OwnerError::state("no archive"))?;
                self.finished_archive_bytes += reader.consumed;
                self.account_archive()?;
                if !seen_root && !matches!(target, Target::Workspace) {
                    return Err(OwnerError::operation(
                        OperationCode::StreamFailure,
                        "an exported archive held no root entry",
                    ));
                }
                continue;
            };
            let first = !*seen_root;
            *seen_root = true;
            let target = target.clone();
            let mapped = map_name(&target, &raw.name, first)?;
            self.account_archive()?;
            let Some(path) = mapped else { continue };
            if let Target::File {
                index,
                path: wanted,
            } = &target
            {
                if raw.directory || !first {
                    return Err(selection_error(
                        vec!["paths".into(), (*index).into()],
                        IssueCode::InvalidValue,
                        format!("{wanted} is not a regular file"),
                    ));
                }
            }
            if let Target::Subtree { path: root } = &target {
                if first {
                    if !raw.directory {
                        return Err(selection_error(
                            vec!["path".into()],
                            IssueCode::InvalidValue,
                            format!("{root} is not a directory"),
                        ));
                    }
                    self.subtree_root_seen = true;
                }
            }
            check(&path, Anchor::Relative).map_err(|(_, message)| {
                OwnerError::operation(
                    OperationCode::StreamFailure,
                    format!("the exported entry {path:?} was refused: {message}"),
                )
            })?;
            if raw.directory {
                self.summary.directories += 1;
                self.ledger
                    .add(&path, EntryKind::Directory)
                    .await
                    .map_err(ledger_error)?;
            } else {
                if let Some(limit) = self.quotas.max_file_bytes {
                    if raw.size > limit {
                        return Err(quota_error(
                            "maxFileBytes",
                            limit,
                            format!("{path} ({} bytes)", raw.size),
                        ));
                    }
                }
                self.summary.files += 1;
                self.summary.file_bytes += raw.size;
                self.summary.check(&self.quotas, &path)?;
                self.ledger
                    .add(&path, EntryKind::File)
                    .await
                    .map_err(ledger_error)?;
                self.body_open = true;
            }
            return Ok(Some(ExportEntry {
                path,
                directory: raw.directory,
                byte_length: raw.size,
                executable: !raw.directory && raw.mode & 0o100 != 0,
            }));
        }
    }

    /// Up to `chunkBytes` of the current file's body; `None` at its end.
    pub async fn read(&mut self) -> Result<Option<Bytes>, OwnerError> {
        if !self.body_open {
            return Ok(None);
        }
        let chunk_bytes = usize::try_from(self.chunk_bytes).unwrap_or(usize::MAX);
        let Some((_, reader, _)) = self.current.as_mut() else {
            return Ok(None);
        };
        let chunk = reader.read_body(chunk_bytes).await.map_err(tar_error)?;
        if chunk.is_none() {
            self.body_open = false;
        }
        self.account_archive()?;
        Ok(chunk)
    }

    /// Validates the whole delivered tree; only then is the export's output final.
    pub async fn finish(mut self) -> Result<Summary, OwnerError> {
        if self.current.is_some() || !self.targets.is_empty() {
            return Err(OwnerError::state("the export was not read to its end"));
        }
        let ledger = std::mem::replace(&mut self.ledger, Ledger::new(None, 1, 2));
        ledger.check().await.map_err(ledger_error)?;
        self.summary.archive_bytes = self.finished_archive_bytes;
        self.summary.check(&self.quotas, "the export")?;
        Ok(self.summary)
    }
}

/// Maps an archive name to a workspace path. The engine names entries after the basename of
/// the downloaded path; `None` for the workspace root itself, which is not an entry.
fn map_name(target: &Target, name: &str, first: bool) -> Result<Option<String>, OwnerError> {
    let refuse = |why: &str| {
        OwnerError::operation(
            OperationCode::StreamFailure,
            format!("the exported entry {name:?} was refused: {why}"),
        )
    };
    if name.starts_with('/') || name.split('/').any(|part| part == "..") {
        return Err(refuse("absolute or escaping name"));
    }
    let (root_name, base) = match target {
        Target::Workspace => ("workspace", None),
        Target::File { path, .. } | Target::Subtree { path } => {
            (path.rsplit('/').next().unwrap_or(path), Some(path.as_str()))
        }
    };
    let rest = if name == root_name {
        None
    } else if let Some(rest) = name
        .strip_prefix(root_name)
        .and_then(|r| r.strip_prefix('/'))
    {
        Some(rest)
    } else {
        return Err(refuse("outside the selected root"));
    };
    if first != rest.is_none() {
        return Err(refuse(
            "the selected root is missing, repeated or not first",
        ));
    }
    Ok(match (base, rest) {
        (None, None) => None,
        (None, Some(rest)) => Some(rest.to_owned()),
        (Some(base), None) => Some(base.to_owned()),
        (Some(base), Some(rest)) => Some(format!("{base}/{rest}")),
    })
}
