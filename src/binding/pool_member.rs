//! One pool call on a sandbox as JavaScript holds it: made per call (so the pool's signal
//! cancels exactly it), then `prepare` (the member's supervisor brought up before any claim) or
//! `readBack` (the claim's reading of the member from its engine).

use napi_derive::napi;

use super::errors::outcome;
use super::js_value::JsData;
use crate::input::Value;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;

#[napi]
pub struct NativePoolMember {
    owner: SandboxOwner,
    /// The pool's signal, or its close.
    cancel: Cancel,
}

impl NativePoolMember {
    pub fn new(owner: SandboxOwner) -> Self {
        Self {
            owner,
            cancel: Cancel::new(),
        }
    }
}

#[napi]
impl NativePoolMember {
    /// The pool's signal fired or it closed: the call ends with `cancelled`.
    #[napi]
    pub fn abort(&self) {
        self.cancel.cancel(OwnerError::cancelled(
            "the pool's call on its member was cancelled through its signal",
        ));
    }

    /// Brings up the member's supervisor; resolves `null` or an error descriptor.
    #[napi]
    pub async fn prepare(&self) -> JsData {
        let result = self.owner.prepare_sessions(Some(self.cancel.clone())).await;
        JsData(outcome(result.map(|()| Value::Null)))
    }

    /// Reads the member back from its engine; resolves `null` when it still applies what it
    /// started with, or an error descriptor saying what changed.
    #[napi(js_name = "readBack")]
    pub async fn read_back(&self) -> JsData {
        let result = self.owner.read_back(Some(self.cancel.clone())).await;
        JsData(outcome(result.map(|()| Value::Null)))
    }
}
