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

use super::command::{self, CommandControl};
use super::CREDIT;
use crate::lifecycle::driver::ProcessChannels;
use crate::lifecycle::error::{OperationCode, OwnerError};

/// A command the supervisor started: its pid in the guest, its channels, its control.
pub struct Spawned {
    pub pid: u32,
    pub channels: ProcessChannels,
    pub control: CommandControl,
}

/// What waits for the supervisor's frames on one channel: a command, or a file request.
/// What registering a party hands back to its maker's caller.
pub(super) trait Handled {
    type Handles;
}

pub(super) trait Party: Send + Sync {
    /// Takes one frame: `Ok(true)` once nothing more is due on the channel (the link forgets
    /// it), `Err` when the frame breaks the protocol (the link then fails every party).
    fn receive(&self, message: Message) -> Result<bool, OwnerError>;
    /// The link is over: whatever waits fails with `why`.
    fn fail(&self, why: OwnerError);
}

pub(super) struct Shared {
    /// Encoded frames for the writer task. Unbounded: what goes in is bounded by the protocol's
    /// windows (stdin) or tiny (spawns, credits, signals).
    frames: mpsc::UnboundedSender<Vec<u8>>,
    parties: Mutex<HashMap<u32, Arc<dyn Party>>>,
    /// Set once the connection ended or failed: every later call fails with it.
    gone: Mutex<Option<OwnerError>>,
    next: AtomicU32,
    /// The reader and writer tasks, ended by `Link::close`.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
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

    /// The channel's party is dropped: later frames for it are not delivered.
    pub(super) fn forget(&self, channel: u32) {
        lock(&self.parties).remove(&channel);
    }

    /// A fresh channel for `party` (made with it), or the link's failure once it is over.
    pub(super) fn register<P: Party + Handled + 'static>(
        &self,
        make: impl FnOnce(u32) -> (Arc<P>, P::Handles),
    ) -> Result<(u32, P::Handles), OwnerError> {
        let channel = self.next.fetch_add(1, Ordering::Relaxed);
        let (party, handles) = make(channel);
        let gone = lock(&self.gone);
        if let Some(why) = gone.as_ref() {
            return Err(why.clone());
        }
        lock(&self.parties).insert(channel, party);
        Ok((channel, handles))
    }

    /// The connection is over: every command fails with `why`.
    fn end(&self, why: OwnerError) {
        let slots: Vec<Arc<dyn Party>> = {
            let mut gone = lock(&self.gone);
            if gone.is_none() {
                *gone = Some(why.clone());
            }
            lock(&self.parties).drain().map(|(_, slot)| slot).collect()
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
            parties: Mutex::default(),
            gone: Mutex::default(),
            next: AtomicU32::new(1),
            tasks: Mutex::default(),
        });
        let writer = tokio::spawn(write_frames(input, queued, Arc::downgrade(&shared)));
        let reader = tokio::spawn(read_frames(output, Arc::downgrade(&shared)));
        *lock(&shared.tasks) = vec![writer.abort_handle(), reader.abort_handle()];
        Link { shared }
    }

    /// Ends the connection from the host's side, whatever the engine does with it: every
    /// command and file call fails with `why` (a command's exit is `Unavailable`), every later
    /// call too, and the reader and writer tasks end, dropping the connection. For a stop: an
    /// engine that keeps an exec's connection open after its container was killed (seen under
    /// gVisor) must not hold a command's exit for ever.
    pub fn close(&self, why: OwnerError) {
        self.shared.end(why);
        for task in lock(&self.shared.tasks).drain(..) {
            task.abort();
        }
    }

    /// Starts `spawn`; resolves once the supervisor started it (or says why it could not).
    pub async fn spawn(&self, spawn: Spawn) -> Result<Spawned, OwnerError> {
        let (started, started_rx) = oneshot::channel();
        let shared = Arc::clone(&self.shared);
        let (channel, channels) = self
            .shared
            .register(move |channel| command::open(shared, channel, started))?;
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

    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// Frames queued meanwhile are gathered into one write until this many bytes are in hand.
const BATCH_BYTES: usize = 256 * 1024;

async fn write_frames(
    mut input: Pin<Box<dyn AsyncWrite + Send>>,
    mut queued: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: std::sync::Weak<Shared>,
) {
    while let Some(mut frames) = queued.recv().await {
        // Frames queued meanwhile go in the same write (a spawn and its credits, say): the
        // engine relays them, and the supervisor reads them, once.
        while frames.len() < BATCH_BYTES {
            match queued.try_recv() {
                Ok(more) => frames.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        let written = async {
            input.write_all(&frames).await?;
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
            // Decoded where the decoder holds it: an output's bytes are copied once, into its
            // message.
            match decoder.next_message() {
                Ok(Some((channel, message))) => dispatch(&shared, channel, message),
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
    let slot = lock(&shared.parties).get(&channel).cloned();
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
