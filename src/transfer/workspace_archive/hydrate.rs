//! Hydrating: an archive handed in replaces the workspace's contents. It is read whole and
//! judged first (`members.rs`: limits, names, kinds), so a refused archive leaves the workspace
//! as it was; then the workspace is emptied through the supervisor (a link removed itself,
//! never its target) and the members go in through the import path, as `importTree` writes
//! them (owned by the sandbox's user, never through a link).

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;

use super::as_live_transfer;
use super::limits::ArchiveOptions;
use super::members::{read_members, Member};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::lifecycle::state::Operation;
use crate::process::supervised::guest_path;
use crate::transfer::import::ImportSession;
use crate::transfer::options::TransferQuotas;
use crate::transfer::summary::Summary;

/// Replaces the workspace of `owner`'s running sandbox with the members of `archive`.
pub async fn hydrate_workspace(
    owner: &SandboxOwner,
    archive: Bytes,
    options: ArchiveOptions,
    caller: Cancel,
) -> Result<Summary, OwnerError> {
    let members = read_members(archive, &options.limits).await?;
    caller.check()?;
    let work = async {
        // The import is open (its helper running) before anything is removed: a sandbox that
        // cannot import now keeps its workspace.
        let driver = owner.driver();
        let upload = Arc::clone(&driver).open_live_import().await?;
        let session = ImportSession::new(
            upload,
            &driver.transfer_settings(),
            owner.request().policy.transfers,
            TransferQuotas::default(),
        );
        if let Err(error) = empty_workspace(owner, caller.clone()).await {
            session.abort().await;
            return Err(error);
        }
        import(owner, session, members).await
    };
    as_live_transfer(owner, Operation::Import, caller.clone(), work).await
}

/// Removes every entry of the workspace (the workspace itself stays).
async fn empty_workspace(owner: &SandboxOwner, caller: Cancel) -> Result<(), OwnerError> {
    owner
        .file_call(Some(caller), |link, roots| {
            async move {
                let workspace = guest_path(roots.workspace, &roots)?;
                let entries = link
                    .list(workspace.root, workspace.components.clone())
                    .await?
                    .unwrap_or_default();
                for (_, name) in entries {
                    let mut path = workspace.components.clone();
                    path.push(name);
                    link.remove(workspace.root, path, true).await?;
                }
                Ok(())
            }
            .boxed()
        })
        .await
}

/// Writes `members` through the open import `session`, then waits for it to be extracted.
async fn import(
    owner: &SandboxOwner,
    mut session: ImportSession,
    members: Vec<Member>,
) -> Result<Summary, OwnerError> {
    let chunk = usize::try_from(owner.request().policy.transfers.chunk_bytes)
        .unwrap_or(usize::MAX)
        .max(1);
    let fed = async {
        for (index, member) in members.into_iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            match member {
                Member::Directory(path) => session.directory_now(index, path)?,
                Member::File {
                    path,
                    executable,
                    body,
                } => {
                    let size = body.iter().map(|piece| piece.len() as u64).sum();
                    session.begin_file_now(index, path, size, executable)?;
                    for piece in body {
                        let mut at = 0;
                        while at < piece.len() {
                            session.drain_if_due().await?;
                            let end = piece.len().min(at + chunk);
                            session.chunk_now(piece.slice(at..end))?;
                            at = end;
                        }
                    }
                    session.drain_if_due().await?;
                    session.end_file_now()?;
                }
            }
            session.drain_if_due().await?;
        }
        Ok::<(), OwnerError>(())
    }
    .await;
    match fed {
        Ok(()) => session.finish().await,
        Err(error) => {
            session.abort().await;
            Err(error)
        }
    }
}
