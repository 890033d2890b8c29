//! The metadata ledger: finds duplicate paths and file/ancestor conflicts in a tree of any size
//! with bounded memory. Paths are collected in sorted batches of at most `batch_bytes`; full
//! batches spill to files (created exclusively in the caller's spill directory and unlinked at
//! once, so nothing outlives the process) and are merged `fan_in` at a time.
//!
//! Keys replace `/` with NUL, so every path sorts directly before its descendants: a conflict is
//! then always between neighbours in sorted order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::digest::fresh_id;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKind {
    Directory = 0,
    File = 1,
}

/// Why a tree is not a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("path {0} appears more than once")]
    Duplicate(String),
    #[error("{descendant} lies under {file}, which is a file")]
    UnderFile { file: String, descendant: String },
    #[error("metadata spill failed: {0}")]
    Spill(String),
}

pub struct Ledger {
    batch_bytes: usize,
    batch: Vec<(Vec<u8>, EntryKind)>,
    batch_size: usize,
    /// `None` keeps everything in memory.
    runs: Option<Runs>,
}

/// Spilled sorted runs, by merge level: `fan_in` runs of one level merge into one run of the
/// next (tiered merging), so every record is rewritten at most once per level:
/// `log_fan_in(paths / batch)` times, never once per spill.
struct Runs {
    directory: PathBuf,
    fan_in: usize,
    levels: Vec<Vec<File>>,
    /// Records written to spill files so far (what the merge costs).
    written: u64,
}

const RECORD_OVERHEAD: usize = 5;

fn key(path: &str) -> Vec<u8> {
    path.bytes()
        .map(|b| if b == b'/' { 0 } else { b })
        .collect()
}

fn path_of(key: &[u8]) -> String {
    String::from_utf8_lossy(
        &key.iter()
            .map(|&b| if b == 0 { b'/' } else { b })
            .collect::<Vec<_>>(),
    )
    .into_owned()
}

fn spill_error(e: std::io::Error) -> LedgerError {
    LedgerError::Spill(e.to_string())
}

/// Runs file work on tokio's blocking pool: spill files are host files, and their creation,
/// writes and merges must never hold a runtime worker.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, LedgerError> + Send + 'static,
) -> Result<T, LedgerError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(LedgerError::Spill(format!("the spill task failed: {e}"))))
}

impl Ledger {
    /// `spill_directory: None` keeps everything in memory (for callers with known-small sets).
    pub fn new(spill_directory: Option<&Path>, batch_bytes: u64, fan_in: u64) -> Self {
        Self {
            batch_bytes: usize::try_from(batch_bytes).unwrap_or(usize::MAX).max(1),
            batch: Vec::new(),
            batch_size: 0,
            runs: spill_directory.map(|directory| Runs {
                directory: directory.to_path_buf(),
                fan_in: usize::try_from(fan_in).unwrap_or(2).max(2),
                levels: Vec::new(),
                written: 0,
            }),
        }
    }

    pub async fn add(&mut self, path: &str, kind: EntryKind) -> Result<(), LedgerError> {
        self.record(path, kind);
        self.spill_if_due().await
    }

    /// Records `path` in memory only (never waits): `spill_if_due` writes the batch out once
    /// it is full. Between the two, the batch may pass its size by the records made meanwhile.
    pub fn record(&mut self, path: &str, kind: EntryKind) {
        let key = key(path);
        self.batch_size += key.len() + RECORD_OVERHEAD;
        self.batch.push((key, kind));
    }

    /// Whether the in-memory batch is full and has somewhere to spill to.
    pub fn spill_due(&self) -> bool {
        self.batch_size >= self.batch_bytes && self.runs.is_some()
    }

    /// Spills the in-memory batch if it is full.
    pub async fn spill_if_due(&mut self) -> Result<(), LedgerError> {
        if self.spill_due() {
            self.spill().await?;
        }
        Ok(())
    }

    async fn spill(&mut self) -> Result<(), LedgerError> {
        let batch = std::mem::take(&mut self.batch);
        self.batch_size = 0;
        let Some(mut runs) = self.runs.take() else {
            return Err(LedgerError::Spill("no spill directory".into()));
        };
        self.runs = Some(
            off_runtime(move || {
                runs.spill_batch(batch)?;
                Ok(runs)
            })
            .await?,
        );
        Ok(())
    }

    /// Records written to spill files so far.
    pub fn spilled_records(&self) -> u64 {
        self.runs.as_ref().map_or(0, |runs| runs.written)
    }

    /// Checks the whole set. Consumes the ledger; spill files close here.
    pub async fn check(self) -> Result<(), LedgerError> {
        off_runtime(move || self.check_blocking()).await
    }

    fn check_blocking(mut self) -> Result<(), LedgerError> {
        let mut checker = Checker::default();
        let spilled = self
            .runs
            .as_ref()
            .is_some_and(|runs| runs.levels.iter().any(|level| !level.is_empty()));
        let Some(mut runs) = self.runs.take().filter(|_| spilled) else {
            self.batch.sort_unstable();
            for (key, kind) in &self.batch {
                checker.next(key, *kind)?;
            }
            return Ok(());
        };
        if !self.batch.is_empty() {
            runs.spill_batch(std::mem::take(&mut self.batch))?;
        }
        runs.merge_all(|key, kind| checker.next(key, kind))
    }
}

impl Runs {
    fn spill_file(&self) -> Result<File, LedgerError> {
        let path = self
            .directory
            .join(format!(".native-sandbox-{}.spill", fresh_id("run")));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(spill_error)?;
        // Unlinked at once: the open handle is the only reference, released by close or by the
        // operating system if the process dies.
        std::fs::remove_file(&path).map_err(spill_error)?;
        Ok(file)
    }

    /// Sorts and writes one batch as a level-0 run, then merges every level that is full.
    fn spill_batch(&mut self, mut batch: Vec<(Vec<u8>, EntryKind)>) -> Result<(), LedgerError> {
        batch.sort_unstable();
        let mut file = self.spill_file()?;
        {
            let mut writer = BufWriter::new(&mut file);
            for (key, kind) in &batch {
                write_record(&mut writer, key, *kind)?;
            }
            writer.flush().map_err(spill_error)?;
        }
        self.written += batch.len() as u64;
        self.push(0, file)
    }

    fn push(&mut self, level: usize, run: File) -> Result<(), LedgerError> {
        if self.levels.len() <= level {
            self.levels.resize_with(level + 1, Vec::new);
        }
        self.levels[level].push(run);
        if self.levels[level].len() >= self.fan_in {
            let group = std::mem::take(&mut self.levels[level]);
            let merged = self.merge_into_run(group)?;
            self.push(level + 1, merged)?;
        }
        Ok(())
    }

    fn merge_into_run(&mut self, runs: Vec<File>) -> Result<File, LedgerError> {
        let mut out = self.spill_file()?;
        let mut written = 0u64;
        {
            let mut writer = BufWriter::new(&mut out);
            merge(runs, |key, kind| {
                written += 1;
                write_record(&mut writer, key, kind)
            })?;
            writer.flush().map_err(spill_error)?;
        }
        self.written += written;
        Ok(out)
    }

    /// Merges every run, smallest levels first, `fan_in` at a time, into `emit`.
    fn merge_all(
        mut self,
        emit: impl FnMut(&[u8], EntryKind) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let mut all: std::collections::VecDeque<File> = std::mem::take(&mut self.levels)
            .into_iter()
            .flatten()
            .collect();
        while all.len() > self.fan_in {
            let group: Vec<File> = all.drain(..self.fan_in).collect();
            let merged = self.merge_into_run(group)?;
            all.push_back(merged);
        }
        merge(all.into_iter().collect(), emit)
    }
}

#[derive(Default)]
struct Checker {
    previous: Option<(Vec<u8>, EntryKind)>,
}

impl Checker {
    fn next(&mut self, key: &[u8], kind: EntryKind) -> Result<(), LedgerError> {
        if let Some((previous, previous_kind)) = &self.previous {
            if previous.as_slice() == key {
                return Err(LedgerError::Duplicate(path_of(key)));
            }
            if *previous_kind == EntryKind::File
                && key.len() > previous.len()
                && key.starts_with(previous)
                && key[previous.len()] == 0
            {
                return Err(LedgerError::UnderFile {
                    file: path_of(previous),
                    descendant: path_of(key),
                });
            }
        }
        self.previous = Some((key.to_vec(), kind));
        Ok(())
    }
}

fn write_record(writer: &mut impl Write, key: &[u8], kind: EntryKind) -> Result<(), LedgerError> {
    let len = u32::try_from(key.len()).map_err(|_| LedgerError::Spill("path too long".into()))?;
    writer.write_all(&len.to_le_bytes()).map_err(spill_error)?;
    writer.write_all(&[kind as u8]).map_err(spill_error)?;
    writer.write_all(key).map_err(spill_error)
}

struct RunReader {
    reader: BufReader<File>,
}

impl RunReader {
    fn open(mut file: File) -> Result<Self, LedgerError> {
        file.seek(SeekFrom::Start(0)).map_err(spill_error)?;
        Ok(Self {
            reader: BufReader::with_capacity(16 * 1024, file),
        })
    }

    fn next(&mut self) -> Result<Option<(Vec<u8>, EntryKind)>, LedgerError> {
        let mut len = [0u8; 4];
        match self.reader.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(spill_error(e)),
        }
        let mut kind = [0u8; 1];
        self.reader.read_exact(&mut kind).map_err(spill_error)?;
        let mut key = vec![0u8; u32::from_le_bytes(len) as usize];
        self.reader.read_exact(&mut key).map_err(spill_error)?;
        let kind = if kind[0] == 0 {
            EntryKind::Directory
        } else {
            EntryKind::File
        };
        Ok(Some((key, kind)))
    }
}

struct Head {
    key: Vec<u8>,
    kind: EntryKind,
    run: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // A min-heap through BinaryHeap's max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        (&other.key, other.kind, other.run).cmp(&(&self.key, self.kind, self.run))
    }
}

fn merge(
    runs: Vec<File>,
    mut emit: impl FnMut(&[u8], EntryKind) -> Result<(), LedgerError>,
) -> Result<(), LedgerError> {
    let mut readers = runs
        .into_iter()
        .map(RunReader::open)
        .collect::<Result<Vec<_>, _>>()?;
    let mut heap = BinaryHeap::with_capacity(readers.len());
    for (run, reader) in readers.iter_mut().enumerate() {
        if let Some((key, kind)) = reader.next()? {
            heap.push(Head { key, kind, run });
        }
    }
    while let Some(Head { key, kind, run }) = heap.pop() {
        emit(&key, kind)?;
        if let Some((key, kind)) = readers[run].next()? {
            heap.push(Head { key, kind, run });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spill() -> PathBuf {
        let dir = std::env::temp_dir().join(fresh_id("ledger-test"));
        std::fs::create_dir(&dir).expect("spill dir");
        dir
    }

    fn check(
        paths: &[(&str, EntryKind)],
        batch: u64,
        fan_in: u64,
    ) -> (Result<(), LedgerError>, u64) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let dir = spill();
        let result = runtime.block_on(async {
            let mut ledger = Ledger::new(Some(&dir), batch, fan_in);
            for (path, kind) in paths {
                ledger.add(path, *kind).await.expect("add");
            }
            let spilled = ledger.spilled_records();
            (ledger.check().await, spilled)
        });
        let left = std::fs::read_dir(&dir).expect("read dir").count();
        std::fs::remove_dir(&dir).expect("spill directory is empty");
        assert_eq!(left, 0, "spill files are unlinked at creation");
        result
    }

    use EntryKind::{Directory as D, File as F};

    #[test]
    fn a_record_never_spills_and_says_when_a_spill_is_due() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let dir = spill();
        runtime.block_on(async {
            let mut ledger = Ledger::new(Some(&dir), 64, 2);
            let mut recorded = 0;
            while !ledger.spill_due() {
                ledger.record(&format!("f{recorded}"), F);
                recorded += 1;
            }
            assert!(recorded > 1, "one record fills no 64-byte batch");
            assert_eq!(ledger.spilled_records(), 0, "records stay in memory");
            ledger.spill_if_due().await.expect("spilled");
            assert!(!ledger.spill_due());
            assert_eq!(ledger.spilled_records(), recorded);
            ledger.check().await.expect("no duplicates");
        });
        std::fs::remove_dir(&dir).expect("spill directory is empty");
        // Without a spill directory nothing is ever due: everything stays in memory.
        let mut memory = Ledger::new(None, 1, 2);
        memory.record("a", D);
        assert!(!memory.spill_due());
    }

    #[test]
    fn trees_pass_in_memory_and_spilled() {
        let paths = [("a", D), ("a/b.txt", F), ("a/b", D), ("a/b/c", F), ("z", F)];
        assert_eq!(check(&paths, 1 << 20, 8).0, Ok(()));
        let (result, spilled) = check(&paths, 8, 2);
        assert_eq!(result, Ok(()));
        assert!(spilled >= 1);
    }

    #[test]
    fn duplicates_and_files_with_children_are_found_across_runs() {
        let dup = [("x", F), ("a", D), ("b", F), ("c", F), ("x", F)];
        assert_eq!(check(&dup, 6, 2).0, Err(LedgerError::Duplicate("x".into())));
        let under = [("a/b", F), ("q", D), ("r", D), ("s", D), ("a/b/c", F)];
        assert_eq!(
            check(&under, 6, 3).0,
            Err(LedgerError::UnderFile {
                file: "a/b".into(),
                descendant: "a/b/c".into()
            })
        );
        // A sibling with a longer name is not a descendant.
        assert_eq!(
            check(&[("a/b", F), ("a/bc", F), ("a/b.d", F)], 1 << 20, 8).0,
            Ok(())
        );
    }

    #[test]
    fn many_paths_with_tiny_batches_and_fan_in_two() {
        let names: Vec<String> = (0..2_000).map(|i| format!("d{}/f{i}", i % 7)).collect();
        let mut paths: Vec<(&str, EntryKind)> = names.iter().map(|n| (n.as_str(), F)).collect();
        paths.push(("d3/f10", F));
        assert_eq!(
            check(&paths, 256, 2).0,
            Err(LedgerError::Duplicate("d3/f10".into()))
        );
        paths.pop();
        assert_eq!(check(&paths, 256, 2).0, Ok(()));
    }

    #[test]
    fn merging_is_tiered_so_each_path_is_rewritten_once_per_level() {
        let names: Vec<String> = (0..200_000)
            .map(|i| format!("d{}/f{i:07}", i % 97))
            .collect();
        let paths: Vec<(&str, EntryKind)> = names.iter().map(|n| (n.as_str(), F)).collect();
        // About 4 KiB batches: some 1,200 runs, merged two at a time.
        let (result, written) = check(&paths, 4_096, 2);
        assert_eq!(result, Ok(()));
        let runs = (paths.len() as f64 * 19.0 / 4_096.0).ceil();
        let levels = runs.log2().ceil() as u64 + 2;
        assert!(
            written <= paths.len() as u64 * levels,
            "{written} records written for {} paths: merging is not tiered",
            paths.len()
        );
    }
}
