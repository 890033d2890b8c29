//! The process streams as JavaScript reads and writes them, over one `ProcessIo`: shared by a
//! live owner's process and a process attached again through a recovered owner.

use std::sync::{Arc, Mutex, PoisonError};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, outcome};
use super::js_value::{Captured, JsData};
use super::owner::request_of;
use super::runtime::within_owner;
use crate::input::Value;
use crate::lifecycle::driver::{OutputStream, ProcessExit};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::recovered::RecoveredOwner;
use crate::lifecycle::stop_cause::StopCause;
use crate::process::io::ProcessIo;

/// The streams once a process is there; empty before.
pub type IoSlot = Arc<Mutex<Option<Arc<ProcessIo>>>>;

pub fn io_of(slot: &IoSlot) -> std::result::Result<Arc<ProcessIo>, OwnerError> {
    slot.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or_else(|| OwnerError::state("the process has not started"))
}

/// The contract's `SandboxProcessExit`; `cause` (when known) says why a stop made it `unavailable`.
pub fn exit_value(exit: &ProcessExit, cause: Option<StopCause>) -> Value {
    match exit {
        ProcessExit::Exited(code) => Value::object([
            ("kind", Value::string("exited")),
            ("code", Value::Number(*code as f64)),
        ]),
        ProcessExit::Signaled(signal) => Value::object([
            ("kind", Value::string("signaled")),
            ("signal", Value::string(signal.as_str())),
        ]),
        ProcessExit::OutOfMemory => Value::object([
            ("kind", Value::string("signaled")),
            ("signal", Value::string("SIGKILL")),
            ("reason", Value::string("out_of_memory")),
        ]),
        ProcessExit::Unavailable => {
            let mut fields = vec![
                ("kind", Value::string("unavailable")),
                ("reason", Value::string("sandbox_stopped")),
            ];
            if let Some(cause) = cause {
                fields.push(("cause", Value::string(cause.as_str())));
            }
            Value::object(fields)
        }
    }
}

/// Writes one chunk to stdin; settles when the bounded staging accepted it.
pub async fn write(slot: &IoSlot, chunk: Buffer) -> JsData {
    let result = match io_of(slot) {
        Ok(io) => io.write(&chunk).await,
        Err(error) => Err(error),
    };
    JsData(outcome(result.map(|()| Value::Null)))
}

/// Queues one chunk at once if the staging has room now: `true` when queued, `false` when the
/// caller must wait through `write`, or an error descriptor. Never waits.
pub fn try_write(slot: &IoSlot, chunk: &[u8]) -> JsData {
    // A crossed limit stops the sandbox from here, which spawns work: inside the runtime.
    let result = io_of(slot).and_then(|io| within_owner(|| io.try_write(chunk)));
    JsData(outcome(result.map(Value::Bool)))
}

/// Ends stdin: settles after EOF reached the guest.
pub async fn end(slot: &IoSlot) -> JsData {
    let result = match io_of(slot) {
        Ok(io) => io.end().await,
        Err(error) => Err(error),
    };
    JsData(outcome(result.map(|()| Value::Null)))
}

fn output_stream(stream: &str) -> OutputStream {
    if stream == "stderr" {
        OutputStream::Stderr
    } else {
        OutputStream::Stdout
    }
}

/// Up to `max` bytes of `stdout` or `stderr`: a Buffer, `null` at end, or an error descriptor.
pub async fn read(slot: &IoSlot, stream: &str, max: u32) -> Either3<Buffer, Null, JsData> {
    let which = output_stream(stream);
    let result = match io_of(slot) {
        Ok(io) => io.read(which, max.max(1) as usize).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(Some(bytes)) => Either3::A(Buffer::from(bytes)),
        Ok(None) => Either3::B(Null),
        Err(error) => Either3::C(JsData(failed(&error))),
    }
}

/// `stdout` or `stderr` was destroyed by the caller: its output is discarded from now on (a
/// process whose streams are gone has nothing to discard).
pub async fn discard(slot: &IoSlot, stream: &str) {
    if let Ok(io) = io_of(slot) {
        io.discard(output_stream(stream)).await;
    }
}

/// The process's fate; `cause` is asked once it is known (a stop has begun by then).
pub async fn exit(slot: &IoSlot, cause: impl FnOnce() -> Option<StopCause>) -> JsData {
    let result = match io_of(slot) {
        Ok(io) => Ok(exit_value(&io.exit().await, cause())),
        Err(error) => Err(error),
    };
    JsData(outcome(result))
}

/// The streams newly stalled (`stdout`, `stderr`, `stdin`), each named once; `None` when no
/// streams are there (not yet, or detached): the JavaScript side stops polling then. Never
/// waits.
pub fn stalls(slot: &IoSlot) -> Option<Vec<String>> {
    io_of(slot).ok().map(|io| {
        io.stalls()
            .into_iter()
            .map(|s| s.as_str().to_owned())
            .collect()
    })
}

/// A reconciled sandbox's process, attached again: `attach(request)` once, then the same
/// stream calls a live owner's process answers (`js/process.js` reads either).
#[napi]
pub struct NativeAttachedProcess {
    owner: RecoveredOwner,
    io: IoSlot,
    /// Taken by the first `attach`: a port attaches once, however its calls interleave.
    claimed: std::sync::atomic::AtomicBool,
}

impl NativeAttachedProcess {
    pub fn new(owner: RecoveredOwner) -> Self {
        Self {
            owner,
            io: Arc::new(Mutex::new(None)),
            claimed: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

#[napi]
impl NativeAttachedProcess {
    /// Attaches with the stream limits of `request` (the sandbox's parsed request), observed
    /// within its `deadlines.startupMs`. Once only.
    #[napi]
    pub async fn attach(&self, request: Captured) -> JsData {
        let result = async {
            let request = request_of(&request.0)
                .map_err(|e| OwnerError::state(format!("the request is invalid: {e}")))?;
            if self.claimed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(OwnerError::state("this port already attached once"));
            }
            let limit = std::time::Duration::from_millis(request.policy.deadlines.startup_ms);
            let io = self
                .owner
                .attach_process(request.policy.streams, limit)
                .await?;
            *self.io.lock().unwrap_or_else(PoisonError::into_inner) = Some(io);
            Ok(Value::Null)
        }
        .await;
        JsData(outcome(result))
    }

    #[napi(js_name = "processWrite")]
    pub async fn process_write(&self, chunk: Buffer) -> JsData {
        write(&self.io, chunk).await
    }

    #[napi(js_name = "processTryWrite")]
    pub fn process_try_write(&self, chunk: Buffer) -> JsData {
        try_write(&self.io, &chunk)
    }

    #[napi(js_name = "processEnd")]
    pub async fn process_end(&self) -> JsData {
        end(&self.io).await
    }

    #[napi(js_name = "processRead")]
    pub async fn process_read(&self, stream: String, max: u32) -> Either3<Buffer, Null, JsData> {
        read(&self.io, &stream, max).await
    }

    #[napi(js_name = "processDiscard")]
    pub async fn process_discard(&self, stream: String) {
        discard(&self.io, &stream).await;
    }

    #[napi(js_name = "processStalls")]
    pub fn process_stalls(&self) -> Option<Vec<String>> {
        stalls(&self.io)
    }

    #[napi(js_name = "processExit")]
    pub async fn process_exit(&self) -> JsData {
        // The recovered owner does not know why compute stopped.
        exit(&self.io, || None).await
    }

    /// Ends this attachment's streams (the process runs on; its stdin stays open).
    #[napi]
    pub async fn detach(&self) {
        let io = self
            .io
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(io) = io {
            io.close().await;
        }
    }
}
