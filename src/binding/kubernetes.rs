//! `native-sandbox/kubernetes` in Rust: the backend object JavaScript holds.

use std::sync::{Arc, OnceLock};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, ok};
use super::js_driver::{Invoke, JsPersist, JsPort};
use super::js_value::{Captured, JsData};
use super::owner::{record_of, request_of, NativeOwner, NativeRecoveredOwner};
use super::reconcile_desk::ReconcileDesk;
use crate::input::{ToValue, Value};
use crate::kubernetes::backend::{support, KubernetesBackend};
use crate::kubernetes::options::{parse_kubernetes_options, KubernetesOptions};
use crate::lifecycle::driver::Persist;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::lifecycle::recovered::RecoveredOwner;

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
    /// The reconciliations in flight, by the id their caller chose, so its signal can end one.
    reconciling: ReconcileDesk,
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
            reconciling: ReconcileDesk::default(),
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

    fn connected(&self) -> Result<&Arc<KubernetesBackend>> {
        self.backend
            .get()
            .ok_or_else(|| napi::Error::new(Status::GenericFailure, "the backend is not connected"))
    }

    /// Inert: the returned owner has acquired nothing. `invoke` carries `persist` when
    /// `persisted` is true.
    #[napi]
    pub fn reserve(
        &self,
        request: Captured,
        persisted: bool,
        invoke: Invoke,
    ) -> Result<NativeOwner> {
        let backend = self.connected()?;
        let request = request_of(&request.0)?;
        let (id, record, reservation) = backend.reserve(&request);
        let persist: Option<Arc<dyn Persist>> =
            persisted.then(|| JsPersist::new(JsPort::new(invoke)) as Arc<dyn Persist>);
        Ok(NativeOwner::wrap(SandboxOwner::new(
            id,
            reservation,
            request,
            record,
            persist,
        )))
    }

    /// Ends the reconciliation `id` (its caller's signal aborted): it rejects with `cancelled`,
    /// and the API requests it had in flight are dropped.
    #[napi(js_name = "cancelReconcile")]
    pub fn cancel_reconcile(&self, id: u32) {
        self.reconciling.cancel(id);
    }

    /// Forgets the reconciliation `id` once its caller has its answer.
    #[napi(js_name = "endReconcile")]
    pub fn end_reconcile(&self, id: u32) {
        self.reconciling.end(id);
    }

    /// Resolves `{ kind }` (matched, uncertain), `{ kind: 'conflict', reason }` or
    /// `{ kind: 'absent', record }`, bounded and cancellable (`ReconcileDesk::run`).
    #[napi]
    pub async fn reconcile(&self, record: Captured, id: u32) -> JsData {
        let backend = match self.connected() {
            Ok(backend) => Arc::clone(backend),
            Err(error) => return JsData(failed(&OwnerError::driver(error.reason.clone()))),
        };
        self.reconciling
            .run(&record, id, |record| async move {
                backend.reconcile(&record).await
            })
            .await
    }

    /// A cleanup-only owner for a reconciled record; every effect re-proves ownership.
    #[napi]
    pub fn recovered(&self, record: Captured) -> Result<NativeRecoveredOwner> {
        let record = record_of(&record.0)?;
        let driver = self.connected()?.recovered(record.clone());
        Ok(NativeRecoveredOwner::wrap(RecoveredOwner::new(
            driver, record,
        )))
    }
}
