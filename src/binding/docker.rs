//! `native-sandbox/docker` in Rust: the backend object JavaScript holds.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, ok};
use super::js_driver::{Invoke, JsPersist, JsPort};
use super::js_value::{Captured, JsData};
use super::owner::{record_of, request_of, NativeOwner, NativeRecoveredOwner};
use super::reconcile_desk::ReconcileDesk;
use crate::docker::backend::{check_spill_directory, DockerBackend};
use crate::docker::layout::{HOME, PATH, TMPDIR, WORKSPACE};
use crate::docker::options::{parse_docker_options, parse_prepare_options};
use crate::docker::prepare_image::prepare_image;
use crate::docker::reaper::link::ReaperCommand;
use crate::input::{ToValue, Value};
use crate::lifecycle::driver::Persist;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::SandboxOwner;
use crate::lifecycle::recovered::RecoveredOwner;

/// Parses the backend options, and checks that `spillDirectory` is an existing directory.
#[napi(js_name = "parseDockerOptions")]
pub fn parse_docker_options_js(options: Captured) -> JsData {
    let checked = parse_docker_options(&options.0)
        .map_err(OwnerError::Validation)
        .and_then(|parsed| check_spill_directory(&parsed.spill_directory));
    JsData(match checked {
        Ok(()) => ok(Value::Null),
        Err(error) => failed(&error),
    })
}

/// `prepareDockerSandboxImage({ from, tag, engine? })`: resolves `{ image, id, droppedEnv }`
/// (see `src/docker/prepare_image.rs`), or a failure descriptor.
#[napi(js_name = "prepareDockerImage")]
pub async fn prepare_docker_image(options: Captured) -> JsData {
    let result = async {
        let options = parse_prepare_options(&options.0).map_err(OwnerError::Validation)?;
        let connected = crate::docker::engine::connect(&options.engine)?;
        prepare_image(&connected.docker, &options.from, &options.tag).await
    }
    .await;
    JsData(super::errors::outcome(result.map(|prepared| {
        Value::object([
            ("image", Value::string(prepared.image)),
            ("id", Value::string(prepared.id)),
            (
                "droppedEnv",
                Value::object(
                    prepared
                        .dropped_env
                        .into_iter()
                        .map(|(name, value)| (name, Value::string(value))),
                ),
            ),
        ])
    })))
}

#[napi(js_name = "dockerGuestLayout")]
pub fn docker_guest_layout() -> JsData {
    JsData(Value::object([
        ("workspace", Value::string(WORKSPACE)),
        ("home", Value::string(HOME)),
        ("tmpdir", Value::string(TMPDIR)),
        ("path", Value::string(PATH)),
    ]))
}

#[napi]
pub struct NativeDockerBackend {
    backend: Arc<DockerBackend>,
    /// The reconciliations in flight, by the id their caller chose, so its signal can end one.
    reconciling: ReconcileDesk,
}

#[napi]
impl NativeDockerBackend {
    /// Connects; never waits on the engine (an image reference resolves in the background).
    /// `reaper` is the command that runs this process's reaper; `reaper_unavailable`, when set,
    /// why this process cannot run one (`js/reaper-runtime.js`): its `in_process` starts fail.
    #[napi(constructor)]
    pub fn new(
        options: Captured,
        reaper: Vec<String>,
        reaper_unavailable: Option<String>,
    ) -> Result<Self> {
        let reaper = match reaper_unavailable {
            Some(why) => ReaperCommand::Unavailable(why),
            None => ReaperCommand::Run(reaper),
        };
        let options = parse_docker_options(&options.0).map_err(|issues| {
            let detail: Vec<String> = issues.iter().map(ToString::to_string).collect();
            napi::Error::new(Status::InvalidArg, detail.join("; "))
        })?;
        let backend = super::runtime::within(|| DockerBackend::new(options, reaper))?
            .map_err(|e| napi::Error::new(Status::GenericFailure, e.to_string()))?;
        Ok(Self {
            backend: Arc::new(backend),
            reconciling: ReconcileDesk::default(),
        })
    }

    /// What this backend can enforce: `runtime: 'runsc'` offers only `isolated` networking.
    #[napi]
    pub fn support(&self) -> JsData {
        JsData(self.backend.support().to_value())
    }

    /// The pinned image ID; `null` while a reference is still being resolved.
    #[napi(js_name = "imageId")]
    pub fn image_id(&self) -> Option<String> {
        self.backend.image_id()
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
        let request = request_of(&request.0)?;
        let (id, record, reservation) = self.backend.reserve(&request, !persisted);
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
    /// and the engine calls it had in flight are dropped.
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
        let backend = &self.backend;
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
        let driver = self.backend.recovered(record.clone());
        Ok(NativeRecoveredOwner::wrap(RecoveredOwner::new(
            driver, record,
        )))
    }
}
