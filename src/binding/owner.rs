//! The owner classes JavaScript holds: `NativeOwner` (a reservation's whole life),
//! `NativeReconciliation` (one reconcile call) and `NativeRecoveredOwner` (cleanup only).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::*;

use napi_derive::napi;

use super::errors::{failed, ok, outcome};
use super::js_driver::{reported_record, Invoke, JsDriver, JsPersist, JsPort, JsRecoveredDriver};
use super::js_value::{Captured, JsData};
use super::process_streams::{self, IoSlot, NativeAttachedProcess};
use super::runtime::{within, within_owner};
use crate::digest::fresh_id;
use crate::input::{ToValue, Value};
use crate::lifecycle::admission::check_supported;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{DriverReservation, Persist, ReadyFacts};
use crate::lifecycle::error::{CleanupOperation, OperationCode, OwnerError};
use crate::lifecycle::freeze::FreezeTo;
use crate::lifecycle::observe::{enter, observe, Observed};
use crate::lifecycle::owner::SandboxOwner;
use crate::lifecycle::recovered::RecoveredOwner;
use crate::lifecycle::state::State;
use crate::limits::STARTUP_MS_MAX;
use crate::policy::request::{parse_sandbox_request, SandboxRequest};
use crate::policy::support::{parse_sandbox_support, SandboxSupport};
use crate::process::spec::parse_sandbox_process_spec;
use crate::recovery::continuation::{check_continuation, Continuation};
use crate::recovery::record::{Authority, Identity, Phase, SandboxRecoveryRecord};

fn invalid(what: &str, issues: Vec<crate::input::Issue>) -> napi::Error {
    let detail: Vec<String> = issues.iter().map(ToString::to_string).collect();
    napi::Error::new(Status::InvalidArg, format!("{what}: {}", detail.join("; ")))
}

pub fn request_of(value: &Value) -> Result<SandboxRequest> {
    parse_sandbox_request(value).map_err(|i| invalid("request", i))
}

fn support_of(value: &Value) -> Result<SandboxSupport> {
    parse_sandbox_support(value).map_err(|i| invalid("support", i))
}

pub fn record_of(value: &Value) -> Result<SandboxRecoveryRecord> {
    crate::recovery::record::parse_sandbox_recovery_record(value)
        .map_err(|i| invalid("recovery record", i))
}

fn state_value(state: State) -> Value {
    let mut fields = vec![("kind", Value::string(state.kind()))];
    if let Some(operation) = state.operation() {
        fields.push(("operation", Value::string(operation.as_str())));
    }
    Value::object(fields)
}

fn ready_value(ready: &ReadyFacts) -> Value {
    Value::object([
        ("effective", ready.effective.to_value()),
        ("workspace", Value::string(ready.workspace.as_str())),
    ])
}

/// Owners alive in this process (a diagnostic the memory tests and the soak benchmark read).
#[napi(js_name = "liveOwnerCount")]
pub fn live_owner_count() -> u32 {
    u32::try_from(crate::lifecycle::owner::live_owners()).unwrap_or(u32::MAX)
}

/// Refuses a request the support cannot enforce, before the driver is asked anything.
#[napi(js_name = "checkSupported")]
pub fn check_supported_js(request: Captured, support: Captured) -> Result<JsData> {
    let request = request_of(&request.0)?;
    let support = support_of(&support.0)?;
    Ok(JsData(outcome(
        check_supported(&request, &support).map(|()| Value::Null),
    )))
}

/// Refuses an observed policy looser than the request (the owner's post-start admission).
#[napi(js_name = "checkEffective")]
pub fn check_effective_js(request: Captured, effective: Captured) -> Result<JsData> {
    let request = request_of(&request.0)?;
    let effective = crate::policy::effective::parse_sandbox_effective_policy(&effective.0)
        .map_err(|i| invalid("effective policy", i))?;
    Ok(JsData(outcome(
        crate::lifecycle::admission::check_effective(&request, &effective).map(|()| Value::Null),
    )))
}

/// The driver's initial record must describe exactly this reservation, before any effect.
#[napi(js_name = "checkInitialRecord")]
pub fn check_initial_record(record: Captured, id: String, support: Captured) -> Result<JsData> {
    let record = record_of(&record.0)?;
    let support = support_of(&support.0)?;
    let fresh = record.sandbox_id == id
        && record.backend_id == support.backend_id
        && record.backend_revision == support.backend_revision
        && record.phase == Phase::Reserved
        && record.authority == Authority::Unverified
        && record
            .resources
            .iter()
            .all(|r| r.identity == Identity::Planned);
    Ok(JsData(if fresh {
        ok(Value::Null)
    } else {
        failed(&OwnerError::state(
            "The initial recovery record must describe this reserved backend ownership before resource effects.",
        ))
    }))
}

#[napi]
pub struct NativeOwner {
    owner: SandboxOwner,
    caller: Cancel,
    process_caller: Cancel,
    io: IoSlot,
    transfers: super::transfers::SharedSlots,
}

impl NativeOwner {
    pub fn owner(&self) -> SandboxOwner {
        self.owner.clone()
    }

    pub fn slots(&self) -> &super::transfers::TransferSlots {
        &self.transfers
    }

    /// Wraps an owner built in Rust (the Docker backend's).
    pub fn wrap(owner: SandboxOwner) -> Self {
        Self {
            owner,
            caller: Cancel::new(),
            process_caller: Cancel::new(),
            io: Arc::new(Mutex::new(None)),
            transfers: Arc::default(),
        }
    }
}

#[napi]
impl NativeOwner {
    /// `request` parsed, `id` and `record` from the driver's fresh reservation, `persisted` when
    /// the recovery policy persists through the adapter.
    #[napi(constructor)]
    pub fn new(
        request: Captured,
        id: String,
        record: Captured,
        persisted: bool,
        invoke: Invoke,
    ) -> Result<Self> {
        let request = request_of(&request.0)?;
        let record = record_of(&record.0)?;
        let port = JsPort::new(invoke);
        let persist: Option<Arc<dyn Persist>> =
            persisted.then(|| JsPersist::new(port.clone()) as Arc<dyn Persist>);
        let cleanup = std::time::Duration::from_millis(request.policy.deadlines.cleanup_ms);
        let driver = JsDriver::new(port, cleanup) as Arc<dyn DriverReservation>;
        Ok(Self::wrap(SandboxOwner::new(
            id, driver, request, record, persist,
        )))
    }

    #[napi]
    pub fn id(&self) -> String {
        self.owner.id().to_owned()
    }

    #[napi]
    pub fn state(&self) -> JsData {
        JsData(state_value(self.owner.state()))
    }

    #[napi(js_name = "recoveryRecord")]
    pub fn recovery_record(&self) -> JsData {
        JsData(self.owner.recovery_record().to_value())
    }

    /// The caller's signal aborted: cancel startup (before or after entry).
    #[napi(js_name = "cancelStart")]
    pub fn cancel_start(&self) {
        self.caller.cancel(OwnerError::cancelled(
            "sandbox startup was cancelled through its signal",
        ));
    }

    /// Enters startup now (the state reads `starting` on return) and resolves with its outcome.
    #[napi]
    pub fn start(&self, env: &Env) -> Result<AsyncBlock<JsData>> {
        let owner = self.owner.clone();
        let caller = self.caller.clone();
        let entered = within(|| owner.begin_start(Some(&caller)))?;
        AsyncBlockBuilder::new(async move {
            let result = match entered {
                Ok(actual) => owner.observe_start(actual, Some(caller)).await,
                Err(error) => Err(error),
            };
            Ok(JsData(outcome(result.map(|ready| ready_value(&ready)))))
        })
        .build(env)
    }

    /// Enters (or joins) a stop now and resolves with its observed outcome.
    #[napi]
    pub fn stop(&self, env: &Env) -> Result<AsyncBlock<JsData>> {
        let owner = self.owner.clone();
        let entered = within(|| owner.begin_stop_call())?;
        cleanup_block(env, owner, entered, CleanupOperation::Stop)
    }

    /// Enters (or joins) destruction now and resolves with its observed outcome.
    #[napi]
    pub fn destroy(&self, env: &Env) -> Result<AsyncBlock<JsData>> {
        let owner = self.owner.clone();
        let entered = within(|| owner.begin_destroy_call())?;
        cleanup_block(env, owner, entered, CleanupOperation::Destroy)
    }

    /// Reserves the one process (synchronously); resolves `{ id }` or an error descriptor.
    #[napi(js_name = "reserveProcess")]
    /// `reattachable`: the process's stdin stays open across attachments (the agentproto
    /// provider's daemon); never part of the public recipe.
    pub fn reserve_process(&self, spec: Captured, reattachable: Option<bool>) -> JsData {
        let result = parse_sandbox_process_spec(&spec.0)
            .map_err(OwnerError::Validation)
            .and_then(|mut spec| {
                spec.reattachable = reattachable.unwrap_or(false);
                let value = spec.to_value();
                self.owner.reserve_process(spec).map(|()| value)
            })
            .map(|spec| Value::object([("id", Value::string(fresh_id("proc"))), ("spec", spec)]));
        JsData(outcome(result))
    }

    /// The caller queued more stdin than `policy.streams.maxBufferedInputBytes` on the Node
    /// stream (`js/stdin-guard.js`): the sandbox stops, and that limit is why its execution
    /// ended.
    #[napi(js_name = "stopForInputLimit")]
    pub fn stop_for_input_limit(&self, message: String) {
        let owner = self.owner.clone();
        // A runtime that cannot run any more has nothing left to stop.
        let _ = within_owner(|| {
            owner.stop_for(OwnerError::operation(OperationCode::InputLimit, message));
            Ok(())
        });
    }

    #[napi(js_name = "cancelProcessStart")]
    pub fn cancel_process_start(&self) {
        self.process_caller.cancel(OwnerError::cancelled(
            "process startup was cancelled through its signal",
        ));
    }

    /// Enters the process start now (a stop called right after sees it, as the original's
    /// synchronous admission) and resolves with its observed outcome.
    #[napi(js_name = "startProcess")]
    pub fn start_process(&self, env: &Env) -> Result<AsyncBlock<JsData>> {
        let owner = self.owner.clone();
        let caller = self.process_caller.clone();
        let io = Arc::clone(&self.io);
        let entered = within(|| owner.begin_process_start(Some(&caller)))?;
        AsyncBlockBuilder::new(async move {
            let result = match entered {
                Ok(start) => owner.observe_process_start(start, Some(caller)).await,
                Err(error) => Err(error),
            };
            Ok(JsData(outcome(result.map(|started| {
                *io.lock().unwrap_or_else(PoisonError::into_inner) = Some(started);
                Value::Null
            }))))
        })
        .build(env)
    }

    /// Whether this sandbox runs commands and file calls beside its process (`support.sessions`).
    #[napi(js_name = "sessionsSupported")]
    pub fn sessions_supported(&self) -> bool {
        self.owner.sessions_supported()
    }

    /// A command of `exec` / `run`, not started yet (`start` parses and starts it).
    #[napi]
    pub fn command(&self) -> crate::binding::command::NativeCommand {
        crate::binding::command::NativeCommand::new(self.owner.clone())
    }

    /// One call of `files`.
    #[napi]
    pub fn files(&self) -> crate::binding::files::NativeFiles {
        crate::binding::files::NativeFiles::new(self.owner.clone())
    }

    /// One workspace archive call on this sandbox (an adapter's persist or hydrate).
    #[napi(js_name = "workspaceArchive")]
    pub fn workspace_archive(&self) -> crate::binding::workspace_archive::NativeWorkspaceArchive {
        crate::binding::workspace_archive::NativeWorkspaceArchive::new(self.owner.clone())
    }

    /// One pool call on this sandbox (`createSandboxPool`).
    #[napi(js_name = "poolMember")]
    pub fn pool_member(&self) -> crate::binding::pool_member::NativePoolMember {
        crate::binding::pool_member::NativePoolMember::new(self.owner.clone())
    }

    /// Writes one chunk to stdin; resolves when the bounded staging accepted it.
    #[napi(js_name = "processWrite")]
    pub async fn process_write(&self, chunk: Buffer) -> JsData {
        process_streams::write(&self.io, chunk).await
    }

    /// The OCI runtime the engine applied to this sandbox, read back after creation (a Docker
    /// sandbox once started); `null` otherwise.
    #[napi(js_name = "appliedRuntime")]
    pub fn applied_runtime(&self) -> Option<String> {
        self.owner.driver().applied_runtime()
    }

    /// What the sandbox's egress gateway counted: `{ allowed, refused, recent }` for a started
    /// allowlist sandbox, `null` for a sandbox without a gateway, or an error descriptor.
    #[napi(js_name = "egressReport")]
    pub async fn egress_report(&self) -> JsData {
        let driver = self.owner.driver();
        JsData(outcome(driver.egress().await.map(|report| {
            report.map_or(Value::Null, |report| report.to_value())
        })))
    }

    /// Queues one chunk at once if the staging has room now (`true`), else `false`: the caller
    /// then waits through `processWrite`. Never waits.
    #[napi(js_name = "processTryWrite")]
    pub fn process_try_write(&self, chunk: Buffer) -> JsData {
        process_streams::try_write(&self.io, &chunk)
    }

    /// Ends stdin: resolves after EOF reached the guest.
    #[napi(js_name = "processEnd")]
    pub async fn process_end(&self) -> JsData {
        process_streams::end(&self.io).await
    }

    /// Up to `max` bytes of `stdout` or `stderr`: a Buffer, `null` at end, or an error descriptor.
    #[napi(js_name = "processRead")]
    pub async fn process_read(&self, stream: String, max: u32) -> Either3<Buffer, Null, JsData> {
        process_streams::read(&self.io, &stream, max).await
    }

    /// `stdout` or `stderr` was destroyed: what the guest writes there is discarded natively
    /// from now on, so it never blocks on a stream nobody reads.
    #[napi(js_name = "processDiscard")]
    pub async fn process_discard(&self, stream: String) {
        process_streams::discard(&self.io, &stream).await;
    }

    /// The process's streams newly stalled (each named once): see `process::stall`.
    #[napi(js_name = "processStalls")]
    pub fn process_stalls(&self) -> Option<Vec<String>> {
        process_streams::stalls(&self.io)
    }

    #[napi(js_name = "processExit")]
    pub async fn process_exit(&self) -> JsData {
        let owner = self.owner.clone();
        process_streams::exit(&self.io, move || owner.stop_cause()).await
    }

    /// Pauses (`true`) or resumes (`false`) the running process on the engine.
    #[napi(js_name = "freezeSandbox")]
    pub async fn freeze_sandbox(&self, paused: bool) -> JsData {
        let to = if paused {
            FreezeTo::Paused
        } else {
            FreezeTo::Running
        };
        JsData(outcome(self.owner.freeze(to).await.map(|()| Value::Null)))
    }

    /// The driver's `checkpoint(record)`: persisted before it resolves.
    #[napi]
    pub async fn checkpoint(&self, record: Captured) -> JsData {
        let result = match crate::recovery::record::parse_sandbox_recovery_record(&record.0) {
            Ok(record) => self.owner.journal().checkpoint(record).await,
            Err(issues) => Err(OwnerError::Validation(issues)),
        };
        JsData(outcome(result.map(|()| Value::Null)))
    }
}

fn cleanup_block(
    env: &Env,
    owner: SandboxOwner,
    entered: Option<crate::lifecycle::observe::Actual<()>>,
    operation: CleanupOperation,
) -> Result<AsyncBlock<JsData>> {
    AsyncBlockBuilder::new(async move {
        let result = match entered {
            Some(actual) => owner.observe_cleanup(actual, operation).await,
            None => Ok(()),
        };
        Ok(JsData(outcome(result.map(|()| Value::Null))))
    })
    .build(env)
}

/// One `backend.reconcile(record)` call against a JavaScript driver.
#[napi]
pub struct NativeReconciliation {
    record: SandboxRecoveryRecord,
    support: SandboxSupport,
    port: JsPort,
    cancel: Cancel,
}

#[napi]
impl NativeReconciliation {
    #[napi(constructor)]
    pub fn new(record: Captured, support: Captured, invoke: Invoke) -> Result<Self> {
        Ok(Self {
            record: record_of(&record.0)?,
            support: support_of(&support.0)?,
            port: JsPort::new(invoke),
            cancel: Cancel::new(),
        })
    }

    #[napi]
    pub fn cancel(&self) {
        self.cancel.cancel(OwnerError::cancelled(
            "sandbox reconciliation was cancelled through its signal",
        ));
    }

    /// Resolves `{ kind: 'matched' | 'uncertain' }`, `{ kind: 'conflict', reason }` or
    /// `{ kind: 'absent', record }`; never a runnable sandbox.
    #[napi]
    pub async fn run(&self) -> JsData {
        JsData(outcome(self.reconcile().await))
    }
}

impl NativeReconciliation {
    async fn reconcile(&self) -> std::result::Result<Value, OwnerError> {
        if self.record.backend_id != self.support.backend_id
            || self.record.backend_revision != self.support.backend_revision
        {
            return Ok(Value::object([
                ("kind", Value::string("conflict")),
                (
                    "reason",
                    Value::string(
                        "Recovery record belongs to another backend identity or revision.",
                    ),
                ),
            ]));
        }
        if self.cancel.is_cancelled() {
            return Err(OwnerError::cancelled(
                "Sandbox reconciliation was cancelled before entry.",
            ));
        }
        let port = self.port.clone();
        let record = self.record.to_value();
        let actual = enter(async move { port.call("reconcile", record).await });
        let reply = match observe(
            actual,
            Some(Duration::from_millis(STARTUP_MS_MAX)),
            std::slice::from_ref(&self.cancel),
            "sandbox reconciliation",
        )
        .await
        {
            Observed::Settled(reply) => reply?,
            Observed::Interrupted(reason) => {
                self.port
                    .notify("abortReconcile", super::errors::describe(&reason));
                return Err(reason);
            }
        };
        let invalid = || OwnerError::state("Backend returned an invalid reconciliation result.");
        match reply.get("kind") {
            Some(Value::String(kind)) if kind == "matched" || kind == "uncertain" => {
                Ok(Value::object([("kind", Value::string(kind.as_str()))]))
            }
            Some(Value::String(kind)) if kind == "conflict" => match reply.get("reason") {
                Some(Value::String(reason)) if !reason.is_empty() && reason.len() <= 1_024 => {
                    Ok(Value::object([
                        ("kind", Value::string("conflict")),
                        ("reason", Value::string(reason.as_str())),
                    ]))
                }
                _ => Err(invalid()),
            },
            Some(Value::String(kind)) if kind == "absent" => {
                let absent = reported_record(reply.get("record").unwrap_or(&Value::Undefined))?;
                check_continuation(&self.record, &absent, Continuation::Reconciliation)
                    .map_err(OwnerError::state)?;
                if absent
                    .resources
                    .iter()
                    .any(|r| r.identity == Identity::Creating)
                {
                    return Err(OwnerError::state(
                        "An entered acquisition with unresolved identity cannot be conclusively absent.",
                    ));
                }
                Ok(Value::object([
                    ("kind", Value::string("absent")),
                    ("record", absent.to_value()),
                ]))
            }
            _ => Err(invalid()),
        }
    }
}

/// Cleanup-only ownership of a reconciled sandbox.
#[napi]
pub struct NativeRecoveredOwner {
    owner: RecoveredOwner,
}

impl NativeRecoveredOwner {
    pub fn wrap(owner: RecoveredOwner) -> Self {
        Self { owner }
    }
}

#[napi]
impl NativeRecoveredOwner {
    #[napi(constructor)]
    pub fn new(record: Captured, invoke: Invoke) -> Result<Self> {
        let record = record_of(&record.0)?;
        let driver = JsRecoveredDriver::new(JsPort::new(invoke));
        Ok(Self {
            owner: RecoveredOwner::new(driver, record),
        })
    }

    /// The last record accepted for this owner.
    #[napi(js_name = "recoveryRecord")]
    pub fn recovery_record(&self) -> JsData {
        JsData(self.owner.recovery_record().to_value())
    }

    /// Checks the driver's current record against the reconciled identity and returns it.
    #[napi(js_name = "observeRecord")]
    pub fn observe_record(&self, current: Captured) -> JsData {
        let result =
            reported_record(&current.0).and_then(|record| self.owner.observe_record(record));
        JsData(outcome(result.map(|record| record.to_value())))
    }

    #[napi]
    pub async fn stop(&self) -> JsData {
        JsData(outcome(self.owner.stop().await.map(|()| Value::Null)))
    }

    #[napi]
    pub async fn destroy(&self) -> JsData {
        JsData(outcome(self.owner.destroy().await.map(|()| Value::Null)))
    }

    /// Pauses (`true`) or resumes (`false`) the reconciled sandbox's process.
    #[napi]
    pub async fn freeze(&self, paused: bool) -> JsData {
        let to = if paused {
            FreezeTo::Paused
        } else {
            FreezeTo::Running
        };
        JsData(outcome(self.owner.freeze(to).await.map(|()| Value::Null)))
    }

    /// A port to attach again to the reconciled sandbox's reattachable process.
    #[napi(js_name = "processPort")]
    pub fn process_port(&self) -> NativeAttachedProcess {
        NativeAttachedProcess::new(self.owner.clone())
    }
}
