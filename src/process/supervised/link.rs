//! The connection: a writer task that sends frames in order, a reader task that decodes the
//! supervisor's frames and hands each to its command's slot.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use session_frames::{encode, Decoder, Message, Spawn, Stream};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::command::{self, CommandControl, Slot};
use super::CREDIT;
use crate::lifecycle::driver::ProcessChannels;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// A command the supervisor started: its pid in the guest, its channels, its control.
pub struct Spawned {
    pub pid: u32,
    pub channels: ProcessChannels,
    pub control: CommandControl,
}

pub(super) struct Shared {
    /// Encoded frames for the writer task. Unbounded: what goes in is bounded by the protocol's
    /// windows (stdin) or tiny (spawns, credits, signals).
    frames: mpsc::UnboundedSender<Vec<u8>>,
    commands: Mutex<HashMap<u32, Arc<Slot>>>,
    /// Set once the connection ended or failed: every later call fails with it.
    gone: Mutex<Option<OwnerError>>,
    next: AtomicU32,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(super) fn send(&self, channel: u32, message: &Message) {
        let mut bytes = Vec::new();
        encode(channel, message, &mut bytes);
        // A writer task that ended has failed every command already.
        let _ = self.frames.send(bytes);
    }

    fn forget(&self, channel: u32) {
        lock(&self.commands).remove(&channel);
    }

    /// The connection is over: every command fails with `why`.
    fn end(&self, why: OwnerError) {
        let slots: Vec<Arc<Slot>> = {
            let mut gone = lock(&self.gone);
            if gone.is_none() {
                *gone = Some(why.clone());
            }
            lock(&self.commands).drain().map(|(_, slot)| slot).collect()
        };
        for slot in slots {
            slot.fail(why.clone());
        }
    }
}

/// One supervisor connection.
#[derive(Clone)]
pub struct Link {
    shared: Arc<Shared>,
}

fn lost(what: String) -> OwnerError {
    OwnerError::operation(
        OperationCode::StreamFailure,
        format!("the sandbox's process supervisor is gone: {what}"),
    )
}

impl Link {
    /// Runs the connection on the runtime: `input` carries frames to the supervisor, `output`
    /// its frames (the connection's stdout bytes).
    pub fn new(
        input: Pin<Box<dyn AsyncWrite + Send>>,
        output: BoxStream<'static, Result<Bytes, OwnerError>>,
    ) -> Link {
        let (frames, queued) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            frames,
            commands: Mutex::default(),
            gone: Mutex::default(),
            next: AtomicU32::new(1),
        });
        tokio::spawn(write_frames(input, queued, Arc::downgrade(&shared)));
        tokio::spawn(read_frames(output, Arc::downgrade(&shared)));
        Link { shared }
    }

    /// Starts `spawn`; resolves once the supervisor started it (or says why it could not).
    pub async fn spawn(&self, spawn: Spawn) -> Result<Spawned, OwnerError> {
        let channel = self.shared.next.fetch_add(1, Ordering::Relaxed);
        let (started, started_rx) = oneshot::channel();
        let (slot, channels) = command::open(Arc::clone(&self.shared), channel, started);
        {
            let gone = lock(&self.shared.gone);
            if let Some(why) = gone.as_ref() {
                return Err(why.clone());
            }
            lock(&self.shared.commands).insert(channel, slot);
        }
        self.shared.send(channel, &Message::Spawn(spawn));
        for stream in [Stream::Stdout, Stream::Stderr] {
            self.shared.send(
                channel,
                &Message::Credit {
                    stream,
                    bytes: CREDIT,
                },
            );
        }
        let pid = match started_rx.await {
            Ok(outcome) => outcome?,
            Err(_) => return Err(lost("the command's start was never answered".into())),
        };
        Ok(Spawned {
            pid,
            channels,
            control: CommandControl::new(Arc::clone(&self.shared), channel),
        })
    }

    /// The connection's failure, once it ended.
    pub fn gone(&self) -> Option<OwnerError> {
        lock(&self.shared.gone).clone()
    }
}

async fn write_frames(
    mut input: Pin<Box<dyn AsyncWrite + Send>>,
    mut queued: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: std::sync::Weak<Shared>,
) {
    while let Some(frame) = queued.recv().await {
        let written = async {
            input.write_all(&frame).await?;
            input.flush().await
        }
        .await;
        if let Err(error) = written {
            if let Some(shared) = shared.upgrade() {
                shared.end(lost(format!("writing to it failed: {error}")));
            }
            return;
        }
    }
    // Every link handle is gone: the supervisor sees its connection end.
    let _ = input.shutdown().await;
}

async fn read_frames(
    mut output: BoxStream<'static, Result<Bytes, OwnerError>>,
    shared: std::sync::Weak<Shared>,
) {
    let mut decoder = Decoder::new();
    let why = loop {
        let bytes = match output.next().await {
            Some(Ok(bytes)) => bytes,
            Some(Err(error)) => break lost(format!("its connection failed: {error}")),
            None => break lost("its connection ended".into()),
        };
        decoder.push(&bytes);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => match Message::decode(&frame) {
                    Ok(message) => dispatch(&shared, frame.channel, message),
                    Err(error) => {
                        shared.end(lost(format!("it sent a malformed frame: {error}")));
                        return;
                    }
                },
                Ok(None) => break,
                Err(error) => {
                    shared.end(lost(format!("it sent a malformed frame: {error}")));
                    return;
                }
            }
        }
    };
    if let Some(shared) = shared.upgrade() {
        shared.end(why);
    }
}

fn dispatch(shared: &Arc<Shared>, channel: u32, message: Message) {
    let slot = lock(&shared.commands).get(&channel).cloned();
    let Some(slot) = slot else {
        // A command the host forgot (its channels dropped): nothing to deliver.
        return;
    };
    match slot.receive(message) {
        Ok(false) => {}
        Ok(true) => shared.forget(channel),
        Err(broken) => shared.end(broken),
    }
}
