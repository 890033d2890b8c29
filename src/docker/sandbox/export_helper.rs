//! Exports through the workspace helper (started by `helper_run.rs`): it reads the request on
//! its stdin and answers with one archive on its stdout (the protocol is in
//! `helper/src/main.rs`). For exact files, one container start serves
//! the whole selection, where the engine's archive endpoint costs one request (and one mount) per
//! file; for a workspace or subtree, the helper's tree walk replaces the endpoint's, several
//! times faster. The holder runs with the sandbox's hardening, as its user, and the helper opens
//! every component without following links.

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::abort_on_drop::AbortOnDrop;
use super::deferred_bodies::{fetch_body, Framer, Piece};
use super::helper_run::{exit_failure, exit_of_finished, keep_stderr, HelperRun, EXIT_WAIT};
use super::DockerSandbox;
use crate::docker::attach::Attached;
use crate::lifecycle::driver::{ArchiveDownload, OutputStream};
use crate::lifecycle::error::OwnerError;

/// Archive pieces queued between the helper and the export.
const QUEUE: usize = 4;
/// Paths are written to the helper in pieces of about this size.
const REQUEST_PIECE: usize = 64 * 1_024;
/// The request that asks the helper for a whole tree (never a workspace-relative path).
const TREE_REQUEST: &str = "/tree";
/// The same with every body inline: nothing read again by path through the engine.
const TREE_INLINE_REQUEST: &str = "/tree-inline";

impl DockerSandbox {
    /// The archive of exactly `paths` from the workspace helper, or `None` when this holder has
    /// no helper (one made by an earlier version): the caller then exports the files one by one
    /// through the engine. A holder with the helper that cannot run it now (see `start_helper`)
    /// fails the export after one wait.
    pub(super) async fn run_open_export_files(
        &self,
        paths: Vec<String>,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        let count = paths.len();
        self.run_helper(paths).await.map_err(|error| match error {
            OwnerError::Driver(mut failure) => {
                failure.message = format!("exporting {count} exact file(s): {}", failure.message);
                OwnerError::Driver(failure)
            }
            other => other,
        })
    }

    /// The archive of the tree at `relative` (empty: the workspace) from the workspace helper,
    /// named as the engine's archive endpoint names it: `Ok(Some(None))` when the tree does not
    /// exist, `Ok(None)` when this holder has no helper (one made by an earlier version: the
    /// caller then asks the engine). A holder with the helper that fails to run it is an error,
    /// never the engine's endpoint instead (which reads as root and follows parent links).
    pub(super) async fn run_open_export_tree(
        &self,
        relative: String,
        inline: bool,
    ) -> Result<Option<Option<ArchiveDownload>>, OwnerError> {
        let asked = if inline {
            TREE_INLINE_REQUEST
        } else {
            TREE_REQUEST
        };
        let request = vec![asked.into(), relative];
        let Some(mut archive) = self.run_helper(request).await? else {
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

    /// Runs the helper with `requests` (see `helper/src/main.rs`), or `None` when this holder
    /// has no helper.
    async fn run_helper(&self, paths: Vec<String>) -> Result<Option<ArchiveDownload>, OwnerError> {
        let Some(run) = self.start_helper().await? else {
            return Ok(None);
        };
        // From here the helper runs: the relay owns it until it exits, and kills it when the
        // export is abandoned.
        let (sender, receiver) = mpsc::channel(QUEUE);
        tokio::spawn(relay(run, paths, sender));
        let archive = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|piece| (piece, receiver))
        });
        Ok(Some(archive.boxed()))
    }
}

/// Passes `pieces` on to the export, reading deferred bodies from the engine; `false` when the
/// export is over (abandoned, or told why a body could not be read).
async fn pass_on(
    docker: &bollard::Docker,
    holder: &str,
    pieces: Vec<Piece>,
    sender: &mpsc::Sender<Result<Bytes, String>>,
) -> bool {
    for piece in pieces {
        match piece {
            Piece::Bytes(bytes) => {
                if sender.send(Ok(bytes)).await.is_err() {
                    return false;
                }
            }
            Piece::Fetch { path, size } => {
                // An export abandoned meanwhile is noticed at once, whatever the engine does.
                let fetched = tokio::select! {
                    biased;
                    () = sender.closed() => return false,
                    fetched = fetch_body(docker, holder, path, size, sender) => fetched,
                };
                if let Err(why) = fetched {
                    let _ = sender.send(Err(why)).await;
                    return false;
                }
            }
        }
    }
    true
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

/// Why the helper's request did not all reach it, if it did not. The archive answers the
/// request only if all of it reached the helper: one that lost its stdin would answer a shorter
/// request (or none) as if it were whole.
async fn request_failure(
    writer: &mut tokio::task::JoinHandle<std::io::Result<()>>,
) -> Option<String> {
    match tokio::time::timeout(EXIT_WAIT, writer).await {
        Ok(Ok(Ok(()))) => None,
        Ok(Ok(Err(e))) => Some(format!("writing the workspace helper's request: {e}")),
        Ok(Err(e)) => Some(format!(
            "writing the workspace helper's request ended abnormally: {e}"
        )),
        Err(_) => Some("the workspace helper's request was not written in time".to_owned()),
    }
}

/// How the relay's reading ended.
enum Relayed {
    /// The helper wrote its whole archive (both end-of-archive blocks).
    Whole,
    /// The helper's stdout ended before that; its stderr so far.
    Ended(Vec<u8>),
    /// Nobody reads the archive any more, or the engine connection failed (reported).
    Abandoned,
}

/// Relays the helper's stdout to `sender` while its request is written. A whole archive (both
/// end blocks arrived) ends the export's stream at once, and the relay then waits for the
/// helper to stop; an archive cut short is followed by how the helper exited, as an error after
/// its last byte.
async fn relay(run: HelperRun, paths: Vec<String>, sender: mpsc::Sender<Result<Bytes, String>>) {
    let HelperRun {
        process,
        attached,
        permit,
    } = run;
    let (docker, holder) = (&process.docker, &process.holder);
    let Attached { mut output, input } = attached;
    // The helper answers while it reads, so the request is written beside the reading.
    let mut writer = tokio::spawn(request(input, paths));
    let _writer = AbortOnDrop(writer.abort_handle());
    let mut stderr = Vec::new();
    let mut framer = Framer::new();
    let relayed = loop {
        // An abandoned export is noticed at once, not at the helper's next piece.
        let next = tokio::select! {
            biased;
            () = sender.closed() => break Relayed::Abandoned,
            next = output.next() => next,
        };
        match next {
            None => break Relayed::Ended(stderr),
            Some(Ok((OutputStream::Stdout, message))) => {
                let pieces = match framer.feed(message) {
                    Ok(pieces) => pieces,
                    Err(why) => {
                        let _ = sender
                            .send(Err(format!("the workspace helper's archive: {why}")))
                            .await;
                        break Relayed::Abandoned;
                    }
                };
                if !pass_on(docker, holder, pieces, &sender).await {
                    break Relayed::Abandoned;
                }
                if framer.ended() {
                    break Relayed::Whole;
                }
            }
            Some(Ok((OutputStream::Stderr, message))) => keep_stderr(&mut stderr, &message),
            Some(Err(e)) => {
                let _ = sender
                    .send(Err(format!(
                        "reading the workspace archive from the engine (the workspace helper's output): {e}"
                    )))
                    .await;
                break Relayed::Abandoned;
            }
        }
    };
    match relayed {
        Relayed::Abandoned => process.kill().await,
        Relayed::Whole => {
            // The helper writes its end blocks last, after its whole answer: the export has
            // every byte now and need not wait for the holder to stop. The relay still waits
            // for the helper's exit (its output read to the end) before the next run may start.
            if let Some(failure) = request_failure(&mut writer).await {
                let _ = sender.send(Err(failure)).await;
            }
            drop(sender);
            let rest = async { while output.next().await.is_some() {} };
            exit_of_finished(&process, rest).await;
        }
        Relayed::Ended(stderr) => {
            let sent = request_failure(&mut writer).await;
            if let Some(failure) = exit_failure(&process, &stderr).await.or(sent) {
                let _ = sender.send(Err(failure)).await;
            }
        }
    }
    // The helper is over (or its kill was sent): the next transfer may start it.
    drop(permit);
}
