//! `runReaper()`: the reaper process's one call (`js/reaper-main.js`). Its stdin is the pipe
//! from its controller, its stdout the pipe the controller watches, its stderr the controller's
//! (`link::spawn`): what it left on the engine is written there.

use std::os::fd::AsFd;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use tokio::net::unix::pipe;

use super::js_value::JsData;
use crate::docker::reaper::serve::{report, serve};
use crate::input::Value;

/// Says `ready`, reads the controller's messages until its link ends, then removes what is
/// still registered, within the bounds of `serve.rs`, and writes to stderr one line per object
/// it left (nothing when it left nothing). Resolves
/// `{ removed: string[], failed: { sandboxId, reason }[] }`.
#[napi(js_name = "runReaper")]
pub async fn run_reaper() -> Result<JsData> {
    let pipe_of = |fd: std::os::fd::BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map_err(|e| Error::from_reason(format!("the reaper's pipes: {e}")))
    };
    let input = pipe::Receiver::from_owned_fd(pipe_of(std::io::stdin().as_fd())?)
        .map_err(|e| Error::from_reason(format!("the reaper's stdin is not its link: {e}")))?;
    let out = pipe::Sender::from_owned_fd(pipe_of(std::io::stdout().as_fd())?)
        .map_err(|e| Error::from_reason(format!("the reaper's stdout is not its link: {e}")))?;
    let reaped = serve(input, out)
        .await
        .map_err(|e| Error::from_reason(format!("the reaper's link: {e}")))?;
    let lines = report(&reaped);
    if !lines.is_empty() {
        use std::io::Write;
        let text = lines.join("\n") + "\n";
        // A failed write is dropped: the exit status still says something was left.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
    Ok(JsData(Value::object([
        (
            "removed",
            Value::Array(reaped.removed.into_iter().map(Value::string).collect()),
        ),
        (
            "failed",
            Value::Array(
                reaped
                    .failed
                    .into_iter()
                    .map(|(id, reason)| {
                        Value::object([
                            ("sandboxId", Value::string(id)),
                            ("reason", Value::string(reason)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])))
}
