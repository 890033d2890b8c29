//! Imports through the workspace helper (started by `helper_run.rs`): the import archive goes to
//! the helper's stdin after the `/import` request, and the helper extracts it into the workspace
//! as the sandbox's user, never following a link (`helper/src/import.rs`). The engine's archive
//! endpoint extracts the same archive several times slower on trees of small files, reading it
//! as root.

use bollard::container::{AttachContainerResults, LogOutput};
use bytes::Bytes;
use futures::future::FutureExt;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use super::helper_run::{exit_failure, keep_stderr, kill, Fallback, HelperRun};
use super::DockerReservation;
use crate::lifecycle::driver::ArchiveUpload;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// Archive pieces queued between the import and the helper.
const QUEUE: usize = 4;
/// The request that asks the helper to extract the archive that follows it.
const IMPORT_REQUEST: &[u8] = b"/import\0";

impl DockerReservation {
    /// The import through the helper, or `None` when this holder has no helper (one made by an
    /// earlier version: the caller then uploads through the engine). A holder with the helper
    /// that fails to run it is the import's error.
    pub(super) async fn run_open_import_helper(&self) -> Result<Option<ArchiveUpload>, OwnerError> {
        let Some(run) = self.start_helper(Fallback::OnlyWithoutHelper).await? else {
            return Ok(None);
        };
        let (sink, pieces) = mpsc::channel::<Bytes>(QUEUE);
        let (report, outcome) = oneshot::channel();
        // Dropped with `done` before the outcome arrives: the import was abandoned.
        let (abandon, abandoned) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = report.send(relay(run, pieces, abandoned).await);
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
        Ok(Some(ArchiveUpload { sink, done }))
    }
}

/// Why the relay stopped writing.
enum Written {
    /// Every piece reached the helper and its stdin was closed.
    All,
    /// The import was abandoned: the helper is killed.
    Abandoned,
    /// Writing to the helper failed (it exited early, or the engine connection broke).
    Failed(String),
}

/// Writes the request and then every piece to the helper while collecting its stderr, closes its
/// stdin after the last piece, and reports how the helper exited. An abandoned import kills it.
async fn relay(
    run: HelperRun,
    mut pieces: mpsc::Receiver<Bytes>,
    mut abandoned: oneshot::Receiver<()>,
) -> Result<(), OwnerError> {
    let HelperRun {
        docker,
        holder,
        attached,
        permit,
    } = run;
    let AttachContainerResults { output, mut input } = attached;
    // The helper's stderr is read beside the writing, so a helper that fails is heard at once.
    let mut output = output.fuse();
    let mut stderr = Vec::new();
    let mut output_ended = false;
    let mut request: Option<Bytes> = Some(Bytes::from_static(IMPORT_REQUEST));
    let written = loop {
        let piece = match request.take() {
            Some(request) => Some(request),
            None => tokio::select! {
                biased;
                _ = &mut abandoned => break Written::Abandoned,
                next = output.next() => {
                    // The helper exited (or the engine connection broke) before the archive
                    // ended: nothing more is read, whatever the writes would say.
                    if ended(next, &mut stderr) {
                        output_ended = true;
                        break Written::Failed(
                            "the workspace helper ended before the import archive did".into(),
                        );
                    }
                    continue;
                }
                piece = pieces.recv() => piece,
            },
        };
        let Some(piece) = piece else {
            // Closing can wait on the engine too (a TLS close): abandoning still ends it.
            let closed = tokio::select! {
                biased;
                _ = &mut abandoned => break Written::Abandoned,
                closed = input.shutdown() => closed,
            };
            break match closed {
                Ok(()) => Written::All,
                Err(e) => Written::Failed(format!("closing the workspace helper's stdin: {e}")),
            };
        };
        let write = tokio::select! {
            biased;
            _ = &mut abandoned => break Written::Abandoned,
            write = input.write_all(&piece) => write,
        };
        if let Err(e) = write {
            break Written::Failed(format!(
                "writing the import archive to the workspace helper: {e}"
            ));
        }
    };
    drop(pieces);
    // The helper's stderr to its end: it ends when the helper exits (it reads its stdin to the
    // end first). The caller's signal and deadline bound this wait; abandoning the import kills
    // the helper.
    let mut abandoned_now = matches!(written, Written::Abandoned);
    while !abandoned_now && !output_ended {
        tokio::select! {
            biased;
            _ = &mut abandoned => abandoned_now = true,
            next = output.next() => output_ended = ended(next, &mut stderr),
        }
    }
    let result = if abandoned_now {
        kill(&docker, &holder).await;
        Err(OwnerError::operation(
            OperationCode::Cancelled,
            "the import was abandoned",
        ))
    } else {
        let failure = exit_failure(&docker, &holder, &stderr).await;
        match (written, failure) {
            (Written::Failed(why), Some(failure)) => {
                Err(import_failure(format!("{why} ({failure})")))
            }
            (Written::Failed(why), None) => Err(import_failure(why)),
            (_, Some(failure)) => Err(import_failure(failure)),
            (_, None) => Ok(()),
        }
    };
    // The helper is over (or its kill was sent): the next transfer may start it.
    drop(permit);
    result
}

/// Keeps what `next` brings of the helper's stderr; `true` once its output ended (it exited,
/// or the engine connection broke).
fn ended(next: Option<Result<LogOutput, bollard::errors::Error>>, stderr: &mut Vec<u8>) -> bool {
    match next {
        Some(Ok(LogOutput::StdErr { message })) => {
            keep_stderr(stderr, &message);
            false
        }
        Some(Ok(_)) => false,
        Some(Err(_)) | None => true,
    }
}

/// A failed extraction, reported as the engine's refusals are (a driver failure).
fn import_failure(why: String) -> OwnerError {
    OwnerError::driver(why)
}
