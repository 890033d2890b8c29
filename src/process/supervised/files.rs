//! File requests over the link: each on a channel of its own, its frames taken in order by the
//! call that asked. Paths are a root and validated components (the supervisor opens them one
//! at a time below the root, never following a link).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use session_frames::{
    FileAnswer, FileKind, FileOp, FileRequest, Message, Root, Stream, MAX_PAYLOAD, STDIN_WINDOW,
};
use tokio::sync::{mpsc, Notify};

use super::credit::Owed;
use super::link::{lock, Handled, Link, Party, Shared};
use super::CREDIT;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// What a file request's frames say, in order, or the link's end.
type Frames = mpsc::UnboundedReceiver<Result<Message, OwnerError>>;

struct FileParty {
    frames: mpsc::UnboundedSender<Result<Message, OwnerError>>,
    /// A write's stdin window: acknowledged bytes come back here.
    window: Mutex<u32>,
    taken: Notify,
}

impl Handled for FileParty {
    type Handles = (Frames, Arc<FileParty>);
}

impl Party for FileParty {
    fn receive(&self, message: Message) -> Result<bool, OwnerError> {
        if let Message::StdinTaken { bytes } = message {
            let mut window = lock(&self.window);
            *window = window.saturating_add(bytes).min(STDIN_WINDOW);
            drop(window);
            self.taken.notify_one();
            return Ok(false);
        }
        let last = matches!(
            message,
            Message::FileDone(_) | Message::FileFailed { .. } | Message::Refused { .. }
        );
        let _ = self.frames.send(Ok(message));
        if last {
            // A write waiting for room sees its answer (a failed chunk is never acknowledged).
            self.taken.notify_one();
        }
        Ok(last)
    }

    fn fail(&self, why: OwnerError) {
        let _ = self.frames.send(Err(why));
        self.taken.notify_one();
    }
}

/// A stat answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    pub size: u64,
    pub mode: u32,
    pub mtime_ms: i64,
}

fn failure(errno: i32, refused: bool, message: &[u8]) -> OwnerError {
    let text = String::from_utf8_lossy(message).into_owned();
    if refused {
        // A path leaving its root: the caller's input, named.
        OwnerError::Validation(vec![crate::input::Issue {
            code: crate::input::IssueCode::InvalidValue,
            path: vec!["path".into()],
            message: text,
        }])
    } else {
        OwnerError::operation(
            OperationCode::DriverFailure,
            format!("{text} (errno {errno})"),
        )
    }
}

fn unexpected(message: &Message) -> OwnerError {
    OwnerError::operation(
        OperationCode::StreamFailure,
        format!(
            "the sandbox's process supervisor answered a file request with {:?}",
            message.kind()
        ),
    )
}

fn lost() -> OwnerError {
    OwnerError::operation(
        OperationCode::StreamFailure,
        "the sandbox's process supervisor is gone: a file request was never answered",
    )
}

/// Why a frame that is not the awaited answer ends the call.
fn not_the_answer(frame: Option<Result<Message, OwnerError>>) -> OwnerError {
    match frame {
        Some(Ok(Message::FileFailed {
            errno,
            refused,
            message,
        })) => failure(errno, refused, &message),
        Some(Ok(other)) => unexpected(&other),
        Some(Err(why)) => why,
        None => lost(),
    }
}

/// One file call's channel. Invariant: dropped before its last frame arrived (the caller gave
/// the call up: a stream dropped, a future cancelled), it sends `FileAbort` and forgets the
/// channel, so the supervisor closes the read's file or drops the write's temporary file and
/// nothing is kept on either side for a call nobody waits on.
struct FileCall {
    channel: u32,
    shared: Arc<Shared>,
    frames: Frames,
    party: Arc<FileParty>,
    over: bool,
}

impl FileCall {
    /// The call's next frame; anything but data is its last.
    async fn recv(&mut self) -> Option<Result<Message, OwnerError>> {
        let frame = self.frames.recv().await;
        self.over |= !matches!(
            frame,
            Some(Ok(Message::FileBytes(_) | Message::FileEntries(_)))
        );
        frame
    }

    /// A frame that came before the call asked for one (a write the supervisor refused).
    fn early(&mut self) -> Option<OwnerError> {
        let frame = self.frames.try_recv().ok()?;
        self.over = true;
        Some(not_the_answer(Some(frame)))
    }

    fn send(&self, message: &Message) {
        self.shared.send(self.channel, message);
    }
}

impl Drop for FileCall {
    fn drop(&mut self) {
        if !self.over {
            self.shared.send(self.channel, &Message::FileAbort);
            self.shared.forget(self.channel);
        }
    }
}

impl Link {
    fn open_file(&self, request: FileRequest) -> Result<FileCall, OwnerError> {
        let shared: &Arc<Shared> = self.shared();
        let (channel, (frames, party)) = shared.register(|_| {
            let (tx, rx) = mpsc::unbounded_channel();
            let party = Arc::new(FileParty {
                frames: tx,
                window: Mutex::new(STDIN_WINDOW),
                taken: Notify::new(),
            });
            (Arc::clone(&party), (rx, party))
        })?;
        shared.send(channel, &Message::File(request));
        Ok(FileCall {
            channel,
            shared: Arc::clone(shared),
            frames,
            party,
            over: false,
        })
    }

    /// The one answer of a request that has no data.
    async fn answered(&self, request: FileRequest) -> Result<FileAnswer, OwnerError> {
        let mut call = self.open_file(request)?;
        match call.recv().await {
            Some(Ok(Message::FileDone(answer))) => Ok(answer),
            other => Err(not_the_answer(other)),
        }
    }

    /// What is at `path` (a link is not followed); `None` when nothing is.
    pub async fn stat(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
    ) -> Result<Option<FileStat>, OwnerError> {
        match self
            .answered(FileRequest {
                op: FileOp::Stat,
                root,
                path,
            })
            .await?
        {
            FileAnswer::Absent => Ok(None),
            FileAnswer::Stat {
                kind,
                size,
                mode,
                mtime_ms,
            } => Ok(Some(FileStat {
                kind,
                size,
                mode,
                mtime_ms,
            })),
            other => Err(unexpected(&Message::FileDone(other))),
        }
    }

    /// Makes the directory (`recursive`: its parents too, and an existing one is no failure).
    pub async fn mkdir(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
        recursive: bool,
    ) -> Result<(), OwnerError> {
        match self
            .answered(FileRequest {
                op: FileOp::Mkdir { recursive },
                root,
                path,
            })
            .await?
        {
            FileAnswer::Done => Ok(()),
            other => Err(unexpected(&Message::FileDone(other))),
        }
    }

    /// Removes what is at `path` (a link itself); `false` when nothing was there.
    pub async fn remove(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
        recursive: bool,
    ) -> Result<bool, OwnerError> {
        match self
            .answered(FileRequest {
                op: FileOp::Remove { recursive },
                root,
                path,
            })
            .await?
        {
            FileAnswer::Removed(was) => Ok(was),
            other => Err(unexpected(&Message::FileDone(other))),
        }
    }

    /// The directory's entries; `None` when nothing is at `path`.
    pub async fn list(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
    ) -> Result<Option<Vec<(FileKind, Vec<u8>)>>, OwnerError> {
        let mut call = self.open_file(FileRequest {
            op: FileOp::List,
            root,
            path,
        })?;
        let mut entries = Vec::new();
        loop {
            match call.recv().await {
                Some(Ok(Message::FileEntries(more))) => entries.extend(more),
                Some(Ok(Message::FileDone(FileAnswer::Listed))) => return Ok(Some(entries)),
                Some(Ok(Message::FileDone(FileAnswer::Absent))) => return Ok(None),
                other => return Err(not_the_answer(other)),
            }
        }
    }

    /// The file at `path` whole, or `None` when nothing is there; a file past `max` bytes
    /// fails (it is never truncated).
    pub async fn read(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
        max: u64,
    ) -> Result<Option<Vec<u8>>, OwnerError> {
        let Some(mut stream) = self.read_stream(root, path, max).await? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        while let Some(more) = stream.next().await {
            bytes.extend_from_slice(&more?);
        }
        Ok(Some(bytes))
    }

    /// The file at `path` as a stream of its bytes, or `None` when nothing is there. The
    /// supervisor sends at most `CREDIT` bytes ahead of what the stream's reader took; a file
    /// past `max` bytes fails the stream (after the bytes before it).
    pub async fn read_stream(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
        max: u64,
    ) -> Result<Option<BoxStream<'static, Result<Bytes, OwnerError>>>, OwnerError> {
        let mut call = self.open_file(FileRequest {
            op: FileOp::Read { max },
            root,
            path,
        })?;
        call.send(&Message::Credit {
            stream: Stream::Stdout,
            bytes: CREDIT,
        });
        let first = match call.recv().await {
            Some(Ok(Message::FileDone(FileAnswer::Absent))) => return Ok(None),
            frame @ Some(Ok(Message::FileBytes(_) | Message::FileDone(FileAnswer::ReadEnd))) => {
                frame
            }
            other => return Err(not_the_answer(other)),
        };
        // The stream owns the call: dropped before its end, the supervisor closes the file.
        let stream = futures::stream::unfold(
            (Some(first), call, false, Owed::default()),
            move |(pending, mut call, over, mut owed)| async move {
                if over {
                    return None;
                }
                let frame = match pending {
                    Some(frame) => frame,
                    None => call.recv().await,
                };
                let item = match frame {
                    Some(Ok(Message::FileBytes(more))) => {
                        let len = u32::try_from(more.len()).unwrap_or(u32::MAX);
                        // Taken by the reader: the supervisor may send as much again.
                        if let Some(bytes) = owed.took(len) {
                            call.send(&Message::Credit {
                                stream: Stream::Stdout,
                                bytes,
                            });
                        }
                        Ok(Bytes::from(more))
                    }
                    Some(Ok(Message::FileDone(FileAnswer::ReadEnd))) => return None,
                    other => Err(not_the_answer(other)),
                };
                let over = item.is_err();
                Some((item, (None, call, over, owed)))
            },
        );
        Ok(Some(stream.boxed()))
    }

    /// Replaces the file with `data`, whole or not at all (missing parents are made). A data
    /// stream that fails abandons the write: nothing is put in place.
    pub async fn write(
        &self,
        root: Root,
        path: Vec<Vec<u8>>,
        mode: u32,
        mut data: BoxStream<'static, Result<Bytes, OwnerError>>,
    ) -> Result<(), OwnerError> {
        let mut call = self.open_file(FileRequest {
            op: FileOp::Write { mode },
            root,
            path,
        })?;
        // A data stream that fails drops `call`: the supervisor drops the temporary file.
        while let Some(chunk) = data.next().await {
            let chunk = chunk?;
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                // An early answer (the file could not be created) ends the write.
                if let Some(why) = call.early() {
                    return Err(why);
                }
                let room = {
                    let waited = call.party.taken.notified();
                    tokio::pin!(waited);
                    waited.as_mut().enable();
                    let window = *lock(&call.party.window);
                    if window == 0 {
                        waited.await;
                        continue;
                    }
                    window
                };
                let n = rest.len().min(room as usize).min(MAX_PAYLOAD);
                *lock(&call.party.window) -= n as u32;
                call.send(&Message::FileChunk(rest[..n].to_vec()));
                rest = &rest[n..];
            }
        }
        call.send(&Message::FileCommit);
        match call.recv().await {
            Some(Ok(Message::FileDone(FileAnswer::Written))) => Ok(()),
            other => Err(not_the_answer(other)),
        }
    }
}
