//! Imports and exports: the workspace helper (`helper/src/main.rs`, the same program and
//! protocol as a Docker sandbox's holder runs) started by exec in the pod's workspace container,
//! as the sandbox user with no capability and only the workspace mounted, so it is there before
//! the first command and after a stop. Every entry is still validated on the host, as for any
//! driver (`transfer/`); the helper only extracts and walks without following a link. Every body
//! goes inline (`/tree-inline`, no marker in an import): the cluster has no second path to a
//! file. One run at a time per sandbox: a run whose helper's exit was not heard (abandoned, or
//! its exec lost) keeps the next waiting until the helper's `--stop-transfers` mode, run by exec
//! too, stopped it (the cluster does not end an exec's process when its client goes), every mode
//! it widened put back. A run also ends when the pod is no longer there to serve it (deleted,
//! evicted, its workspace container ended): an exec into a pod that went may stay open, silent.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::FutureExt;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use super::layout::{HELPER_PATH, WORKSPACE_CONTAINER};
use super::requests::{requested, Retry};
use crate::lifecycle::driver::{ArchiveDownload, ArchiveUpload};
use crate::lifecycle::error::{OperationCode, OwnerError};

/// Archive pieces queued between a transfer and the helper.
const QUEUE: usize = 4;
/// The exec streams' buffers (kube-rs takes 1 KiB otherwise).
const EXEC_BUFFER: usize = 256 * 1024;
/// How long the helper's exit may take to be reported once its output ended.
const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long a transfer waits for the previous one to finish with the workspace.
const PERMIT_WAIT: Duration = Duration::from_secs(60);
/// The helper's stderr kept for the error message when it fails.
const STDERR_BYTES: usize = 4 * 1_024;
/// Asks the helper to extract the archive that follows.
const IMPORT_REQUEST: &[u8] = b"/import\0";
/// Asks for the tree at the path that follows, every body inline.
const TREE_INLINE_REQUEST: &str = "/tree-inline";
/// The helper's last word after an import: the whole archive is extracted.
const DONE: u8 = b'D';
/// How often a run checks that its pod still serves it.
const POD_CHECK: Duration = Duration::from_secs(5);
/// The grace `--stop-transfers` gives an abandoned helper before SIGKILL, in milliseconds.
const STOP_GRACE_MS: u64 = 2_000;
/// How long stopping an abandoned helper may take before the next run goes ahead anyway.
const STOP_BOUND: Duration = Duration::from_secs(15);
/// How long a pipe of an exec that ended may take to end too. kube-rs closes the pipes right
/// after the server's last word, but not when the connection failed: then this bounds the read.
const DRAIN: Duration = Duration::from_secs(1);

/// The exec's end: its status when the server sent one, `None` when the connection ended
/// without (or failed). It settles only once kube-rs's task for the exec ends, so every read
/// and write waits on it too: a pipe of a task that ended may never end.
type Ended = futures::future::Shared<futures::future::BoxFuture<'static, Option<Status>>>;

/// Where a sandbox's transfers run: its pod's workspace container.
#[derive(Clone)]
pub struct Workspace {
    pub pods: Api<Pod>,
    pub name: String,
    /// The pod's UID: a run ends when the pod under the name is no longer this one.
    pub uid: String,
    pub permits: Arc<Semaphore>,
}

/// The permits a sandbox's transfers share: one at a time.
pub fn transfer_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(1))
}

/// One started helper: its exec, its stdout, what its stderr said, and how it ended.
struct Run {
    exec: AttachedProcess,
    stdout: tokio::io::ReadHalf<tokio::io::SimplexStream>,
    stdin: tokio::io::WriteHalf<tokio::io::SimplexStream>,
    stderr: tokio::task::JoinHandle<Vec<u8>>,
    status: Ended,
    turn: Turn,
}

/// A run's turn at the workspace: released when the run is over. Dropped before the helper's
/// exit was heard, it first has the helper stopped (bounded), so the next run never meets it.
struct Turn {
    permit: Option<OwnedSemaphorePermit>,
    workspace: Workspace,
    /// The helper's exit was heard: nothing to stop.
    exited: bool,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        if self.exited {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let workspace = self.workspace.clone();
        runtime.spawn(async move {
            let _ = tokio::time::timeout(STOP_BOUND, workspace.stop_transfers()).await;
            drop(permit);
        });
    }
}

impl Workspace {
    async fn start(&self, what: &str) -> Result<Run, OwnerError> {
        let permit = tokio::time::timeout(PERMIT_WAIT, Arc::clone(&self.permits).acquire_owned())
            .await
            .map_err(|_| {
                OwnerError::driver(format!(
                    "{what}: the sandbox's previous transfer did not end within {} s",
                    PERMIT_WAIT.as_secs()
                ))
            })?
            .map_err(|_| OwnerError::driver(format!("{what}: the sandbox's transfers ended")))?;
        let params = AttachParams::default()
            .container(WORKSPACE_CONTAINER)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .max_stdin_buf_size(EXEC_BUFFER)
            .max_stdout_buf_size(EXEC_BUFFER)
            .max_stderr_buf_size(EXEC_BUFFER);
        let mut exec = requested(
            &format!(
                "{what}: starting the workspace helper in the pod {}",
                self.name
            ),
            Retry::NeverSent,
            || self.pods.exec(&self.name, [HELPER_PATH], &params),
        )
        .await?;
        let turn = Turn {
            permit: Some(permit),
            workspace: self.clone(),
            exited: false,
        };
        let missing = || OwnerError::driver(format!("{what}: the helper's exec lacks a stream"));
        let status = exec.take_status().ok_or_else(missing)?;
        let lost = self.clone().lost();
        // The exec's own end, or the pod's, whichever comes first.
        let status: Ended = async move {
            tokio::select! {
                status = status => status,
                gone = lost => Some(gone),
            }
        }
        .boxed()
        .shared();
        let stdin = exec.stdin().ok_or_else(missing)?;
        let stdout = exec.stdout().ok_or_else(missing)?;
        let stderr = exec.stderr().ok_or_else(missing)?;
        Ok(Run {
            exec,
            stdout,
            stdin,
            stderr: tokio::spawn(kept(stderr, status.clone())),
            status,
            turn,
        })
    }

    /// Settles once the pod no longer serves transfers: gone, another pod under the name, or
    /// its workspace container not running; as the failure status a run reports.
    async fn lost(self) -> Status {
        loop {
            tokio::time::sleep(POD_CHECK).await;
            let found = match self.pods.get_opt(&self.name).await {
                Ok(found) => found,
                // Unanswered: the exec's own end decides (an API server away ends it too).
                Err(_) => continue,
            };
            let serving = found.as_ref().is_some_and(|pod| {
                pod.metadata.uid.as_deref() == Some(self.uid.as_str())
                    && pod
                        .status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .into_iter()
                        .flatten()
                        .any(|c| {
                            c.name == WORKSPACE_CONTAINER
                                && c.state.as_ref().is_some_and(|s| s.running.is_some())
                        })
            });
            if !serving {
                return Status {
                    status: Some("Failure".into()),
                    message: Some(format!(
                        "the sandbox's pod {} no longer serves transfers (deleted, evicted, or its workspace container ended)",
                        self.name
                    )),
                    ..Status::default()
                };
            }
        }
    }

    /// Stops a helper left running by an abandoned run (`helper --stop-transfers`, as the
    /// sandbox user): SIGTERM, then SIGKILL after the grace; done once none is left.
    async fn stop_transfers(&self) {
        let params = AttachParams::default()
            .container(WORKSPACE_CONTAINER)
            .stdin(false)
            .stdout(true)
            .stderr(true);
        let grace = STOP_GRACE_MS.to_string();
        let command = [HELPER_PATH, "--stop-transfers", grace.as_str()];
        let Ok(mut exec) = self.pods.exec(&self.name, command, &params).await else {
            return;
        };
        let status = exec.take_status();
        if let Some(status) = status {
            let _ = status.await;
        }
        drop(exec);
    }

    /// An upload into the workspace: the archive's pieces go to the helper's stdin after the
    /// import request; `done` settles once the helper said the whole archive is extracted, or
    /// with why not. Dropping `done` first abandons the import (the exec is dropped).
    pub async fn open_import(&self) -> Result<ArchiveUpload, OwnerError> {
        let run = self.start("importing into the workspace").await?;
        let (sink, pieces) = mpsc::channel::<Bytes>(QUEUE);
        let (report, outcome) = oneshot::channel();
        let (abandon, abandoned) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let result = tokio::select! {
                biased;
                _ = abandoned => Err(OwnerError::operation(
                    OperationCode::Cancelled,
                    "the import was abandoned",
                )),
                result = import(run, pieces) => result,
            };
            let _ = report.send(result);
        });
        let done = async move {
            let _abandon = abandon;
            outcome.await.unwrap_or_else(|_| {
                Err(OwnerError::driver(
                    "the import's relay to the workspace helper ended abnormally",
                ))
            })
        }
        .boxed();
        Ok(ArchiveUpload { sink, done })
    }

    /// The archive of the tree at `relative` (empty: the workspace), `None` when it does not
    /// exist (the helper then writes nothing and exits 0).
    pub async fn open_export(
        &self,
        relative: String,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        let request = vec![TREE_INLINE_REQUEST.to_owned(), relative];
        let mut archive = self.export(request, "exporting from the workspace").await?;
        // A missing tree is an archive of no bytes at all; any tree writes its root first.
        let first = loop {
            match archive.next().await {
                None => return Ok(None),
                Some(Ok(piece)) if piece.is_empty() => continue,
                Some(first) => break first,
            }
        };
        Ok(Some(futures::stream::iter([first]).chain(archive).boxed()))
    }

    /// One archive of exactly `paths`, in that order (`helper/src/main.rs`).
    pub async fn open_export_files(
        &self,
        paths: Vec<String>,
    ) -> Result<ArchiveDownload, OwnerError> {
        let what = format!("exporting {} exact file(s)", paths.len());
        self.export(paths, &what).await
    }

    /// Runs the helper with `request` (each piece followed by NUL) and streams its stdout; an
    /// output that ends with the helper failed is followed by why, as an error after its last
    /// byte, so a short archive is never taken for a whole one.
    async fn export(
        &self,
        request: Vec<String>,
        what: &str,
    ) -> Result<ArchiveDownload, OwnerError> {
        let mut run = self.start(what).await?;
        let (sender, receiver) = mpsc::channel::<Result<Bytes, String>>(QUEUE);
        let what = what.to_owned();
        tokio::spawn(async move {
            let mut written = Vec::new();
            for piece in &request {
                written.extend_from_slice(piece.as_bytes());
                written.push(0);
            }
            if let Err(e) = run.write(&written, true).await {
                let _ = sender
                    .send(Err(format!(
                        "{what}: writing the workspace helper's request: {e}"
                    )))
                    .await;
                return;
            }
            let mut buffer = BytesMut::new();
            loop {
                let read = tokio::select! {
                    biased;
                    () = sender.closed() => return,
                    read = read_some(&mut run.stdout, &mut buffer, &run.status) => read,
                };
                match read {
                    Ok(0) => break,
                    Ok(_) => {
                        if sender.send(Ok(buffer.split().freeze())).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = sender
                            .send(Err(format!(
                                "{what}: reading the workspace helper's archive: {e}"
                            )))
                            .await;
                        return;
                    }
                }
            }
            if let Err(why) = run.ended().await {
                let _ = sender.send(Err(format!("{what}: {why}"))).await;
            }
        });
        let archive = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|piece| (piece, receiver))
        });
        Ok(archive.boxed())
    }
}

impl Run {
    /// Writes `bytes` to the helper's stdin (and closes it when `last`), failing once the exec
    /// ended: nobody reads the pipe then.
    async fn write(&mut self, bytes: &[u8], last: bool) -> std::io::Result<()> {
        let writing = async {
            self.stdin.write_all(bytes).await?;
            if last {
                self.stdin.shutdown().await?;
            }
            Ok(())
        };
        tokio::select! {
            biased;
            written = writing => written,
            _ = self.status.clone() => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the workspace helper's exec ended",
            )),
        }
    }

    /// How the helper ended, once its output did: `Ok` for exit status 0.
    async fn ended(self) -> Result<(), String> {
        let Run {
            exec,
            stderr,
            status,
            mut turn,
            ..
        } = self;
        let status = tokio::time::timeout(EXIT_WAIT, status).await;
        // An exit status is the helper's own: it is over. Anything else may have left it running.
        turn.exited = matches!(&status, Ok(Some(status)) if status.details.is_some() || status.status.as_deref() == Some("Success"));
        let said = match tokio::time::timeout(EXIT_WAIT, stderr).await {
            Ok(Ok(said)) => String::from_utf8_lossy(&said).trim().to_owned(),
            _ => String::new(),
        };
        drop(exec);
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        };
        match status {
            Ok(Some(status)) if status.status.as_deref() == Some("Success") => Ok(()),
            Ok(Some(status)) => Err(format!(
                "the workspace helper failed ({}){said}",
                exit_of(&status)
            )),
            Ok(None) => Err(format!(
                "the workspace helper's exec ended without its exit status{said}"
            )),
            Err(_) => Err(format!(
                "the workspace helper's exit status was not reported within {} s{said}",
                EXIT_WAIT.as_secs()
            )),
        }
    }
}

/// The exit a failed exec's status gives: its exit code when the server says one, else its
/// message.
fn exit_of(status: &Status) -> String {
    let code = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message.clone());
    match code {
        Some(code) => format!("exit status {code}"),
        None => status
            .message
            .clone()
            .unwrap_or_else(|| "no reason given".to_owned()),
    }
}

/// Writes the import request and every piece to the helper, closes its stdin, then waits for its
/// last word and its exit. The helper's stdout is heard meanwhile, so one that ends early is
/// heard at once rather than after the archive's last piece.
async fn import(mut run: Run, mut pieces: mpsc::Receiver<Bytes>) -> Result<(), OwnerError> {
    let failed = |why: String| OwnerError::driver(format!("importing into the workspace: {why}"));
    let mut said = BytesMut::new();
    let mut output_ended = false;
    let written: Result<(), String> = async {
        run.write(IMPORT_REQUEST, false)
            .await
            .map_err(|e| e.to_string())?;
        loop {
            let piece = tokio::select! {
                biased;
                read = read_some(&mut run.stdout, &mut said, &run.status), if !output_ended => {
                    output_ended = !matches!(read, Ok(n) if n > 0);
                    if output_ended {
                        // It answers only after the archive's end: it ended (or its exec did).
                        return Err("the workspace helper ended before the import archive did".into());
                    }
                    continue;
                }
                piece = pieces.recv() => piece,
            };
            match piece {
                Some(piece) => run.write(&piece, false).await.map_err(|e| e.to_string())?,
                None => return run.write(&[], true).await.map_err(|e| e.to_string()),
            }
        }
    }
    .await;
    drop(pieces);
    while !output_ended && said.len() < 64 {
        let read = read_some(&mut run.stdout, &mut said, &run.status).await;
        output_ended = !matches!(read, Ok(n) if n > 0);
    }
    let ended = run.ended().await;
    match (written, ended) {
        (Ok(()), Ok(())) if said[..] == [DONE] => Ok(()),
        (Ok(()), Ok(())) => Err(failed(format!(
            "the workspace helper answered {said:?} where it says only that the archive is extracted"
        ))),
        (Err(why), Err(ended)) => Err(failed(format!(
            "writing the archive to the workspace helper: {why} ({ended})"
        ))),
        (Err(why), Ok(())) => Err(failed(format!(
            "writing the archive to the workspace helper: {why}"
        ))),
        (Ok(()), Err(ended)) => Err(failed(ended)),
    }
}

/// Reads what `reader` has into `buffer`: `Ok(0)` at its end, also when the exec ended and the
/// pipe stayed open past `DRAIN`.
async fn read_some(
    reader: &mut (impl AsyncRead + Unpin),
    buffer: &mut BytesMut,
    ended: &Ended,
) -> std::io::Result<usize> {
    buffer.reserve(EXEC_BUFFER);
    if ended.peek().is_none() {
        // `read_buf` is cancel safe: a read the exec's end overtakes took nothing.
        tokio::select! {
            biased;
            read = reader.read_buf(buffer) => return read,
            _ = ended.clone() => {}
        }
    }
    match tokio::time::timeout(DRAIN, reader.read_buf(buffer)).await {
        Ok(read) => read,
        Err(_) => Ok(0),
    }
}

/// Reads a stream to its end, keeping its first `STDERR_BYTES`.
async fn kept(mut reader: impl AsyncRead + Unpin, ended: Ended) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = BytesMut::new();
    loop {
        match read_some(&mut reader, &mut buffer, &ended).await {
            Ok(0) | Err(_) => return kept,
            Ok(_) => {
                let room = STDERR_BYTES.saturating_sub(kept.len());
                let piece = buffer.split();
                kept.extend_from_slice(&piece[..piece.len().min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    #[test]
    fn a_failed_exec_names_its_exit_code_or_else_its_message() {
        let coded = Status {
            status: Some("Failure".into()),
            message: Some("command terminated with non-zero exit code".into()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some("4".into()),
                    ..StatusCause::default()
                }]),
                ..StatusDetails::default()
            }),
            ..Status::default()
        };
        assert_eq!(exit_of(&coded), "exit status 4");
        let plain = Status {
            status: Some("Failure".into()),
            message: Some("container not found".into()),
            ..Status::default()
        };
        assert_eq!(exit_of(&plain), "container not found");
    }

    #[tokio::test]
    async fn stderr_is_kept_to_its_bound_and_read_to_its_end() {
        let (reader, mut writer) = tokio::io::simplex(64 * 1024);
        let never: Ended = futures::future::pending().boxed().shared();
        let reading = tokio::spawn(kept(reader, never));
        writer
            .write_all(&vec![b'x'; 3 * STDERR_BYTES])
            .await
            .expect("written");
        writer.shutdown().await.expect("closed");
        let kept = reading.await.expect("joined");
        assert_eq!(kept.len(), STDERR_BYTES);
    }
}
