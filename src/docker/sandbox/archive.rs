//! Archive transfers through the workspace holder: the import upload and the export download.

use std::sync::Arc;

use bollard::body_try_stream;
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bollard::Docker;
use bytes::Bytes;
use futures::future::FutureExt;
use futures::StreamExt;

use super::abort_on_drop::AbortOnDrop;
use super::DockerSandbox;
use crate::docker::engine::{engine_error, is_not_found, with_causes};
use crate::docker::layout::WORKSPACE;
use crate::lifecycle::driver::{ArchiveDownload, ArchiveUpload};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Identity, Role};

/// Archive transfers wait on the engine as long as the bytes keep flowing; the caller's
/// signal and deadline bound how long anyone observes them.
const UPLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// Chunks queued between the import producer and the engine upload.
const UPLOAD_QUEUE: usize = 4;

impl DockerSandbox {
    pub(super) async fn holder(&self) -> Result<String, OwnerError> {
        let state = self.state.lock().await;
        match crate::docker::objects::identity_of(&state.record, Role::Holder) {
            Some(Identity::Identified { id, .. }) => Ok(id.clone()),
            _ => Err(OwnerError::state("the workspace holder does not exist yet")),
        }
    }

    pub(super) async fn run_open_import(&self) -> Result<ArchiveUpload, OwnerError> {
        // The workspace helper extracts in the holder several times faster than the engine's
        // archive endpoint; a holder without it is uploaded to through the engine.
        let split = super::import_helper::Split::UntilGuestStarts(Arc::clone(&self.guest_started));
        if let Some(upload) = self.run_open_import_helper(split).await? {
            return Ok(upload);
        }
        let holder = self.holder().await?;
        Ok(engine_upload(&self.settings.docker, holder))
    }

    /// An import beside running commands: through the helper only, every body written through
    /// the descriptors it opened (never the engine's endpoint, which writes by path).
    pub(super) async fn run_open_live_import(&self) -> Result<ArchiveUpload, OwnerError> {
        self.run_open_import_helper(super::import_helper::Split::Never)
            .await?
            .ok_or_else(no_helper)
    }

    /// An export beside running commands: the helper's tree with every body inline (never
    /// read again by path through the engine).
    pub(super) async fn run_open_live_export(
        &self,
        relative: String,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        self.run_open_export_tree(relative, true)
            .await?
            .ok_or_else(no_helper)
    }

    pub(super) async fn run_open_export(
        &self,
        relative: String,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        // The export helper walks the tree in the holder several times faster than the
        // engine's archive endpoint; only a holder without the helper (one made by an earlier
        // version) is asked through the engine.
        if let Some(answer) = self.run_open_export_tree(relative.clone(), false).await? {
            return Ok(answer);
        }
        let holder = self.holder().await?;
        let path = if relative.is_empty() {
            WORKSPACE.to_owned()
        } else {
            format!("{WORKSPACE}/{relative}")
        };
        let docker = self.settings.docker.clone().with_timeout(UPLOAD_TIMEOUT);
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(&path)
            .build();
        let mut stream = docker
            .download_from_container(&holder, Some(options))
            .boxed();
        let first = match stream.next().await {
            Some(Err(e)) if is_not_found(&e) => return Ok(None),
            Some(Err(e)) => return Err(engine_error(&format!("exporting {path}"), e)),
            Some(Ok(first)) => Some(first),
            None => None,
        };
        let rest = stream.map(|item| {
            item.map_err(|e| {
                format!(
                    "reading the workspace archive from the engine: {}",
                    with_causes(&e)
                )
            })
        });
        Ok(Some(
            futures::stream::iter(first.map(Ok)).chain(rest).boxed(),
        ))
    }
}

/// A holder made by an earlier version has no workspace helper: no transfer beside running
/// commands through it.
fn no_helper() -> OwnerError {
    OwnerError::Unsupported(
        "this sandbox's workspace holder has no workspace helper (it was made by an earlier version): a workspace archive beside running commands needs one".into(),
    )
}

/// An archive upload into the workspace of `holder` through the engine's archive endpoint.
pub(super) fn engine_upload(docker: &Docker, holder: String) -> ArchiveUpload {
    // The engine answers an upload only after extracting all of it: no request timeout.
    let docker = docker.clone().with_timeout(UPLOAD_TIMEOUT);
    let (sink, receiver) = tokio::sync::mpsc::channel::<Bytes>(UPLOAD_QUEUE);
    let body = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|chunk| (Ok::<Bytes, std::io::Error>(chunk), receiver))
    });
    let options = UploadToContainerOptionsBuilder::default()
        .path(WORKSPACE)
        .build();
    let upload = tokio::spawn(async move {
        docker
            .upload_to_container(&holder, Some(options), body_try_stream(body))
            .await
            .map_err(|e| engine_error("importing into the workspace", e))
    });
    // Dropping `done` (an abandoned import) aborts the request itself, closing its connection,
    // instead of leaving it to wait on the engine for up to UPLOAD_TIMEOUT.
    let abort = AbortOnDrop(upload.abort_handle());
    let done = async move {
        let _abort = abort;
        upload.await.unwrap_or_else(|e| {
            Err(OwnerError::driver(format!(
                "the import upload ended abnormally: {e}"
            )))
        })
    }
    .boxed();
    ArchiveUpload { sink, done }
}
