//! Host files read and written in Rust for the `/node` directory helpers: one descriptor per
//! file, identity and size checked so replacement, truncation and growth are caught, and
//! exclusive creation with the requested owner bits verified against the umask.

use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::export::ExportSession;
use super::import::ImportSession;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// `O_NOFOLLOW`: opening a symlink fails instead of following it.
const O_NOFOLLOW: i32 = 0o400_000;

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
    let std_file = OpenOptions::new()
        .read(true)
        .custom_flags(O_NOFOLLOW)
        .open(host)
        .map_err(|e| {
            host_error(
                host,
                &format!("cannot be opened without following links: {e}"),
            )
        })?;
    let opened = std_file
        .metadata()
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
    let mut file = tokio::fs::File::from_std(std_file);
    let mut remaining = seen.size;
    let mut buffer = vec![0u8; chunk_bytes.max(1)];
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
    let std_file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(O_NOFOLLOW)
        .mode(wanted)
        .open(host)
        .map_err(|e| host_error(host, &format!("cannot be created exclusively: {e}")))?;
    let mode = std_file
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
    let mut file = tokio::fs::File::from_std(std_file);
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
