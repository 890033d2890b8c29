//! Hydrating: an archive handed in replaces the workspace's contents. It is read whole and
//! judged first (`members.rs`: limits, names, kinds), so a refused archive leaves the workspace
//! as it was; then the workspace is emptied through the supervisor (a link removed itself,
//! never its target) and the members go in through the import path, as `importTree` writes
//! them (owned by the sandbox's user, never through a link).

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
        empty_workspace(owner, caller.clone()).await?;
        import(owner, members).await
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

async fn import(owner: &SandboxOwner, members: Vec<Member>) -> Result<Summary, OwnerError> {
    let driver = owner.driver();
    let settings = driver.transfer_settings();
    let buffers = owner.request().policy.transfers;
    let upload = driver.open_import().await?;
    let mut session = ImportSession::new(upload, &settings, buffers, TransferQuotas::default());
    let chunk = usize::try_from(buffers.chunk_bytes)
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
                    session.begin_file_now(index, path, body.len() as u64, executable)?;
                    let mut at = 0;
                    while at < body.len() {
                        session.drain_if_due().await?;
                        let end = body.len().min(at + chunk);
                        session.chunk_now(body.slice(at..end))?;
                        at = end;
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
