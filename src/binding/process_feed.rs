//! A JavaScript driver's process feed as JavaScript reaches it: `js/driver-process.js` offers
//! the driver's output, takes its stdin and reports its exit through one `NativeProcessFeed`
//! (see `process::external`). The driver's process start hands the feed over by a token: the
//! feed is made in Rust before the driver's start is called, and taken once by JavaScript.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::js_value::Captured;
use crate::lifecycle::driver::OutputStream;
use crate::lifecycle::error::{DriverFailure, OwnerError};
use crate::process::external::{reported_exit, Cut, ExternalFeed, Take};

/// Feeds made for a driver's start and not taken yet, by token.
static WAITING: Mutex<Option<HashMap<u32, Arc<ExternalFeed>>>> = Mutex::new(None);
static NEXT: AtomicU32 = AtomicU32::new(1);

fn waiting<T>(step: impl FnOnce(&mut HashMap<u32, Arc<ExternalFeed>>) -> T) -> T {
    let mut map = WAITING.lock().unwrap_or_else(PoisonError::into_inner);
    step(map.get_or_insert_with(HashMap::new))
}

/// Holds `feed` for JavaScript to take by the returned token.
pub fn hand_over(feed: Arc<ExternalFeed>) -> u32 {
    let token = NEXT.fetch_add(1, Ordering::Relaxed);
    waiting(|map| map.insert(token, feed));
    token
}

/// Forgets the token's feed if JavaScript never took it (the start is over either way).
pub fn withdraw(token: u32) {
    waiting(|map| map.remove(&token));
}

/// The feed handed over under `token`, once; `null` for an unknown or taken token.
#[napi(js_name = "takeProcessFeed")]
pub fn take_process_feed(token: u32) -> Option<NativeProcessFeed> {
    waiting(|map| map.remove(&token)).map(|feed| NativeProcessFeed { feed })
}

#[napi]
pub struct NativeProcessFeed {
    feed: Arc<ExternalFeed>,
}

fn stream_of(name: &str) -> Result<OutputStream> {
    match name {
        "stdout" => Ok(OutputStream::Stdout),
        "stderr" => Ok(OutputStream::Stderr),
        other => Err(Error::from_reason(format!(
            "a process output stream is stdout or stderr, not {other:?}"
        ))),
    }
}

/// A driver's own error: its message, and `reference` naming the very object for the caller.
fn driver_error(reference: Option<u32>, message: String) -> OwnerError {
    OwnerError::Driver(DriverFailure {
        message,
        external: reference,
    })
}

#[napi]
impl NativeProcessFeed {
    /// Offers output: `'taken'`, `'full'` (offer it again on the `processRoom` wake, nothing
    /// before it) or `'closed'` (nothing more is read).
    #[napi]
    pub fn offer(&self, stream: String, chunk: Buffer) -> Result<&'static str> {
        let bytes = Bytes::copy_from_slice(&chunk);
        Ok(self.feed.offer(stream_of(&stream)?, bytes).as_str())
    }

    /// The driver's `stream` ended.
    #[napi(js_name = "offerEnd")]
    pub fn offer_end(&self, stream: String) -> Result<&'static str> {
        Ok(self.feed.offer_end(stream_of(&stream)?).as_str())
    }

    /// The driver's `stream` failed with its error (`reference`, `message`).
    #[napi(js_name = "offerFailure")]
    pub fn offer_failure(
        &self,
        stream: String,
        reference: Option<u32>,
        message: String,
    ) -> Result<&'static str> {
        let error = driver_error(reference, message);
        Ok(self.feed.offer_failure(stream_of(&stream)?, error).as_str())
    }

    /// The driver's `stream` closed before its end, or (`closeWaitMs`) had not closed that long
    /// after a stop closed it.
    #[napi(js_name = "offerCut")]
    pub fn offer_cut(&self, stream: String, close_wait_ms: Option<u32>) -> Result<&'static str> {
        let cut = close_wait_ms.map_or(Cut::Closed, |ms| Cut::NotClosedWithin(u64::from(ms)));
        Ok(self.feed.offer_cut(stream_of(&stream)?, cut).as_str())
    }

    /// The next thing for the driver's stdin: a Buffer to write, `'end'` (end it, then
    /// `inputEnded`), `'over'` (nothing ever again), or `null` (nothing now: the
    /// `processInput` wake says when).
    #[napi(js_name = "inputTake")]
    pub fn input_take(&self) -> Option<Either<Buffer, &'static str>> {
        match self.feed.input_take() {
            Take::Chunk(chunk) => Some(Either::A(Buffer::from(chunk.to_vec()))),
            Take::End => Some(Either::B("end")),
            Take::Over => Some(Either::B("over")),
            Take::Nothing => None,
        }
    }

    /// The driver's stdin finished: EOF reached the process.
    #[napi(js_name = "inputEnded")]
    pub fn input_ended(&self) {
        self.feed.input_ended();
    }

    /// The driver's stdin failed with its error (`reference`, `message`).
    #[napi(js_name = "inputFailed")]
    pub fn input_failed(&self, reference: Option<u32>, message: String) {
        self.feed.input_failed(driver_error(reference, message));
    }

    /// The driver's stdin closed without an error, or a stop left it.
    #[napi(js_name = "inputClosed")]
    pub fn input_closed(&self) {
        self.feed.input_closed();
    }

    /// The fate the driver reported (anything that is no `SandboxProcessExit` is a lost one).
    #[napi]
    pub fn exit(&self, fate: Captured) {
        self.feed.report_exit(reported_exit(&fate.0));
    }

    /// The driver lost the process's fate (its `exit` rejected).
    #[napi(js_name = "exitLost")]
    pub fn exit_lost(&self) {
        self.feed.report_exit(None);
    }
}
