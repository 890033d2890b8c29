//! Imports through the workspace helper (started by `helper_run.rs`): the import archive goes to
//! the helper's stdin after the `/import` request, and the helper extracts it into the workspace
//! as the sandbox's user, never following a link (`helper/src/import.rs`). The engine's archive
//! endpoint extracts the same archive several times slower on trees of small files, reading it
//! as root; but each large file's body goes through it (`import_bodies.rs`), so the file stays
//! in the page cache.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bollard::Docker;
use bytes::{Buf, Bytes};
use futures::future::FutureExt;
use futures::stream::Fuse;
use futures::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::archive::engine_upload;
use super::helper_run::{exit_failure, exit_of_finished, keep_stderr, HelperRun};
use super::import_bodies::{marker, ImportFramer, Step, ENGINE_BODY_MIN};
use super::DockerSandbox;
use crate::docker::attach::Attached;
use crate::docker::demux::Chunks;
use crate::lifecycle::driver::{ArchiveUpload, OutputStream};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::transfer::tar_write::end_of_archive;

/// Archive pieces queued between the import and the helper.
const QUEUE: usize = 4;
/// The request that asks the helper to extract the archive that follows it.
const IMPORT_REQUEST: &[u8] = b"/import\0";
/// The helper's answer to a marker (`helper/src/import.rs`): the marked file's place is ready.
const READY: u8 = b'R';
/// The helper's last word (`helper/src/import.rs`): the whole archive is extracted.
const DONE: u8 = b'D';

impl DockerSandbox {
    /// The import through the helper, or `None` when this holder has no helper (one made by an
    /// earlier version: the caller then uploads through the engine). A holder with the helper
    /// that fails to run it is the import's error.
    pub(super) async fn run_open_import_helper(
        &self,
        split: Split,
    ) -> Result<Option<ArchiveUpload>, OwnerError> {
        let Some(run) = self.start_helper().await? else {
            return Ok(None);
        };
        let (sink, pieces) = mpsc::channel::<Bytes>(QUEUE);
        let (report, outcome) = oneshot::channel();
        // Dropped with `done` before the outcome arrives: the import was abandoned.
        let (abandon, abandoned) = oneshot::channel::<()>();
        tokio::spawn(relay(run, pieces, split, abandoned, report));
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

/// Whether the relay may write large bodies through the engine's archive endpoint, which
/// reaches each file by its path: a command that runs meanwhile could swap a parent for a link
/// between the helper's preparing the file and the engine's writing it. Asked before each piece
/// and at each large file's start; a body the engine is already writing when the first guest
/// container is made is finished by the engine (that container still has to be created and
/// started before any command of it runs).
pub(super) enum Split {
    /// Never: a transfer beside running commands (a workspace archive's).
    Never,
    /// Until the sandbox's first container is made (`DockerSandbox::guest_started`): no guest
    /// command runs before it.
    UntilGuestStarts(Arc<AtomicBool>),
}

impl Split {
    fn allowed(&self) -> bool {
        match self {
            Split::Never => false,
            Split::UntilGuestStarts(started) => !started.load(Ordering::SeqCst),
        }
    }
}

/// Why the relay stopped writing.
enum Written {
    /// The pieces ended and the helper's stdin was closed: every piece reached the helper or
    /// the engine, or the archive ended inside a large file (whose upload was dropped), which
    /// the helper then reports as a truncated archive.
    All,
    /// The import was abandoned: the helper is killed.
    Abandoned,
    /// Writing to the helper or the engine failed (the helper exited early, the engine refused
    /// a file, or the engine connection broke).
    Failed(String),
}

/// The helper's attached streams, and what it said on stderr.
struct Helper {
    input: Pin<Box<dyn AsyncWrite + Send>>,
    output: Fuse<Chunks>,
    /// Stdout not heard yet: each of its bytes is one answer, however the engine grouped them.
    said: Bytes,
    stderr: Vec<u8>,
    /// Its output ended: it exited, or the engine connection broke.
    ended: bool,
}

/// What the helper's next output was.
enum Heard {
    /// Stderr, kept, or nothing of note.
    Nothing,
    /// Its answer to a marker: the marked file's place is ready.
    Ready,
    /// Its last word: the whole archive is extracted.
    Done,
    /// Stdout other than an answer.
    Unexpected,
    /// Its output ended.
    Ended,
}

impl Heard {
    /// Why the relay stops when it hears this while it waits for something else.
    fn failure(&self) -> Option<String> {
        match self {
            Heard::Nothing => None,
            Heard::Ready | Heard::Done | Heard::Unexpected => {
                Some("the workspace helper wrote on stdout what it was not asked for".into())
            }
            // The helper exited (or the engine connection broke) before the archive ended.
            Heard::Ended => Some("the workspace helper ended before the import archive did".into()),
        }
    }
}

impl Helper {
    /// The helper's next output (`Ended` for good once it ended).
    async fn hear(&mut self) -> Heard {
        if !self.said.is_empty() {
            return match self.said.get_u8() {
                READY => Heard::Ready,
                DONE => Heard::Done,
                _ => Heard::Unexpected,
            };
        }
        if self.ended {
            return Heard::Ended;
        }
        match self.output.next().await {
            Some(Ok((OutputStream::Stderr, message))) => {
                keep_stderr(&mut self.stderr, &message);
                Heard::Nothing
            }
            Some(Ok((OutputStream::Stdout, message))) => {
                self.said = message;
                Heard::Nothing
            }
            Some(Err(_)) | None => {
                self.ended = true;
                Heard::Ended
            }
        }
    }

    /// Sends a marker and the header of the file `name`, then waits for the helper's answer.
    /// They are flushed first: a TLS layer may keep written bytes until a flush, and the helper
    /// answers only once it has read them.
    async fn prepared(&mut self, marked: &[u8], name: &str) -> Result<(), String> {
        self.write(marked).await?;
        self.input.flush().await.map_err(writing_failed)?;
        loop {
            match self.hear().await {
                Heard::Ready => return Ok(()),
                Heard::Nothing => {}
                Heard::Done | Heard::Unexpected => {
                    return Err(format!(
                        "the workspace helper answered the marker of {name} with something else"
                    ))
                }
                Heard::Ended => {
                    return Err(format!(
                        "the workspace helper ended before preparing the place of {name}"
                    ))
                }
            }
        }
    }

    /// Runs `work` (a step of an upload through the engine) while listening to the helper, so
    /// a helper that exits meanwhile ends the upload within a few pieces (once `work` has to
    /// wait) instead of after its last byte.
    async fn watching<T>(
        &mut self,
        work: impl std::future::Future<Output = Result<T, String>>,
    ) -> Result<T, String> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                done = &mut work => return done,
                heard = self.hear(), if !self.ended => {
                    if let Some(why) = heard.failure() {
                        return Err(why);
                    }
                }
            }
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.input.write_all(bytes).await.map_err(writing_failed)
    }
}

fn writing_failed(e: std::io::Error) -> String {
    format!("writing the import archive to the workspace helper: {e}")
}

/// A large file on its way through the engine.
struct EngineFile {
    name: String,
    upload: ArchiveUpload,
}

impl EngineFile {
    /// Sends `bytes` of the file's archive; a refused send is the upload's own failure.
    async fn send(&mut self, bytes: Bytes) -> Result<(), String> {
        if self.upload.sink.send(bytes).await.is_ok() {
            return Ok(());
        }
        // The upload ended before its archive did: its result says why.
        let failure = match (&mut self.upload.done).await {
            Err(e) => e.to_string(),
            Ok(()) => "the engine answered before the archive ended".to_owned(),
        };
        Err(through_engine(&self.name, &failure))
    }

    /// Ends the file's archive and waits for the engine to have written it.
    async fn finish(mut self) -> Result<(), String> {
        self.send(Bytes::from(end_of_archive())).await?;
        let EngineFile { name, upload } = self;
        drop(upload.sink);
        upload
            .done
            .await
            .map_err(|e| through_engine(&name, &e.to_string()))
    }
}

/// A failure of the upload of the file `name`.
fn through_engine(name: &str, why: &str) -> String {
    format!("writing {name} through the engine's archive endpoint: {why}")
}

/// Writes the request and then the archive: to the helper, but each large file's body to the
/// engine (`import_bodies.rs`) once the helper has prepared its place. Closes the helper's
/// stdin after the last piece. The helper's output is heard while the relay waits for pieces,
/// an answer or an upload, so a helper that fails then is heard at once (a write to it that
/// blocks ends when its connection does).
async fn write_archive(
    docker: &Docker,
    holder: &str,
    helper: &mut Helper,
    pieces: &mut mpsc::Receiver<Bytes>,
    split: &Split,
) -> Written {
    let mut framer = ImportFramer::new(if split.allowed() {
        ENGINE_BODY_MIN
    } else {
        u64::MAX
    });
    let mut engine: Option<EngineFile> = None;
    // Whether the large file being framed goes to the helper after all (`Split` said no more).
    let mut bypassed = false;
    if let Err(why) = helper.write(IMPORT_REQUEST).await {
        return Written::Failed(why);
    }
    loop {
        let piece = tokio::select! {
            biased;
            heard = helper.hear() => match heard.failure() {
                None => continue,
                Some(why) => return Written::Failed(why),
            },
            piece = pieces.recv() => piece,
        };
        let Some(piece) = piece else {
            // An archive that ends inside a large body drops its upload (the request is
            // aborted); the helper then reads a truncated archive and says so.
            drop(engine);
            return match helper.input.shutdown().await {
                Ok(()) => Written::All,
                Err(e) => Written::Failed(format!("closing the workspace helper's stdin: {e}")),
            };
        };
        if !split.allowed() {
            framer.stop_splitting();
        }
        for step in framer.feed(piece) {
            let done = match step {
                Step::Helper(bytes) => helper.write(&bytes).await,
                // Cut out for the engine, but a guest container was made meanwhile: the file
                // goes to the helper whole (its header without a marker, then its body).
                Step::EngineStart { header, .. } if !split.allowed() => {
                    bypassed = true;
                    helper.write(&header).await
                }
                Step::Engine(bytes) if bypassed => helper.write(&bytes).await,
                Step::EngineEnd if bypassed => {
                    bypassed = false;
                    Ok(())
                }
                Step::EngineStart {
                    name,
                    long_name,
                    header,
                } => {
                    let mut marked = marker().to_vec();
                    marked.extend_from_slice(&header);
                    let started = async {
                        helper.prepared(&marked, &name).await?;
                        let mut file = EngineFile {
                            name,
                            upload: engine_upload(docker, holder.to_owned()),
                        };
                        let first = async {
                            if let Some(long_name) = long_name {
                                file.send(long_name).await?;
                            }
                            file.send(header).await
                        };
                        helper.watching(first).await?;
                        Ok(file)
                    };
                    started.await.map(|file| engine = Some(file))
                }
                Step::Engine(bytes) => match &mut engine {
                    Some(file) => helper.watching(file.send(bytes)).await,
                    None => Err("a body for the engine outside a large file".into()),
                },
                Step::EngineEnd => match engine.take() {
                    Some(file) => helper.watching(file.finish()).await,
                    None => Err("the end of a large file that was not begun".into()),
                },
            };
            if let Err(why) = done {
                return Written::Failed(why);
            }
        }
    }
}

/// Writes the archive (`write_archive`), then reports to `report` that the helper said the
/// whole archive is extracted, or else how it exited. An abandoned import kills it; a failed
/// write closes its stdin, so it reads a truncated archive and exits. The helper's exit is
/// known (or its kill sent) before the next run may start, also after a report of success.
async fn relay(
    run: HelperRun,
    mut pieces: mpsc::Receiver<Bytes>,
    split: Split,
    mut abandoned: oneshot::Receiver<()>,
    report: oneshot::Sender<Result<(), OwnerError>>,
) {
    let HelperRun {
        process,
        attached,
        permit,
    } = run;
    let (docker, holder) = (&process.docker, &process.holder);
    let Attached { output, input } = attached;
    let mut helper = Helper {
        input,
        output: output.fuse(),
        said: Bytes::new(),
        stderr: Vec::new(),
        ended: false,
    };
    // Abandoning drops the writing where it stands, with any upload to the engine (its request
    // is aborted). That comes first: the engine holds the holder while it extracts, so a kill
    // sent during an upload would wait for the upload's end.
    let written = tokio::select! {
        biased;
        _ = &mut abandoned => Written::Abandoned,
        written = write_archive(docker, holder, &mut helper, &mut pieces, &split) => written,
    };
    drop(pieces);
    let mut abandoned_now = matches!(written, Written::Abandoned);
    if matches!(written, Written::Failed(_)) && !helper.ended {
        // Bounded like every wait below: the caller's signal and deadline abandon it.
        tokio::select! {
            biased;
            _ = &mut abandoned => abandoned_now = true,
            _ = helper.input.shutdown() => {}
        }
    }
    // The helper's output to its end: it ends when the helper exits (it reads its stdin to the
    // end first), or to its last word after a whole archive. The caller's signal and deadline
    // bound this wait; abandoning the import kills the helper.
    let mut extracted = false;
    while !abandoned_now && !helper.ended {
        tokio::select! {
            biased;
            _ = &mut abandoned => abandoned_now = true,
            heard = helper.hear() => {
                if matches!((&heard, &written), (Heard::Done, Written::All)) {
                    extracted = true;
                    break;
                }
            }
        }
    }
    if extracted {
        // Every byte reached the helper and it extracted them all: the import is over for its
        // caller. The helper only exits now; the next run waits for that.
        let _ = report.send(Ok(()));
        let rest = async { while !matches!(helper.hear().await, Heard::Ended) {} };
        exit_of_finished(&process, rest).await;
        drop(permit);
        return;
    }
    let result = if abandoned_now {
        process.kill().await;
        Err(OwnerError::operation(
            OperationCode::Cancelled,
            "the import was abandoned",
        ))
    } else {
        let failure = exit_failure(&process, &helper.stderr).await;
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
    let _ = report.send(result);
}

/// A failed extraction, reported as the engine's refusals are (a driver failure).
fn import_failure(why: String) -> OwnerError {
    OwnerError::driver(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper(output: Vec<(OutputStream, &'static [u8])>) -> Helper {
        let chunks = output
            .into_iter()
            .map(|(stream, bytes)| Ok((stream, Bytes::from_static(bytes))));
        Helper {
            input: Box::pin(tokio::io::sink()),
            output: futures::stream::iter(chunks).boxed().fuse(),
            said: Bytes::new(),
            stderr: Vec::new(),
            ended: false,
        }
    }

    /// The answers the helper gives, until its output ends.
    async fn answers(helper: &mut Helper) -> Vec<&'static str> {
        let mut heard = Vec::new();
        loop {
            heard.push(match helper.hear().await {
                Heard::Nothing => continue,
                Heard::Ready => "ready",
                Heard::Done => "done",
                Heard::Unexpected => "unexpected",
                Heard::Ended => return heard,
            });
        }
    }

    #[tokio::test]
    async fn answers_are_heard_one_byte_each_however_the_engine_groups_them() {
        let mut grouped = helper(vec![
            (OutputStream::Stdout, b"RR"),
            (OutputStream::Stderr, b"note"),
            (OutputStream::Stdout, b"RD"),
        ]);
        assert_eq!(
            answers(&mut grouped).await,
            ["ready", "ready", "ready", "done"]
        );
        assert_eq!(grouped.stderr, b"note");
        let mut stray = helper(vec![(OutputStream::Stdout, b"Rx")]);
        assert_eq!(answers(&mut stray).await, ["ready", "unexpected"]);
    }
}
