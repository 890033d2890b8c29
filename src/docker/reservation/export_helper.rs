//! Exports through the export helper: the workspace holder is started with the helper as its
//! entrypoint (`seed.rs`), reads the request on its stdin and answers with one archive on its
//! stdout (the protocol is in `helper/src/main.rs`). For exact files, one container start serves
//! the whole selection, where the engine's archive endpoint costs one request (and one mount) per
//! file; for a workspace or subtree, the helper's tree walk replaces the endpoint's, several
//! times faster. The holder runs with the sandbox's hardening, as its user, and the helper opens
//! every component without following links.

use std::time::Duration;

use bollard::container::{AttachContainerResults, LogOutput};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, KillContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use bollard::Docker;
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::DockerReservation;
use crate::docker::engine::{engine_error, with_causes};
use crate::docker::seed::EXPORT_HELPER_PATH;
use crate::lifecycle::driver::ArchiveDownload;
use crate::lifecycle::error::OwnerError;

/// Archive pieces queued between the helper and the export.
const QUEUE: usize = 4;
/// The helper's stderr kept for the error message when it fails.
const STDERR_BYTES: usize = 4 * 1_024;
/// Paths are written to the helper in pieces of about this size.
const REQUEST_PIECE: usize = 64 * 1_024;
/// The request that asks the helper for a whole tree (never a workspace-relative path).
const TREE_REQUEST: &str = "/tree";
/// How long the helper may take to exit once its archive ended, and how long killing an
/// abandoned helper may take, before the export gives up on it.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Whether an export may take another way when the holder cannot run the helper now.
#[derive(Clone, Copy)]
enum Fallback {
    /// Any failure to run it lets the caller take another way (exact files: file by file).
    Allowed,
    /// Only a holder without the helper does; any other failure is the export's error.
    OnlyWithoutHelper,
}

/// Aborts its task when dropped (a finished task is unaffected).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl DockerReservation {
    /// The archive of exactly `paths` from the export helper, or `None` when this holder cannot
    /// run it (a holder created before the helper existed, one still running, an engine that
    /// cannot start it): the caller then exports the files one by one.
    pub(super) async fn run_open_export_files(
        &self,
        paths: Vec<String>,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        self.run_helper(paths, Fallback::Allowed).await
    }

    /// The archive of the tree at `relative` (empty: the workspace) from the export helper,
    /// named as the engine's archive endpoint names it: `Ok(Some(None))` when the tree does not
    /// exist, `Ok(None)` when this holder has no helper (one made by an earlier version: the
    /// caller then asks the engine). A holder with the helper that fails to run it is an error,
    /// never the engine's endpoint instead (which reads as root and follows parent links).
    pub(super) async fn run_open_export_tree(
        &self,
        relative: String,
    ) -> Result<Option<Option<ArchiveDownload>>, OwnerError> {
        let request = vec![TREE_REQUEST.into(), relative];
        let Some(mut archive) = self
            .run_helper(request, Fallback::OnlyWithoutHelper)
            .await?
        else {
            return Ok(None);
        };
        // A missing tree is an archive of no bytes at all; any tree writes its root first.
        let first = loop {
            match archive.next().await {
                None => return Ok(Some(None)),
                Some(Ok(piece)) if piece.is_empty() => continue,
                Some(first) => break first,
            }
        };
        Ok(Some(Some(
            futures::stream::iter([first]).chain(archive).boxed(),
        )))
    }

    /// Runs the export helper with `requests` (see `helper/src/main.rs`), or `None` when this
    /// holder cannot run it.
    async fn run_helper(
        &self,
        paths: Vec<String>,
        fallback: Fallback,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        let holder = self.holder().await?;
        let docker = self.settings.docker.clone();
        let inspect = docker
            .inspect_container(&holder, None)
            .await
            .map_err(|e| engine_error("inspecting the workspace holder", e))?;
        let runs_helper = inspect
            .config
            .as_ref()
            .and_then(|config| config.entrypoint.as_deref())
            == Some(&[EXPORT_HELPER_PATH.to_owned()][..]);
        if !runs_helper {
            return Ok(None);
        }
        let running = inspect
            .state
            .as_ref()
            .and_then(|state| state.running)
            .unwrap_or(false);
        // Transfers run one at a time: a running holder is the previous export's helper, being
        // killed or finishing. Wait for it (bounded); one that does not stop is not used.
        let unavailable = |why: String| match fallback {
            Fallback::Allowed => Ok(None),
            Fallback::OnlyWithoutHelper => Err(OwnerError::driver(why)),
        };
        if running && !stopped_within(&docker, &holder, EXIT_WAIT).await {
            return unavailable(format!(
                "the previous export's helper did not stop within {} s",
                EXIT_WAIT.as_secs()
            ));
        }
        let attach = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let attached = match docker.attach_container(&holder, Some(attach)).await {
            Ok(attached) => attached,
            Err(e) => {
                return unavailable(format!(
                    "attaching to the export helper: {}",
                    with_causes(&e)
                ))
            }
        };
        if let Err(e) = docker.start_container(&holder, None).await {
            return unavailable(format!("starting the export helper: {}", with_causes(&e)));
        }
        // From here the helper runs: the relay owns it until it exits, and kills it when the
        // export is abandoned.
        let (sender, receiver) = mpsc::channel(QUEUE);
        tokio::spawn(relay(docker, holder, paths, attached, sender));
        let archive = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|piece| (piece, receiver))
        });
        Ok(Some(archive.boxed()))
    }
}

/// Writes `paths` to the helper, NUL after each, then ends its stdin.
async fn request(
    mut input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    paths: Vec<String>,
) -> std::io::Result<()> {
    let mut piece = Vec::with_capacity(REQUEST_PIECE);
    for path in paths {
        piece.extend_from_slice(path.as_bytes());
        piece.push(0);
        if piece.len() >= REQUEST_PIECE {
            input.write_all(&piece).await?;
            piece.clear();
        }
    }
    input.write_all(&piece).await?;
    input.shutdown().await
}

/// How the relay's reading ended.
enum Relayed {
    /// The helper's stdout ended; its stderr so far.
    Ended(Vec<u8>),
    /// Nobody reads the archive any more, or the engine connection failed (reported).
    Abandoned,
}

/// Relays the helper's stdout to `sender` while its request is written, then checks how the
/// helper exited: anything but 0 ends the archive with an error, after its last byte.
async fn relay(
    docker: Docker,
    holder: String,
    paths: Vec<String>,
    attached: AttachContainerResults,
    sender: mpsc::Sender<Result<Bytes, String>>,
) {
    let AttachContainerResults { mut output, input } = attached;
    // The helper answers while it reads, so the request is written beside the reading.
    let mut writer = tokio::spawn(request(input, paths));
    let _writer = AbortOnDrop(writer.abort_handle());
    let mut stderr = Vec::new();
    let relayed = loop {
        // An abandoned export is noticed at once, not at the helper's next piece.
        let next = tokio::select! {
            biased;
            () = sender.closed() => break Relayed::Abandoned,
            next = output.next() => next,
        };
        match next {
            None => break Relayed::Ended(stderr),
            Some(Ok(LogOutput::StdOut { message })) => {
                if sender.send(Ok(message)).await.is_err() {
                    break Relayed::Abandoned;
                }
            }
            Some(Ok(LogOutput::StdErr { message })) => {
                let room = STDERR_BYTES.saturating_sub(stderr.len());
                stderr.extend_from_slice(&message[..message.len().min(room)]);
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                let _ = sender
                    .send(Err(format!(
                        "reading the workspace archive from the engine (the export helper's output): {}",
                        with_causes(&e)
                    )))
                    .await;
                break Relayed::Abandoned;
            }
        }
    };
    match relayed {
        Relayed::Abandoned => kill(&docker, &holder).await,
        Relayed::Ended(stderr) => {
            // The archive answers the request only if all of it reached the helper: one that
            // lost its stdin would answer a shorter request (or none) as if it were whole.
            let sent = match tokio::time::timeout(EXIT_WAIT, &mut writer).await {
                Ok(Ok(Ok(()))) => None,
                Ok(Ok(Err(e))) => Some(format!("writing the export helper's request: {e}")),
                Ok(Err(e)) => Some(format!(
                    "writing the export helper's request ended abnormally: {e}"
                )),
                Err(_) => Some("the export helper's request was not written in time".to_owned()),
            };
            if let Some(failure) = exit_failure(&docker, &holder, &stderr).await.or(sent) {
                let _ = sender.send(Err(failure)).await;
            }
        }
    }
}

/// Whether `holder` is not running within `bound` (an error reads as not stopped).
async fn stopped_within(docker: &Docker, holder: &str, bound: Duration) -> bool {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut waits = docker.wait_container(holder, Some(options));
    matches!(
        tokio::time::timeout(bound, waits.next()).await,
        Ok(Some(
            Ok(_) | Err(bollard::errors::Error::DockerContainerWaitError { .. })
        ))
    )
}

/// Why the helper failed, once it exited; `None` when it exited 0.
async fn exit_failure(docker: &Docker, holder: &str, stderr: &[u8]) -> Option<String> {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut waits = docker.wait_container(holder, Some(options));
    let code = match tokio::time::timeout(EXIT_WAIT, waits.next()).await {
        Ok(Some(Ok(exit))) => exit.status_code,
        // bollard reports a non-zero exit as an error carrying the code.
        Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => code,
        Ok(Some(Err(e))) => {
            return Some(format!(
                "the export helper's exit is unknown: {}",
                with_causes(&e)
            ))
        }
        Ok(None) | Err(_) => {
            kill(docker, holder).await;
            return Some("the export helper did not exit after its archive ended".into());
        }
    };
    (code != 0).then(|| {
        let said = String::from_utf8_lossy(stderr);
        format!(
            "the export helper failed (exit status {code}): {}",
            said.trim()
        )
    })
}

/// Stops an abandoned helper, within `EXIT_WAIT` (a holder already gone or stopped is fine).
async fn kill(docker: &Docker, holder: &str) {
    let options = KillContainerOptionsBuilder::default()
        .signal("SIGKILL")
        .build();
    let _ = tokio::time::timeout(EXIT_WAIT, docker.kill_container(holder, Some(options))).await;
}
