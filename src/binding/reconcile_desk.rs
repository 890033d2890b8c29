//! The reconciliations a backend object has in flight, by the id their JavaScript caller chose,
//! so its signal can end exactly its own: shared by every backend that reconciles records.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::errors::{describe, ok};
use super::js_value::{Captured, JsData};
use super::owner::record_of;
use crate::input::{ToValue, Value};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::observe::bounded;
use crate::limits::STARTUP_MS_MAX;
use crate::recovery::reconciled::Reconciled;
use crate::recovery::record::SandboxRecoveryRecord;

#[derive(Default)]
pub struct ReconcileDesk {
    reconciling: Mutex<HashMap<u32, Cancel>>,
}

impl ReconcileDesk {
    fn reconciling(&self) -> MutexGuard<'_, HashMap<u32, Cancel>> {
        self.reconciling
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the reconciliation `id` (its caller's signal aborted): it rejects with `cancelled`,
    /// and the calls it had in flight are dropped. A cancellation that comes before the work
    /// first runs is kept for it, so it starts cancelled.
    pub fn cancel(&self, id: u32) {
        self.reconciling()
            .entry(id)
            .or_default()
            .cancel(OwnerError::cancelled(
                "sandbox reconciliation was cancelled",
            ));
    }

    /// Forgets the reconciliation `id` once its caller has its answer: the entry, and any
    /// cancellation that came after the work ended, go here.
    pub fn end(&self, id: u32) {
        self.reconciling().remove(&id);
    }

    /// Runs `reconcile` on the parsed record: `{ kind }` (matched, uncertain),
    /// `{ kind: 'conflict', reason }` or `{ kind: 'absent', record }`. Observed within
    /// `SANDBOX_LIMITS.startupMs` (the original's bound) and until `cancel(id)`; past either,
    /// the work is dropped with its calls.
    pub async fn run<F, Fut>(&self, record: &Captured, id: u32, reconcile: F) -> JsData
    where
        F: FnOnce(SandboxRecoveryRecord) -> Fut,
        Fut: std::future::Future<Output = Result<Reconciled, OwnerError>>,
    {
        let cancel = self.reconciling().entry(id).or_default().clone();
        let limit = std::time::Duration::from_millis(STARTUP_MS_MAX);
        let result = match record_of(&record.0) {
            Err(error) => Err(OwnerError::driver(error.reason.clone())),
            Ok(record) => tokio::select! {
                reason = cancel.cancelled() => Err(reason),
                found = bounded(limit, "sandbox reconciliation", reconcile(record)) => found,
            }
            .map(|found| match found {
                Reconciled::Matched(_) => Value::object([("kind", Value::string("matched"))]),
                Reconciled::Uncertain(_) => Value::object([("kind", Value::string("uncertain"))]),
                Reconciled::Conflict(reason) => Value::object([
                    ("kind", Value::string("conflict")),
                    ("reason", Value::string(reason)),
                ]),
                Reconciled::Absent(record) => Value::object([
                    ("kind", Value::string("absent")),
                    ("record", record.to_value()),
                ]),
            }),
        };
        JsData(match result {
            Ok(value) => ok(value),
            Err(error) => Value::object([("ok", Value::Bool(false)), ("error", describe(&error))]),
        })
    }
}
