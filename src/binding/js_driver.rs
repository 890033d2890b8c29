//! A driver written in JavaScript, seen from the Rust owner. Every call goes through one
//! threadsafe function per owner into the JS adapter (`js/driver-port.js`), which never throws:
//! it resolves `{ ok: true, value }` or `{ ok: false, ref, message }`, `ref` naming the original
//! JS error so the caller gets that very object back as a cause.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;

use super::errors::describe;
use super::js_value::{Captured, JsData};
use super::process_feed;
use crate::input::{ToValue, Value};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    DriverReservation, Persist, ProcessChannels, ReadyFacts, RecoveredDriver, StartContext,
};
use crate::lifecycle::error::{DriverFailure, OwnerError};
use crate::paths::{self, Anchor};
use crate::policy::effective::parse_sandbox_effective_policy;
use crate::process::external::{external_process, ExternalFeed, ExternalSettings, OnWake, Wake};
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::{parse_sandbox_recovery_record, SandboxRecoveryRecord};

/// `(call: { op, arg }) => Promise<{ ok, value } | { ok: false, ref, message }>`. Weak: a pending
/// driver call alone never keeps Node alive; the Promise a caller awaits does.
pub type Invoke = ThreadsafeFunction<JsData, Promise<Captured>, JsData, Status, false, true>;

#[derive(Clone)]
pub struct JsPort {
    invoke: Arc<Invoke>,
}

/// A port that does not keep the adapter's function alive: what JavaScript itself holds (a
/// process feed) reaches the adapter through it without a cycle through native code.
#[derive(Clone)]
pub struct WeakPort {
    invoke: std::sync::Weak<Invoke>,
}

impl WeakPort {
    /// As `JsPort::notify`, while the port lives.
    pub fn notify(&self, op: &str, arg: Value) {
        if let Some(invoke) = self.invoke.upgrade() {
            JsPort { invoke }.notify(op, arg);
        }
    }
}

impl JsPort {
    pub fn new(invoke: Invoke) -> Self {
        Self {
            invoke: Arc::new(invoke),
        }
    }

    fn message(op: &str, arg: Value) -> JsData {
        JsData(Value::object([("op", Value::string(op)), ("arg", arg)]))
    }

    /// Calls `op` on the adapter and waits for its promise.
    pub async fn call(&self, op: &str, arg: Value) -> Result<Value, OwnerError> {
        let lost = |e: napi::Error| {
            OwnerError::driver(format!(
                "the JavaScript driver could not be called ({op}): {e}"
            ))
        };
        let promise = self
            .invoke
            .call_async(Self::message(op, arg))
            .await
            .map_err(lost)?;
        let Captured(reply) = promise.await.map_err(lost)?;
        if reply.get("ok") == Some(&Value::Bool(true)) {
            return Ok(reply.get("value").cloned().unwrap_or(Value::Undefined));
        }
        let message = match reply.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => format!("the JavaScript driver failed ({op})"),
        };
        let external = match reply.get("ref") {
            Some(Value::Number(n))
                if n.fract() == 0.0 && *n >= 0.0 && *n <= f64::from(u32::MAX) =>
            {
                Some(*n as u32)
            }
            _ => None,
        };
        Err(OwnerError::Driver(DriverFailure { message, external }))
    }

    pub fn downgrade(&self) -> WeakPort {
        WeakPort {
            invoke: Arc::downgrade(&self.invoke),
        }
    }

    /// Fire-and-forget notice (an abort), delivered when the JS thread is free.
    pub fn notify(&self, op: &str, arg: Value) {
        // A closing environment refuses the call; nothing is left to notify then.
        let _ = self.invoke.call(
            Self::message(op, arg),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }
}

pub struct JsDriver {
    port: JsPort,
    /// `policy.deadlines.cleanupMs`: a process receipt the driver lost is `unavailable` this
    /// long after a stop began, at most.
    cleanup: Duration,
    /// The feed of the process the driver started: told when the driver's stop settled.
    feed: Mutex<Option<Arc<ExternalFeed>>>,
}

impl JsDriver {
    pub fn new(port: JsPort, cleanup: Duration) -> Arc<Self> {
        Arc::new(Self {
            port,
            cleanup,
            feed: Mutex::new(None),
        })
    }

    fn feed(&self) -> Option<Arc<ExternalFeed>> {
        self.feed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The feeder's wakes as notices to the adapter (`processInput`, `processRoom`).
fn wake_through(port: WeakPort) -> OnWake {
    Arc::new(move |wake| {
        let op = match wake {
            Wake::Input => "processInput",
            Wake::Room => "processRoom",
        };
        port.notify(op, Value::Null);
    })
}

fn ready_facts(value: &Value) -> Result<ReadyFacts, OwnerError> {
    let effective =
        parse_sandbox_effective_policy(value.get("effective").unwrap_or(&Value::Undefined))
            .map_err(|issues| OwnerError::Validation(prefix_issues(issues, "effective")))?;
    let mut issues = crate::input::Issues::new();
    let workspace = paths::path(
        value.get("workspace").unwrap_or(&Value::Undefined),
        &["workspace".into()],
        Anchor::Guest,
        &mut issues,
    );
    let workspace = issues.finish(workspace).map_err(OwnerError::Validation)?;
    Ok(ReadyFacts {
        effective,
        workspace,
    })
}

fn prefix_issues(mut issues: Vec<crate::input::Issue>, field: &str) -> Vec<crate::input::Issue> {
    for issue in &mut issues {
        issue.path.insert(0, field.into());
    }
    issues
}

impl DriverReservation for JsDriver {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        async move {
            let call = self.port.call("start", Value::Null);
            tokio::pin!(call);
            let reply = tokio::select! {
                reply = &mut call => reply,
                reason = context.cancel.cancelled() => {
                    // Abort the driver's signal, then wait for its start to settle: entered work
                    // stays owned until it does.
                    self.port.notify("abortStart", describe(&reason));
                    call.await
                }
            }?;
            ready_facts(&reply)
        }
        .boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let stopped = self.port.call("stop", Value::Null).await.map(drop);
            // Settled either way: the driver has said what it will about its process.
            if let Some(feed) = self.feed() {
                feed.stop_settled();
            }
            stopped
        }
        .boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.port.call("destroy", Value::Null).await.map(drop) }.boxed()
    }

    /// The adapter's `startProcess` starts the driver's process and wires its streams to a
    /// feed made here (handed over by token); the owner runs the channels as any process's.
    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        // The adapter holds the spec the driver reserved with.
        let _ = spec;
        async move {
            // A stop that came before this task ran: the driver is never asked.
            cancel.check()?;
            let (channels, feed) = external_process(ExternalSettings {
                execution: cancel.clone(),
                cleanup: self.cleanup,
                on_wake: wake_through(self.port.downgrade()),
            });
            *self.feed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&feed));
            let token = process_feed::hand_over(feed);
            let arg = Value::object([("feed", Value::Number(f64::from(token)))]);
            let call = self.port.call("startProcess", arg);
            tokio::pin!(call);
            // The call first: its first poll queues `startProcess`, so an abort is always
            // queued after it (one threadsafe function delivers in order).
            let reply = tokio::select! {
                biased;
                reply = &mut call => reply,
                reason = cancel.cancelled() => {
                    // Abort the driver's signal, then wait for its start to settle: what it
                    // started stays owned until it does.
                    self.port.notify("abortProcess", describe(&reason));
                    call.await
                }
            };
            process_feed::withdraw(token);
            reply.map(|_| channels)
        }
        .boxed()
    }
}

/// `{ kind: 'persisted', persist }` through the same adapter.
pub struct JsPersist {
    port: JsPort,
}

impl JsPersist {
    pub fn new(port: JsPort) -> Arc<Self> {
        Arc::new(Self { port })
    }
}

impl Persist for JsPersist {
    fn persist(&self, record: SandboxRecoveryRecord) -> BoxFuture<'static, Result<(), OwnerError>> {
        let port = self.port.clone();
        async move { port.call("persist", record.to_value()).await.map(drop) }.boxed()
    }
}

/// The cleanup owner a JavaScript driver returned from `reconcile`.
pub struct JsRecoveredDriver {
    port: JsPort,
}

impl JsRecoveredDriver {
    pub fn new(port: JsPort) -> Arc<Self> {
        Arc::new(Self { port })
    }
}

/// Parses a record a driver reported, naming what was wrong with it.
pub fn reported_record(value: &Value) -> Result<SandboxRecoveryRecord, OwnerError> {
    parse_sandbox_recovery_record(value).map_err(OwnerError::Validation)
}

impl RecoveredDriver for JsRecoveredDriver {
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>> {
        async move { reported_record(&self.port.call("recoveredRecord", Value::Null).await?) }
            .boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.port.call("recoveredStop", Value::Null).await.map(drop) }.boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            self.port
                .call("recoveredDestroy", Value::Null)
                .await
                .map(drop)
        }
        .boxed()
    }
}
