//! Writing an exported tree into a host staging directory, entry by entry: the one writer of
//! `exportSandboxDirectory`, whether the export's entries come from the native archive
//! (`host_tree.rs`, on its writing thread) or from a JavaScript driver (`NativeStagingWriter`).
//!
//! Directories are created owner-only, one component at a time (never the staging directory
//! itself, so a removed staging is never recreated); files exclusively (`O_EXCL`), never through
//! a link, with owner read/write (and execute when asked), refused when the umask removed a
//! requested bit. Distinct archive paths that a file system folds into one host entry (a case-
//! or normalization-insensitive volume: `Docs/a` and `docs/b`) are refused, never merged: a
//! file's exclusive creation refuses the second file, and every directory this writer creates
//! is recorded by its identity (device and inode) in a private identity directory outside the
//! staging, with the archive path it was made for, so a second archive path that reaches the
//! same directory is recognised on disk, with no in-memory census of the tree.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::host_walk::host_error;
use crate::lifecycle::error::OwnerError;

/// Creating over a symlink fails instead of following it; a FIFO or device in the way returns
/// at once instead of waiting for a peer.
const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

/// The directories a writer created, by identity: one file per directory, named
/// `<device>-<inode>`, holding the archive path the directory was made for.
pub struct Identities {
    directory: PathBuf,
}

impl Identities {
    /// Over `directory`, an existing private directory outside the staging.
    pub fn new(directory: PathBuf) -> Self {
        Self { directory }
    }

    fn record_of(&self, meta: &fs::Metadata) -> PathBuf {
        self.directory
            .join(format!("{}-{}", meta.dev(), meta.ino()))
    }

    /// Records that the directory `meta` describes was made for `path`.
    fn record(&self, meta: &fs::Metadata, path: &str) -> Result<(), OwnerError> {
        let record = self.record_of(meta);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(OPEN_FLAGS)
            .mode(0o600)
            .open(&record)
            .map_err(|e| host_error(&record, &format!("cannot record a directory: {e}")))?;
        file.write_all(path.as_bytes())
            .map_err(|e| host_error(&record, &format!("cannot record a directory: {e}")))
    }

    /// The archive path the directory `meta` describes was made for, if this writer made it.
    fn made_for(&self, meta: &fs::Metadata) -> Result<Option<String>, OwnerError> {
        let record = self.record_of(meta);
        match fs::read(&record) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(host_error(&record, &format!("cannot read a record: {e}"))),
        }
    }
}

/// Whether `prefix` is `path` or one of its ancestors, component-wise.
fn is_within(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// Writes one exported tree into `staging`: a directory, a file's start, its chunks, its end.
pub struct TreeWriter {
    staging: PathBuf,
    identities: Identities,
    open: Option<(PathBuf, File)>,
    /// The last directory known to be this writer's for its archive path: it and its
    /// ancestors skip the checks.
    made: Option<String>,
    /// The open file's chunks not written yet: one vectored write for them all.
    pending: Vec<Bytes>,
}

impl TreeWriter {
    pub fn new(staging: PathBuf, identities: Identities) -> Self {
        Self {
            staging,
            identities,
            open: None,
            made: None,
            pending: Vec::new(),
        }
    }

    /// The directory `path` (and its missing ancestors).
    pub fn directory(&mut self, path: &str) -> Result<(), OwnerError> {
        self.flush()?;
        self.make_directories(path)
    }

    /// Starts the file `path` (its directory is made if missing).
    pub fn file(&mut self, path: &str, executable: bool) -> Result<(), OwnerError> {
        self.flush()?;
        if self.open.is_some() {
            return Err(OwnerError::state(
                "a file started before the last one ended",
            ));
        }
        if let Some(at) = path.rfind('/') {
            self.make_directories(&path[..at])?;
        }
        let host = self.staging.join(path);
        let file = create_file(&host, path, executable)?;
        self.open = Some((host, file));
        Ok(())
    }

    /// A chunk of the open file, written with the next flush.
    pub fn chunk(&mut self, bytes: Bytes) -> Result<(), OwnerError> {
        if self.open.is_none() {
            return Err(OwnerError::state("a chunk arrived with no file open"));
        }
        self.pending.push(bytes);
        Ok(())
    }

    /// The open file's end.
    pub fn file_end(&mut self) -> Result<(), OwnerError> {
        self.flush()?;
        if self.open.take().is_none() {
            return Err(OwnerError::state("a file ended that was never opened"));
        }
        Ok(())
    }

    /// Writes the open file's pending chunks, in order, as few vectored writes as it takes.
    pub fn flush(&mut self) -> Result<(), OwnerError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some((host, file)) = self.open.as_mut() else {
            return Err(OwnerError::state("a chunk arrived with no file open"));
        };
        write_all(host, file, &self.pending)?;
        self.pending.clear();
        Ok(())
    }

    /// Creates the missing directories of `path`, one component at a time; a component that
    /// exists must be a directory this writer made for that very archive path.
    fn make_directories(&mut self, path: &str) -> Result<(), OwnerError> {
        if self
            .made
            .as_deref()
            .is_some_and(|made| is_within(made, path))
        {
            return Ok(());
        }
        let mut host = self.staging.clone();
        let mut end = 0;
        for part in path.split('/') {
            end += part.len();
            let logical = &path[..end];
            end += 1;
            host.push(part);
            if self
                .made
                .as_deref()
                .is_some_and(|made| is_within(made, logical))
            {
                continue;
            }
            match fs::DirBuilder::new().mode(0o700).create(&host) {
                Ok(()) => {
                    let meta = fs::symlink_metadata(&host)
                        .map_err(|e| host_error(&host, &e.to_string()))?;
                    self.identities.record(&meta, logical)?;
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let meta = fs::symlink_metadata(&host)
                        .map_err(|e| host_error(&host, &e.to_string()))?;
                    if !meta.is_dir() {
                        return Err(host_error(&host, "exists and is not a directory"));
                    }
                    match self.identities.made_for(&meta)? {
                        Some(made) if made == logical => {}
                        Some(made) => return Err(folded(&host, logical, &made)),
                        None => {
                            return Err(host_error(
                                &host,
                                "exists, but this export did not create it",
                            ))
                        }
                    }
                }
                Err(e) => {
                    return Err(host_error(
                        &host,
                        &format!("the directory cannot be created: {e}"),
                    ))
                }
            }
        }
        self.made = Some(path.to_owned());
        Ok(())
    }
}

fn folded(host: &Path, path: &str, earlier: &str) -> OwnerError {
    host_error(
        host,
        &format!(
            "the archive paths {earlier:?} and {path:?} land on one host directory (the file system folds case or normalization): refused rather than merged"
        ),
    )
}

/// Creates `host` (for the archive path `path`) exclusively with owner read and write (and
/// execute when `executable`); fails if the process umask removed a requested bit.
pub fn create_file(host: &Path, path: &str, executable: bool) -> Result<File, OwnerError> {
    let wanted = if executable { 0o700 } else { 0o600 };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(OPEN_FLAGS)
        .mode(wanted)
        .open(host)
        .map_err(|e| {
            if e.kind() == ErrorKind::AlreadyExists {
                host_error(
                    host,
                    &format!("cannot be created exclusively for {path:?}: an earlier archive path landed on the same host entry (the file system folds case or normalization, or the name is a link): refused rather than merged"),
                )
            } else {
                host_error(host, &format!("cannot be created exclusively: {e}"))
            }
        })?;
    let mode = file
        .metadata()
        .map_err(|e| host_error(host, &e.to_string()))?
        .permissions()
        .mode();
    if mode & wanted != wanted {
        return Err(host_error(
            host,
            &format!(
                "was created with mode {:o}: the process umask removed a requested permission bit",
                mode & 0o777
            ),
        ));
    }
    Ok(file)
}

/// Writes `chunks` to `file` in order.
fn write_all(host: &Path, file: &mut File, chunks: &[Bytes]) -> Result<(), OwnerError> {
    let mut slices: Vec<std::io::IoSlice<'_>> = chunks
        .iter()
        .map(|chunk| std::io::IoSlice::new(chunk))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match file.write_vectored(rest) {
            Ok(0) => {
                return Err(host_error(
                    host,
                    "writing failed: the file took no more bytes",
                ));
            }
            Ok(n) => std::io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(host_error(host, &format!("writing failed: {e}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch(&format!("staging-{name}"))
    }

    /// A writer over `dir/staging`, its identities in `dir/identities`.
    fn writer(dir: &Path) -> TreeWriter {
        let staging = dir.join("staging");
        let identities = dir.join("identities");
        fs::create_dir(&staging).expect("staging");
        fs::create_dir(&identities).expect("identities");
        TreeWriter::new(staging, Identities::new(identities))
    }

    #[test]
    fn directories_are_made_one_component_at_a_time_and_never_recreate_staging() {
        let dir = scratch("mkdir");
        let mut tree = writer(&dir);
        let staging = dir.join("staging");
        tree.directory("a/b/c").expect("made");
        tree.directory("a/b").expect("already there");
        tree.directory("a/x").expect("a sibling");
        tree.directory("a/b/c").expect("again, from elsewhere");
        assert!(staging.join("a/b/c").is_dir());
        fs::write(staging.join("a/file"), b"x").expect("file");
        let refused = tree.directory("a/file/d").expect_err("not a directory");
        assert!(refused.to_string().contains("not a directory"), "{refused}");
        fs::create_dir(staging.join("foreign")).expect("foreign");
        let foreign = tree.directory("foreign/d").expect_err("not made here");
        assert!(foreign.to_string().contains("did not create"), "{foreign}");
        fs::remove_dir_all(&staging).expect("removed");
        let gone = tree.directory("y").expect_err("staging is gone");
        assert!(gone.to_string().contains("cannot be created"), "{gone}");
        assert!(!staging.exists(), "staging was recreated");
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn two_archive_paths_on_one_host_directory_are_refused() {
        // A folding file system, as a link of one name to the other's directory would fold it:
        // the second path reaches a directory made for the first.
        let dir = scratch("fold");
        let mut tree = writer(&dir);
        tree.directory("Docs").expect("made");
        std::os::unix::fs::symlink("Docs", dir.join("staging/docs")).expect("alias");
        // The alias itself is a link, refused as not a directory; a folded name is the directory.
        let refused = tree.directory("docs/b").expect_err("folded");
        assert!(refused.to_string().contains("not a directory"), "{refused}");
        fs::remove_file(dir.join("staging/docs")).expect("unlinked");
        // The same directory reached under another name (a hard link is impossible for
        // directories): a second writer's record for a different archive path.
        let meta = fs::symlink_metadata(dir.join("staging/Docs")).expect("meta");
        fs::write(
            dir.join("identities")
                .join(format!("{}-{}", meta.dev(), meta.ino())),
            b"DOCS",
        )
        .expect("rewritten");
        let folded = TreeWriter::new(dir.join("staging"), Identities::new(dir.join("identities")))
            .directory("Docs/b")
            .expect_err("folded");
        assert!(
            folded.to_string().contains("refused rather than merged"),
            "{folded}"
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn files_are_created_exclusively_without_following_links() {
        let dir = scratch("create");
        let target = dir.join("target");
        fs::write(&target, b"keep").expect("target");
        std::os::unix::fs::symlink(&target, dir.join("link")).expect("link");
        let refused = create_file(&dir.join("link"), "link", false).expect_err("a link is refused");
        assert!(refused.to_string().contains("exclusively"), "{refused}");
        assert_eq!(fs::read(&target).expect("target"), b"keep");
        let made = create_file(&dir.join("new"), "new", true).expect("created");
        drop(made);
        let mode = fs::metadata(dir.join("new"))
            .expect("new")
            .permissions()
            .mode();
        assert_eq!(mode & 0o700, 0o700);
        let again = create_file(&dir.join("new"), "NEW", false).expect_err("exists");
        assert!(
            again.to_string().contains("refused rather than merged"),
            "{again}"
        );
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn chunks_go_to_the_open_file_in_order() {
        let dir = scratch("chunks");
        let mut tree = writer(&dir);
        tree.file("a/one", false).expect("one");
        for part in ["he", "ll", "o"] {
            tree.chunk(Bytes::from_static(part.as_bytes()))
                .expect("chunk");
        }
        tree.file_end().expect("end");
        assert_eq!(fs::read(dir.join("staging/a/one")).expect("one"), b"hello");
        let stray = tree.chunk(Bytes::from_static(b"x")).expect_err("no file");
        assert!(stray.to_string().contains("no file open"), "{stray}");
        let unopened = tree.file_end().expect_err("no file");
        assert!(unopened.to_string().contains("never opened"), "{unopened}");
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn within_is_component_wise() {
        assert!(is_within("a/b", "a"));
        assert!(is_within("a/b", "a/b"));
        assert!(!is_within("a/bc", "a/b"));
        assert!(!is_within("a", "a/b"));
    }
}
