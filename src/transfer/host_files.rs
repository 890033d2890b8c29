//! Host files read and written in Rust for the `/node` directory helpers: one descriptor per
//! file, identity and size checked so replacement, truncation and growth are caught, and
//! exclusive creation with the requested owner bits verified against the umask.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::export::ExportSession;
use super::import::ImportSession;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// Opening a symlink fails instead of following it, and opening a FIFO or device swapped in
/// after the walk returns at once instead of waiting for a peer (it is then refused as not a
/// regular file). Files are opened and inspected on tokio's blocking pool, never on a runtime
/// worker.
const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

fn host_error(path: &Path, what: &str) -> OwnerError {
    OwnerError::operation(
        OperationCode::StreamFailure,
        format!("{}: {what}", path.display()),
    )
}

/// What the directory walk saw of a file, to be matched by the descriptor that reads it.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
}

/// Streams one host file into the import as entry `index` at workspace path `path`.
pub async fn import_host_file(
    session: &mut ImportSession,
    index: u32,
    path: String,
    host: &Path,
    seen: Seen,
    chunk_bytes: usize,
) -> Result<(), OwnerError> {
    let mut file = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS)
        .open(host)
        .await
        .map_err(|e| {
            host_error(
                host,
                &format!("cannot be opened without following links: {e}"),
            )
        })?;
    let opened = file
        .metadata()
        .await
        .map_err(|e| host_error(host, &e.to_string()))?;
    if !opened.is_file() {
        return Err(host_error(host, "is not a regular file"));
    }
    if opened.dev() != seen.dev || opened.ino() != seen.ino {
        return Err(host_error(
            host,
            "was replaced while the directory was being read",
        ));
    }
    if opened.len() != seen.size {
        return Err(host_error(
            host,
            "changed size while the directory was being read",
        ));
    }
    let executable = opened.mode() & 0o100 != 0;
    session
        .begin_file(index, path, seen.size, executable)
        .await?;
    let mut remaining = seen.size;
    // Never more than the file holds: a large chunk size costs nothing on small files.
    let capacity = chunk_bytes
        .max(1)
        .min(usize::try_from(seen.size).unwrap_or(usize::MAX).max(1));
    let mut buffer = vec![0u8; capacity];
    while remaining > 0 {
        let want = buffer
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        let n = file
            .read(&mut buffer[..want])
            .await
            .map_err(|e| host_error(host, &format!("reading failed: {e}")))?;
        if n == 0 {
            return Err(host_error(host, "was truncated while it was being read"));
        }
        remaining -= n as u64;
        session.chunk(Bytes::copy_from_slice(&buffer[..n])).await?;
    }
    let mut probe = [0u8; 1];
    if file
        .read(&mut probe)
        .await
        .map_err(|e| host_error(host, &e.to_string()))?
        != 0
    {
        return Err(host_error(host, "grew while it was being read"));
    }
    session.end_file().await
}

/// Writes the current export entry's body to `host`, created exclusively with owner read and
/// write (and execute when `executable`); fails if the umask removed a requested bit.
pub async fn export_host_file(
    session: &mut ExportSession,
    host: &Path,
    executable: bool,
) -> Result<(), OwnerError> {
    let wanted = if executable { 0o700 } else { 0o600 };
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(OPEN_FLAGS)
        .mode(wanted)
        .open(host)
        .await
        .map_err(|e| host_error(host, &format!("cannot be created exclusively: {e}")))?;
    let mode = file
        .metadata()
        .await
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
    while let Some(chunk) = session.read().await? {
        file.write_all(&chunk)
            .await
            .map_err(|e| host_error(host, &format!("writing failed: {e}")))?;
    }
    file.flush()
        .await
        .map_err(|e| host_error(host, &e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::driver::{ArchiveUpload, TransferSettings};
    use crate::policy::request::TransferBuffers;
    use crate::transfer::options::TransferQuotas;
    use futures::FutureExt;
    use std::time::Duration;

    fn session() -> (ImportSession, tokio::sync::mpsc::Receiver<Bytes>) {
        let (sink, archive) = tokio::sync::mpsc::channel(64);
        let upload = ArchiveUpload {
            sink,
            done: async { Ok(()) }.boxed(),
        };
        let settings = TransferSettings {
            uid: 1,
            gid: 1,
            spill_directory: None,
        };
        let quotas = TransferQuotas {
            max_files: None,
            max_file_bytes: None,
            max_total_bytes: None,
            max_archive_bytes: None,
            max_paths: None,
        };
        let session = ImportSession::new(upload, &settings, TransferBuffers::DEFAULT, quotas);
        (session, archive)
    }

    fn seen(path: &Path) -> Seen {
        let meta = std::fs::symlink_metadata(path).expect("stat");
        Seen {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
        }
    }

    #[tokio::test]
    async fn a_fifo_swapped_in_after_the_walk_is_refused_at_once() {
        let dir = std::env::temp_dir().join(format!("native-sandbox-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let host = dir.join("f");
        std::fs::write(&host, b"abc").expect("file");
        let walked = seen(&host);
        std::fs::remove_file(&host).expect("unlink");
        let made = std::process::Command::new("mkfifo")
            .arg(&host)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let (mut session, _archive) = session();
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            import_host_file(&mut session, 0, "f".into(), &host, walked, 65_536),
        )
        .await;
        std::fs::remove_dir_all(&dir).ok();
        let error = result
            .expect("opening a FIFO without a writer does not block")
            .expect_err("a FIFO is refused");
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
