//! Persisting: the workspace read through the export path, as `exportTree` reads it (every
//! entry checked on the host), and written again as one tar archive in memory: directories and
//! regular files, workspace-relative names, the executable bit kept; a file with several names
//! is written whole under each. Symbolic links, devices and FIFOs are left out, as the
//! framework's own clients leave them out; so are the excluded paths.
//! The archive stays within the limits a hydrate with the same limits would accept.

use tar_framing::padding;
use tar_framing::write::END;

use super::as_live_transfer;
use super::limits::{is_excluded, ArchiveOptions, Limit};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::owner::SandboxOwner;
use crate::lifecycle::state::Operation;
use crate::transfer::export::{ExportSession, Selection};
use crate::transfer::options::TransferQuotas;
use crate::transfer::tar_write::{end_of_archive, entry_header, Ownership};

/// The largest archive a persist makes whatever its limits: one Node.js Buffer's.
pub const PERSIST_MAX_BYTES: u64 = 4 << 30;

/// The workspace of `owner`'s running sandbox as one tar archive.
pub async fn persist_workspace(
    owner: &SandboxOwner,
    options: ArchiveOptions,
    caller: Cancel,
) -> Result<Vec<u8>, OwnerError> {
    as_live_transfer(owner, Operation::Export, caller, read(owner, options)).await
}

/// The archive being written, its counts checked as it grows.
struct Written {
    archive: Vec<u8>,
    options: ArchiveOptions,
    members: u64,
    extracted: u64,
}

impl Written {
    /// Room for `more` bytes of archive (and the end marker after them).
    fn room(&self, more: u64, member: &str) -> Result<(), OwnerError> {
        let size = self.archive.len() as u64 + more + END.len() as u64;
        if size > PERSIST_MAX_BYTES {
            return Err(OwnerError::operation(
                OperationCode::OutputLimit,
                format!("the workspace archive would pass {PERSIST_MAX_BYTES} bytes at member {member:?}"),
            ));
        }
        self.options
            .limits
            .check(Limit::InputBytes, size, Some(member))
    }

    fn member(&mut self, path: &str, size: u64) -> Result<(), OwnerError> {
        self.members += 1;
        self.options
            .limits
            .check(Limit::Members, self.members, Some(path))?;
        self.extracted = self.extracted.saturating_add(size);
        self.options
            .limits
            .check(Limit::ExtractedBytes, self.extracted, Some(path))
    }
}

async fn read(owner: &SandboxOwner, options: ArchiveOptions) -> Result<Vec<u8>, OwnerError> {
    let driver = owner.driver();
    let settings = driver.transfer_settings();
    let mut export = ExportSession::new(
        driver,
        Selection::Workspace,
        settings.spill_directory.as_deref(),
        owner.request().policy.transfers,
        TransferQuotas::default(),
    )
    .await?
    .skipping_others()
    .beside_commands();
    let owned = Ownership {
        uid: settings.uid,
        gid: settings.gid,
    };
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut written = Written {
        archive: Vec::new(),
        options,
        members: 0,
        extracted: 0,
    };
    while let Some(entry) = export.next_entry().await? {
        if is_excluded(&entry.path, &written.options.excluded) {
            continue;
        }
        let mode = if entry.directory || entry.executable {
            0o755
        } else {
            0o644
        };
        let header = entry_header(
            &entry.path,
            entry.directory,
            entry.byte_length,
            mode,
            owned,
            mtime,
        );
        written.member(&entry.path, entry.byte_length)?;
        written.room(
            header.len() as u64 + entry.byte_length + padding(entry.byte_length) as u64,
            &entry.path,
        )?;
        written.archive.extend_from_slice(&header);
        if entry.directory {
            continue;
        }
        let mut body: u64 = 0;
        while let Some(chunk) = export.read().await? {
            body += chunk.len() as u64;
            written.archive.extend_from_slice(&chunk);
        }
        if body != entry.byte_length {
            return Err(OwnerError::operation(
                OperationCode::StreamFailure,
                format!(
                    "{:?} came with {body} of its {} bytes",
                    entry.path, entry.byte_length
                ),
            ));
        }
        written
            .archive
            .resize(written.archive.len() + padding(entry.byte_length), 0);
    }
    export.finish().await?;
    written.archive.extend(end_of_archive());
    // The Buffer keeps the Vec's allocation: no spare capacity kept with it.
    written.archive.shrink_to_fit();
    Ok(written.archive)
}
