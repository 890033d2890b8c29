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

impl Link {
    fn open_file(&self, request: FileRequest) -> Result<(u32, Frames, Arc<FileParty>), OwnerError> {
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
        Ok((channel, frames, party))
    }

    /// The one answer of a request that has no data.
    async fn answered(&self, request: FileRequest) -> Result<FileAnswer, OwnerError> {
        let (_, mut frames, _) = self.open_file(request)?;
        match frames.recv().await {
            Some(Ok(Message::FileDone(answer))) => Ok(answer),
            Some(Ok(Message::FileFailed {
                errno,
                refused,
                message,
            })) => Err(failure(errno, refused, &message)),
            Some(Ok(other)) => Err(unexpected(&other)),
            Some(Err(why)) => Err(why),
            None => Err(lost()),
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
        let (_, mut frames, _) = self.open_file(FileRequest {
            op: FileOp::List,
            root,
            path,
        })?;
        let mut entries = Vec::new();
        loop {
            match frames.recv().await {
                Some(Ok(Message::FileEntries(more))) => entries.extend(more),
                Some(Ok(Message::FileDone(FileAnswer::Listed))) => return Ok(Some(entries)),
                Some(Ok(Message::FileDone(FileAnswer::Absent))) => return Ok(None),
                Some(Ok(Message::FileFailed {
                    errno,
                    refused,
                    message,
                })) => return Err(failure(errno, refused, &message)),
                Some(Ok(other)) => return Err(unexpected(&other)),
                Some(Err(why)) => return Err(why),
                None => return Err(lost()),
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
        let (channel, mut frames, _) = self.open_file(FileRequest {
            op: FileOp::Read { max },
            root,
            path,
        })?;
        let shared = Arc::clone(self.shared());
        shared.send(
            channel,
            &Message::Credit {
                stream: Stream::Stdout,
                bytes: CREDIT,
            },
        );
        let first = match frames.recv().await {
            Some(Ok(Message::FileDone(FileAnswer::Absent))) => return Ok(None),
            Some(Ok(Message::FileFailed {
                errno,
                refused,
                message,
            })) => return Err(failure(errno, refused, &message)),
            first => first,
        };
        let stream = futures::stream::unfold(
            (Some(first), frames, shared, false),
            move |(pending, mut frames, shared, over)| async move {
                if over {
                    return None;
                }
                let frame = match pending {
                    Some(frame) => frame,
                    None => frames.recv().await,
                };
                let item = match frame {
                    Some(Ok(Message::FileBytes(more))) => {
                        let len = u32::try_from(more.len()).unwrap_or(u32::MAX);
                        // Taken by the reader: the supervisor may send as much again.
                        shared.send(
                            channel,
                            &Message::Credit {
                                stream: Stream::Stdout,
                                bytes: len,
                            },
                        );
                        Ok(Bytes::from(more))
                    }
                    Some(Ok(Message::FileDone(FileAnswer::ReadEnd))) => return None,
                    Some(Ok(Message::FileFailed {
                        errno,
                        refused,
                        message,
                    })) => Err(failure(errno, refused, &message)),
                    Some(Ok(other)) => Err(unexpected(&other)),
                    Some(Err(why)) => Err(why),
                    None => Err(lost()),
                };
                let over = item.is_err();
                Some((item, (None, frames, shared, over)))
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
        let (channel, mut frames, party) = self.open_file(FileRequest {
            op: FileOp::Write { mode },
            root,
            path,
        })?;
        let shared = Arc::clone(self.shared());
        // An early answer (the file could not be created) ends the write.
        let early = |frames: &mut Frames| match frames.try_recv() {
            Ok(Ok(Message::FileFailed {
                errno,
                refused,
                message,
            })) => Some(failure(errno, refused, &message)),
            Ok(Ok(other)) => Some(unexpected(&other)),
            Ok(Err(why)) => Some(why),
            Err(_) => None,
        };
        while let Some(chunk) = data.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(why) => {
                    shared.send(channel, &Message::FileAbort);
                    return Err(why);
                }
            };
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                if let Some(why) = early(&mut frames) {
                    return Err(why);
                }
                let room = {
                    let waited = party.taken.notified();
                    tokio::pin!(waited);
                    waited.as_mut().enable();
                    let window = *lock(&party.window);
                    if window == 0 {
                        waited.await;
                        continue;
                    }
                    window
                };
                let n = rest.len().min(room as usize).min(MAX_PAYLOAD);
                *lock(&party.window) -= n as u32;
                shared.send(channel, &Message::FileChunk(rest[..n].to_vec()));
                rest = &rest[n..];
            }
        }
        shared.send(channel, &Message::FileCommit);
        match frames.recv().await {
            Some(Ok(Message::FileDone(FileAnswer::Written))) => Ok(()),
            Some(Ok(Message::FileFailed {
                errno,
                refused,
                message,
            })) => Err(failure(errno, refused, &message)),
            Some(Ok(other)) => Err(unexpected(&other)),
            Some(Err(why)) => Err(why),
            None => Err(lost()),
        }
    }
}
