//! `runReaper()`: the reaper process's one call (`js/reaper-main.js`). Its stdin is the pipe
//! from its controller, its stdout the pipe the controller watches.

use std::os::fd::AsFd;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use tokio::net::unix::pipe;

use super::js_value::JsData;
use crate::docker::reaper::serve::serve;
use crate::input::Value;

/// Says `ready`, reads the controller's messages until its link ends, then removes what is
/// still registered. Resolves `{ removed: string[], failed: { sandboxId, reason }[] }`.
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
