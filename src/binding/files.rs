//! One call of `sandbox.files` as JavaScript holds it: made per call (so the caller's signal
//! cancels exactly it), then one of `stat`, `list`, `read`, `readOpen` + `readChunk`, `remove`,
//! `mkdir`, or `writeOpen` + `writeChunk`… + `writeEnd`. Paths are judged here (`guest_path`);
//! the supervisor opens them below their root.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use futures::future::{FutureExt, Shared};
use futures::stream::{BoxStream, StreamExt};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use session_frames::FileKind;
use tokio::sync::{mpsc, oneshot};

use super::errors::outcome;
use super::js_value::JsData;
use crate::input::Value;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::process::supervised::guest_path;

/// A write's outcome, awaited by `writeSettled` and `writeEnd` alike.
type WriteDone = Shared<oneshot::Receiver<std::result::Result<(), OwnerError>>>;

/// What a streamed write holds: its data's sender and its outcome.
struct Writing {
    data: Option<mpsc::Sender<std::result::Result<Bytes, OwnerError>>>,
    done: WriteDone,
}

#[napi]
pub struct NativeFiles {
    owner: SandboxOwner,
    /// The caller's signal.
    cancel: Cancel,
    reading: Mutex<Option<BoxStream<'static, std::result::Result<Bytes, OwnerError>>>>,
    read_closed: AtomicBool,
    writing: Mutex<Option<Writing>>,
}

impl NativeFiles {
    pub fn new(owner: SandboxOwner) -> Self {
        Self {
            owner,
            cancel: Cancel::new(),
            reading: Mutex::new(None),
            read_closed: AtomicBool::new(false),
            writing: Mutex::new(None),
        }
    }
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Symlink => "symlink",
        FileKind::Other => "other",
    }
}

/// The largest `read` `maxBytes` may ask for (the whole file is one Buffer).
const READ_MAX_BYTES: u64 = 1 << 30;
/// A streamed read has no total bound; its memory is the supervisor's credit.
const STREAM_MAX_BYTES: u64 = u64::MAX;

#[napi]
impl NativeFiles {
    /// The caller's signal fired: the call ends with `cancelled`.
    #[napi]
    pub fn abort(&self) {
        self.cancel.cancel(OwnerError::cancelled(
            "the file call was aborted through its signal",
        ));
    }

    /// `{ kind, size, mode, mtimeMs }` (size as a decimal string), or `null` when absent.
    #[napi]
    pub async fn stat(&self, path: String) -> JsData {
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    let stat = link.stat(at.root, at.components).await?;
                    Ok(stat.map_or(Value::Null, |stat| {
                        Value::object([
                            ("kind", Value::string(kind_name(stat.kind))),
                            ("size", Value::string(stat.size.to_string())),
                            ("mode", Value::Number(f64::from(stat.mode))),
                            ("mtimeMs", Value::Number(stat.mtime_ms as f64)),
                        ])
                    }))
                }
                .boxed()
            })
            .await;
        JsData(outcome(result))
    }

    /// `[{ name, kind }]` (names as the guest has them, decoded as UTF-8), or `null` when absent.
    #[napi]
    pub async fn list(&self, path: String) -> JsData {
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    let entries = link.list(at.root, at.components).await?;
                    Ok(entries.map_or(Value::Null, |entries| {
                        Value::Array(
                            entries
                                .into_iter()
                                .map(|(kind, name)| {
                                    Value::object([
                                        ("name", Value::string(String::from_utf8_lossy(&name))),
                                        ("kind", Value::string(kind_name(kind))),
                                    ])
                                })
                                .collect(),
                        )
                    }))
                }
                .boxed()
            })
            .await;
        JsData(outcome(result))
    }

    /// The whole file (at most `max_bytes`, else a failure), `null` when absent, or an error.
    #[napi]
    pub async fn read(&self, path: String, max_bytes: f64) -> Either3<Buffer, Null, JsData> {
        let max = if max_bytes.is_finite() && max_bytes >= 0.0 {
            (max_bytes as u64).min(READ_MAX_BYTES)
        } else {
            READ_MAX_BYTES
        };
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    link.read(at.root, at.components, max).await
                }
                .boxed()
            })
            .await;
        match result {
            Ok(Some(bytes)) => Either3::A(bytes.into()),
            Ok(None) => Either3::B(Null),
            Err(error) => Either3::C(JsData(outcome(Err(error)))),
        }
    }

    /// Opens the file for `readChunk`: `true`, `false` when absent, or an error.
    #[napi(js_name = "readOpen")]
    pub async fn read_open(&self, path: String) -> JsData {
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    link.read_stream(at.root, at.components, STREAM_MAX_BYTES)
                        .await
                }
                .boxed()
            })
            .await;
        let result = match result {
            Ok(Some(stream)) => {
                *self.reading.lock().unwrap_or_else(PoisonError::into_inner) = Some(stream);
                Ok(Value::Bool(true))
            }
            Ok(None) => Ok(Value::Bool(false)),
            Err(error) => Err(error),
        };
        JsData(outcome(result))
    }

    /// The next bytes of the opened file, `null` at its end, or an error. The stream is taken
    /// out while it waits, so `readClose` never waits on the supervisor.
    #[napi(js_name = "readChunk")]
    pub async fn read_chunk(&self) -> Either3<Buffer, Null, JsData> {
        let Some(mut stream) = self
            .reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Either3::B(Null);
        };
        let next = tokio::select! {
            biased;
            why = self.cancel.cancelled() => Some(Err(why)),
            next = stream.next() => next,
        };
        match next {
            Some(Ok(bytes)) => {
                if !self.read_closed.load(Ordering::SeqCst) {
                    *self.reading.lock().unwrap_or_else(PoisonError::into_inner) = Some(stream);
                }
                Either3::A(bytes.to_vec().into())
            }
            None => Either3::B(Null),
            Some(Err(error)) => Either3::C(JsData(outcome(Err(error)))),
        }
    }

    /// Ends a streamed read early (the reader destroyed its stream).
    #[napi(js_name = "readClose")]
    pub fn read_close(&self) {
        self.read_closed.store(true, Ordering::SeqCst);
        self.reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// `true` when something was removed, `false` when nothing was there.
    #[napi]
    pub async fn remove(&self, path: String, recursive: bool) -> JsData {
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    link.remove(at.root, at.components, recursive)
                        .await
                        .map(Value::Bool)
                }
                .boxed()
            })
            .await;
        JsData(outcome(result))
    }

    #[napi]
    pub async fn mkdir(&self, path: String, recursive: bool) -> JsData {
        let result = self
            .owner
            .file_call(Some(self.cancel.clone()), move |link, roots| {
                async move {
                    let at = guest_path(&path, &roots)?;
                    link.mkdir(at.root, at.components, recursive)
                        .await
                        .map(|()| Value::Null)
                }
                .boxed()
            })
            .await;
        JsData(outcome(result))
    }

    /// Begins a write of `path` with `mode`: the data follows through `writeChunk`, then
    /// `writeEnd` settles it. The path is judged at once (an error now names it).
    #[napi(js_name = "writeOpen")]
    pub fn write_open(&self, path: String, mode: u32) -> JsData {
        let judged = match self.owner.driver().guest_roots() {
            Some(roots) => guest_path(&path, &roots).map(|_| ()),
            None => Err(OwnerError::Unsupported(
                "this backend runs no file calls beside the sandbox's process".into(),
            )),
        };
        if let Err(error) = judged {
            return JsData(outcome(Err(error)));
        }
        let (data, feed) = mpsc::channel::<std::result::Result<Bytes, OwnerError>>(2);
        let (done, done_rx) = oneshot::channel();
        let owner = self.owner.clone();
        let cancel = self.cancel.clone();
        let started = super::runtime::within_owner(|| {
            tokio::spawn(async move {
                let result = owner
                    .file_call(Some(cancel), move |link, roots| {
                        async move {
                            let at = guest_path(&path, &roots)?;
                            let stream = tokio_stream_of(feed);
                            link.write(at.root, at.components, mode, stream).await
                        }
                        .boxed()
                    })
                    .await;
                let _ = done.send(result);
            });
            Ok(())
        });
        *self.writing.lock().unwrap_or_else(PoisonError::into_inner) = Some(Writing {
            data: Some(data),
            done: done_rx.shared(),
        });
        JsData(outcome(started.map(|()| Value::Null)))
    }

    /// Hands one chunk to the write; resolves with `true` once it was taken (backpressure), or
    /// `false` when the write already ended.
    #[napi(js_name = "writeChunk")]
    pub async fn write_chunk(&self, chunk: Buffer) -> JsData {
        let data = self
            .writing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|writing| writing.data.clone());
        let result = match data {
            // `false`: the write ended already (`writeEnd` says why); the caller stops feeding.
            Some(data) => Ok(Value::Bool(
                data.send(Ok(Bytes::from(chunk.to_vec()))).await.is_ok(),
            )),
            None => Err(OwnerError::state("no write is open on this call")),
        };
        JsData(outcome(result))
    }

    /// Resolves once the write ended, however it ended (aborted, refused, failed, stopped, or
    /// whole): the caller stops waiting on its data source then. `writeEnd` says how.
    #[napi(js_name = "writeSettled")]
    pub async fn write_settled(&self) {
        let done = self
            .writing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|writing| writing.done.clone());
        if let Some(done) = done {
            let _ = done.await;
        }
    }

    /// Ends the data (`failure`: the caller's source failed, so nothing is put in place) and
    /// settles with the write's outcome.
    #[napi(js_name = "writeEnd")]
    pub async fn write_end(&self, failure: Option<String>) -> JsData {
        let (data, done) = {
            let mut writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
            match writing.as_mut() {
                Some(writing) => (writing.data.take(), Some(writing.done.clone())),
                None => (None, None),
            }
        };
        if let (Some(data), Some(failure)) = (&data, failure) {
            let _ = data.send(Err(OwnerError::cancelled(failure))).await;
        }
        drop(data);
        let result = match done {
            Some(done) => done
                .await
                .unwrap_or_else(|_| Err(OwnerError::driver("the write ended without an outcome"))),
            None => Err(OwnerError::state("no write is open on this call")),
        };
        JsData(outcome(result.map(|()| Value::Null)))
    }
}

fn tokio_stream_of(
    mut feed: mpsc::Receiver<std::result::Result<Bytes, OwnerError>>,
) -> BoxStream<'static, std::result::Result<Bytes, OwnerError>> {
    futures::stream::poll_fn(move |cx| feed.poll_recv(cx)).boxed()
}
