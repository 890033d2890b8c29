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
    spill_directory: Option<PathBuf>,
    batch_bytes: usize,
    fan_in: usize,
    batch: Vec<(Vec<u8>, EntryKind)>,
    batch_size: usize,
    runs: Vec<File>,
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

impl Ledger {
    /// `spill_directory: None` keeps everything in memory (for callers with known-small sets).
    pub fn new(spill_directory: Option<&Path>, batch_bytes: u64, fan_in: u64) -> Self {
        Self {
            spill_directory: spill_directory.map(Path::to_path_buf),
            batch_bytes: usize::try_from(batch_bytes).unwrap_or(usize::MAX).max(1),
            fan_in: usize::try_from(fan_in).unwrap_or(2).max(2),
            batch: Vec::new(),
            batch_size: 0,
            runs: Vec::new(),
        }
    }

    pub fn add(&mut self, path: &str, kind: EntryKind) -> Result<(), LedgerError> {
        let key = key(path);
        self.batch_size += key.len() + RECORD_OVERHEAD;
        self.batch.push((key, kind));
        if self.batch_size >= self.batch_bytes && self.spill_directory.is_some() {
            self.spill_batch()?;
        }
        Ok(())
    }

    fn spill_file(&self) -> Result<File, LedgerError> {
        let directory = self
            .spill_directory
            .as_ref()
            .ok_or_else(|| LedgerError::Spill("no spill directory".into()))?;
        let path = directory.join(format!(".native-sandbox-{}.spill", fresh_id("run")));
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

    fn spill_batch(&mut self) -> Result<(), LedgerError> {
        let mut batch = std::mem::take(&mut self.batch);
        self.batch_size = 0;
        batch.sort_unstable();
        let mut file = self.spill_file()?;
        {
            let mut writer = BufWriter::new(&mut file);
            for (key, kind) in &batch {
                write_record(&mut writer, key, *kind)?;
            }
            writer.flush().map_err(spill_error)?;
        }
        self.runs.push(file);
        if self.runs.len() >= self.fan_in {
            let runs = std::mem::take(&mut self.runs);
            let merged = self.merge_into_run(runs)?;
            self.runs.push(merged);
        }
        Ok(())
    }

    fn merge_into_run(&self, runs: Vec<File>) -> Result<File, LedgerError> {
        let mut out = self.spill_file()?;
        {
            let mut writer = BufWriter::new(&mut out);
            merge(runs, |key, kind| write_record(&mut writer, key, kind))?;
            writer.flush().map_err(spill_error)?;
        }
        Ok(out)
    }

    /// Checks the whole set. Consumes the ledger; spill files close here.
    pub fn check(mut self) -> Result<(), LedgerError> {
        let mut checker = Checker::default();
        if self.runs.is_empty() {
            self.batch.sort_unstable();
            for (key, kind) in &self.batch {
                checker.next(key, *kind)?;
            }
            return Ok(());
        }
        if !self.batch.is_empty() {
            self.spill_batch()?;
        }
        while self.runs.len() > self.fan_in {
            let group: Vec<File> = self.runs.drain(..self.fan_in).collect();
            let merged = self.merge_into_run(group)?;
            self.runs.push(merged);
        }
        let runs = std::mem::take(&mut self.runs);
        merge(runs, |key, kind| checker.next(key, kind))
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
    ) -> (Result<(), LedgerError>, usize) {
        let dir = spill();
        let mut ledger = Ledger::new(Some(&dir), batch, fan_in);
        for (path, kind) in paths {
            ledger.add(path, *kind).expect("add");
        }
        let spilled = ledger.runs.len();
        let result = ledger.check();
        let left = std::fs::read_dir(&dir).expect("read dir").count();
        std::fs::remove_dir(&dir).expect("spill directory is empty");
        assert_eq!(left, 0, "spill files are unlinked at creation");
        (result, spilled)
    }

    use EntryKind::{Directory as D, File as F};

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
}
