//! One export: archives of the selected workspace paths from the engine, parsed as untrusted
//! input, delivered entry by entry with paths relative to the workspace. Everything delivered is
//! provisional until `finish` has validated the whole tree.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::ledger::{EntryKind, Ledger, LedgerError};
use super::options::TransferQuotas;
use super::progress::Progress;
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
    File {
        index: usize,
        path: String,
    },
    Subtree {
        path: String,
    },
    /// One archive answering every remaining `File` target in order (`open_export_files`).
    Files,
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
    /// What a caller polls while the export runs (files delivered, their bytes).
    progress: Arc<Progress>,
    subtree_root_seen: bool,
    body_open: bool,
    /// Whether the driver was asked for one archive of the selected files.
    files_asked: bool,
    /// Whether links, devices and FIFOs are left out instead of failing the export.
    skip_others: bool,
    /// Whether commands may run meanwhile (`open_live_export`).
    beside_commands: bool,
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
    /// The running counts, readable while the export runs.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

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
            progress: Arc::default(),
            subtree_root_seen: false,
            body_open: false,
            files_asked: false,
            skip_others: false,
            beside_commands: false,
        })
    }

    /// An export while commands may run (a workspace archive's): the driver reads nothing by
    /// path again after its walk (`DriverReservation::open_live_export`).
    pub fn beside_commands(mut self) -> Self {
        self.beside_commands = true;
        self
    }

    /// An export that leaves out links, devices and FIFOs (a workspace archive's), where an
    /// `exportTree` refuses them.
    pub fn skipping_others(mut self) -> Self {
        self.skip_others = true;
        self
    }

    fn reader(&self, download: crate::lifecycle::driver::ArchiveDownload) -> TarReader {
        let reader = TarReader::new(download);
        if self.skip_others {
            reader.skipping_others()
        } else {
            reader
        }
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
        if !self.files_asked
            && !self.beside_commands
            && matches!(self.targets.front(), Some(Target::File { .. }))
        {
            // Exact files: one archive of all of them when the driver can, else one each.
            self.files_asked = true;
            let paths = self
                .targets
                .iter()
                .filter_map(|target| match target {
                    Target::File { path, .. } => Some(path.clone()),
                    _ => None,
                })
                .collect();
            if let Some(download) = Arc::clone(&self.driver).open_export_files(paths).await? {
                self.current = Some((Target::Files, self.reader(download), true));
                return Ok(true);
            }
        }
        let Some(target) = self.targets.pop_front() else {
            return Ok(false);
        };
        let relative = match &target {
            Target::Workspace | Target::Files => String::new(),
            Target::File { path, .. } | Target::Subtree { path } => path.clone(),
        };
        let driver = Arc::clone(&self.driver);
        let download = if self.beside_commands {
            driver.open_live_export(relative.clone()).await?
        } else {
            driver.open_export(relative.clone()).await?
        };
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
        self.current = Some((target, self.reader(download), false));
        Ok(true)
    }

    /// The next entry, or `None` when every selected archive is read.
    pub async fn next_entry(&mut self) -> Result<Option<ExportEntry>, OwnerError> {
        self.body_open = false;
        loop {
            if self.current.is_none() && !self.open_next().await? {
                return Ok(None);
            }
            if matches!(self.current, Some((Target::Files, _, _))) {
                return self.next_selected_file().await;
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
                self.open_file(&path, raw.size).await?;
            }
            return Ok(Some(ExportEntry {
                path,
                directory: raw.directory,
                byte_length: raw.size,
                executable: !raw.directory && raw.mode & 0o100 != 0,
            }));
        }
    }

    /// Counts a delivered file of `size` bytes against the quotas and the ledger, and opens its
    /// body for `read`.
    async fn open_file(&mut self, path: &str, size: u64) -> Result<(), OwnerError> {
        if let Some(limit) = self.quotas.max_file_bytes {
            if size > limit {
                return Err(quota_error(
                    "maxFileBytes",
                    limit,
                    format!("{path} ({size} bytes)"),
                ));
            }
        }
        self.summary.files += 1;
        self.summary.file_bytes += size;
        self.summary.check(&self.quotas, path)?;
        self.progress.add_file();
        self.progress.add_bytes(size);
        self.ledger
            .add(path, EntryKind::File)
            .await
            .map_err(ledger_error)?;
        self.body_open = true;
        Ok(())
    }

    /// The next requested file from the archive answering all of them (`Target::Files`): an
    /// entry of exactly the requested path, in the requested order; a path the archive skips
    /// does not exist, one answered by a directory entry is not a regular file. After the last
    /// one the archive must end.
    async fn next_selected_file(&mut self) -> Result<Option<ExportEntry>, OwnerError> {
        let Some((_, reader, _)) = self.current.as_mut() else {
            return Err(OwnerError::state("no archive"));
        };
        let raw = reader.next_entry().await.map_err(tar_error)?;
        let Some(Target::File { index, path }) = self.targets.pop_front() else {
            if raw.is_some() {
                return Err(OwnerError::operation(
                    OperationCode::StreamFailure,
                    "the exported archive holds an entry that was not selected",
                ));
            }
            let (_, reader, _) = self
                .current
                .take()
                .ok_or_else(|| OwnerError::state("no archive"))?;
            self.finished_archive_bytes += reader.consumed;
            self.account_archive()?;
            return Ok(None);
        };
        self.account_archive()?;
        let at = || vec!["paths".into(), index.into()];
        let raw = match raw {
            Some(raw) if raw.name.trim_end_matches('/') == path => raw,
            _ => {
                return Err(selection_error(
                    at(),
                    IssueCode::InvalidValue,
                    format!("{path} does not exist in the workspace"),
                ))
            }
        };
        if raw.directory {
            return Err(selection_error(
                at(),
                IssueCode::InvalidValue,
                format!("{path} is not a regular file"),
            ));
        }
        self.open_file(&path, raw.size).await?;
        Ok(Some(ExportEntry {
            path,
            directory: false,
            byte_length: raw.size,
            executable: raw.mode & 0o100 != 0,
        }))
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
        Target::Files => return Err(refuse("not an archive of one root")),
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

/// The fake driver and archive builders of the export tests (also `export_batch`'s).
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use crate::lifecycle::driver::{ReadyFacts, StartContext};
    pub use crate::transfer::options::TransferQuotas;
    pub use crate::transfer::tar_write::{end_of_archive, entry_header, Ownership};
    use futures::future::BoxFuture;
    use futures::StreamExt;
    pub use tar_framing::padding;

    /// A driver whose `open_export_files` answers with `archive` (or cannot, when `None`), and
    /// whose workspace holds nothing for `open_export`.
    pub struct FilesDriver {
        pub archive: Option<Vec<Result<Bytes, String>>>,
    }

    impl DriverReservation for FilesDriver {
        fn start(
            self: Arc<Self>,
            _context: StartContext,
        ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
            Box::pin(async { Err(OwnerError::state("not used")) })
        }
        fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
            Box::pin(async { Ok(()) })
        }
        fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
            Box::pin(async { Ok(()) })
        }
        fn open_export_files(
            self: Arc<Self>,
            _paths: Vec<String>,
        ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
            let archive = self.archive.clone();
            Box::pin(async move { Ok(archive.map(|pieces| futures::stream::iter(pieces).boxed())) })
        }
        fn open_export(
            self: Arc<Self>,
            _relative: String,
        ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
            Box::pin(async { Ok(None) })
        }
    }

    pub use crate::lifecycle::driver::ArchiveDownload;

    pub const OWNER: Ownership = Ownership { uid: 1, gid: 1 };

    pub fn file(path: &str, body: &[u8]) -> Vec<u8> {
        let mut out = entry_header(path, false, body.len() as u64, 0o644, OWNER, 0);
        out.extend_from_slice(body);
        out.extend(vec![0; padding(body.len() as u64)]);
        out
    }

    pub fn directory(path: &str) -> Vec<u8> {
        entry_header(path, true, 0, 0o755, OWNER, 0)
    }

    pub fn archive(parts: Vec<Vec<u8>>) -> Vec<Result<Bytes, String>> {
        let mut all: Vec<u8> = parts.concat();
        all.extend(end_of_archive());
        vec![Ok(Bytes::from(all))]
    }

    pub fn quotas() -> TransferQuotas {
        TransferQuotas {
            max_files: None,
            max_file_bytes: None,
            max_total_bytes: None,
            max_archive_bytes: None,
            max_paths: None,
        }
    }

    /// An export of the files `paths`, answered by `archive`.
    pub async fn files_session(
        archive: Option<Vec<Result<Bytes, String>>>,
        paths: &[&str],
    ) -> ExportSession {
        files_session_with(archive, paths, TransferBuffers::DEFAULT).await
    }

    /// `files_session` with `buffers` (its chunk size).
    pub async fn files_session_with(
        archive: Option<Vec<Result<Bytes, String>>>,
        paths: &[&str],
        buffers: TransferBuffers,
    ) -> ExportSession {
        let driver = Arc::new(FilesDriver { archive });
        let selection = Selection::Files(paths.iter().map(|p| (*p).to_owned()).collect());
        ExportSession::new(driver, selection, None, buffers, quotas())
            .await
            .expect("opened")
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    /// What an export delivered (path and body of each file) and its summary.
    type Exported = Result<(Vec<(String, Vec<u8>)>, Summary), OwnerError>;

    async fn export(archive: Option<Vec<Result<Bytes, String>>>, paths: &[&str]) -> Exported {
        let driver = Arc::new(FilesDriver { archive });
        let selection = Selection::Files(paths.iter().map(|p| (*p).to_owned()).collect());
        let mut session =
            ExportSession::new(driver, selection, None, TransferBuffers::DEFAULT, quotas()).await?;
        let mut delivered = Vec::new();
        while let Some(entry) = session.next_entry().await? {
            let mut body = Vec::new();
            while let Some(chunk) = session.read().await? {
                body.extend_from_slice(&chunk);
            }
            delivered.push((entry.path, body));
        }
        Ok((delivered, session.finish().await?))
    }

    fn message(result: Exported) -> String {
        match result {
            Ok(_) => panic!("the export should fail"),
            Err(OwnerError::Validation(issues)) => issues
                .iter()
                .map(|issue| issue.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
            Err(error) => error.to_string(),
        }
    }

    #[tokio::test]
    async fn one_archive_answers_the_selected_files_in_their_order() {
        let answer = archive(vec![file("b/2", b"two"), file("a", b"one")]);
        let (delivered, summary) = export(Some(answer), &["b/2", "a"]).await.expect("exported");
        assert_eq!(
            delivered,
            vec![
                ("b/2".to_owned(), b"two".to_vec()),
                ("a".to_owned(), b"one".to_vec())
            ]
        );
        assert_eq!(summary.files, 2);
        assert_eq!(summary.file_bytes, 6);
        // Two headers, two body blocks, the two end-of-archive blocks.
        assert_eq!(summary.archive_bytes, 6 * 512);
    }

    #[tokio::test]
    async fn a_skipped_path_is_missing_and_a_directory_answer_is_not_a_regular_file() {
        let skipped = archive(vec![file("b", b"x")]);
        let error = message(export(Some(skipped), &["a", "b"]).await);
        assert!(error.contains("a does not exist"), "{error}");
        let answered = archive(vec![file("a", b"x"), directory("b")]);
        let error = message(export(Some(answered), &["a", "b"]).await);
        assert!(error.contains("b is not a regular file"), "{error}");
    }

    #[tokio::test]
    async fn an_entry_nobody_asked_for_or_a_failure_after_the_archive_fails_the_export() {
        let extra = archive(vec![file("a", b"x"), file("z", b"y")]);
        let error = message(export(Some(extra), &["a"]).await);
        assert!(error.contains("not selected"), "{error}");
        let mut failed = archive(vec![file("a", b"x")]);
        failed.push(Err("the export helper failed (exit status 2): gone".into()));
        let error = message(export(Some(failed), &["a"]).await);
        assert!(error.contains("exit status 2"), "{error}");
    }

    #[tokio::test]
    async fn a_driver_without_one_archive_is_asked_file_by_file() {
        let error = message(export(None, &["a"]).await);
        assert!(error.contains("a does not exist"), "{error}");
    }
}
