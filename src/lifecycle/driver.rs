//! The backend seam as Rust traits: what one owner asks of one driver reservation. The Docker
//! driver implements it in Rust; `binding` implements it over a JavaScript driver.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::cancel::Cancel;
use super::error::OwnerError;
use super::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::recovery::record::SandboxRecoveryRecord;

/// What a started driver reports: the observed policy and the guest workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadyFacts {
    pub effective: SandboxEffectivePolicy,
    pub workspace: String,
}

/// Handed to `start`: cancellation of the startup, and the journal every resource effect must
/// checkpoint through (`journal.checkpoint(record).await?` before the effect).
#[derive(Clone)]
pub struct StartContext {
    pub cancel: Cancel,
    pub journal: Arc<Journal>,
}

/// One reserved sandbox of a driver. Stop and destroy must work in any state, also before or
/// during start, and also after persistence failed.
pub trait DriverReservation: Send + Sync + 'static {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>>;
    /// Terminates the complete workload and unblocks its streams; storage stays.
    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
    /// Releases storage (called after a successful stop).
    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
}

/// The caller's persistence of recovery records (`{ kind: 'persisted', persist }`).
pub trait Persist: Send + Sync + 'static {
    fn persist(&self, record: SandboxRecoveryRecord) -> BoxFuture<'static, Result<(), OwnerError>>;
}

/// Cleanup-only ownership a driver hands back from reconciliation.
pub trait RecoveredDriver: Send + Sync + 'static {
    /// The driver's current view of the record; the owner checks it against the reconciled identity.
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>>;
    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
}
