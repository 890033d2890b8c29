//! `native-sandbox/kubernetes` in Rust: the backend object JavaScript holds.

use std::sync::{Arc, OnceLock};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, ok};
use super::js_value::{Captured, JsData};
use super::owner::{request_of, NativeOwner};
use crate::input::{ToValue, Value};
use crate::kubernetes::backend::{support, KubernetesBackend};
use crate::kubernetes::options::{parse_kubernetes_options, KubernetesOptions};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;

/// Parses the backend options; `{ ok: true }` or a failure descriptor naming each bad field.
#[napi(js_name = "parseKubernetesOptions")]
pub fn parse_kubernetes_options_js(options: Captured) -> JsData {
    JsData(match parse_kubernetes_options(&options.0) {
        Ok(_) => ok(Value::Null),
        Err(issues) => failed(&OwnerError::Validation(issues)),
    })
}

#[napi]
pub struct NativeKubernetesBackend {
    options: KubernetesOptions,
    backend: OnceLock<Arc<KubernetesBackend>>,
}

#[napi]
impl NativeKubernetesBackend {
    /// Parsed options, not connected yet (`connect`).
    #[napi(constructor)]
    pub fn new(options: Captured) -> Result<Self> {
        let options = parse_kubernetes_options(&options.0).map_err(|issues| {
            let detail: Vec<String> = issues.iter().map(ToString::to_string).collect();
            napi::Error::new(Status::InvalidArg, detail.join("; "))
        })?;
        Ok(Self {
            options,
            backend: OnceLock::new(),
        })
    }

    /// Reaches the cluster, once: `{ ok: true }` or a failure descriptor naming the kubeconfig
    /// and context.
    #[napi]
    pub async fn connect(&self) -> JsData {
        if self.backend.get().is_some() {
            return JsData(ok(Value::Null));
        }
        JsData(
            match KubernetesBackend::connect(self.options.clone()).await {
                Ok(backend) => {
                    let _ = self.backend.set(Arc::new(backend));
                    ok(Value::Null)
                }
                Err(error) => failed(&error),
            },
        )
    }

    #[napi]
    pub fn support(&self) -> JsData {
        JsData(support(&self.options).to_value())
    }

    /// Inert: the returned owner has acquired nothing.
    #[napi]
    pub fn reserve(&self, request: Captured) -> Result<NativeOwner> {
        let backend = self.backend.get().ok_or_else(|| {
            napi::Error::new(Status::GenericFailure, "the backend is not connected")
        })?;
        let request = request_of(&request.0)?;
        let (id, record, reservation) = backend.reserve(&request);
        Ok(NativeOwner::wrap(SandboxOwner::new(
            id,
            reservation,
            request,
            record,
            None,
        )))
    }
}
