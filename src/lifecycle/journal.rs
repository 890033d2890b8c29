//! The recovery journal: every checkpoint finishes persisting before the driver's next resource
//! effect, and a failure fences progress for good (cleanup never depends on it).

use std::sync::{Arc, Mutex, PoisonError};

use super::cancel::Cancel;
use super::driver::Persist;
use super::error::{OperationCode, OwnerError};
use crate::recovery::continuation::{check_continuation, Continuation};
use crate::recovery::record::SandboxRecoveryRecord;

pub struct Journal {
    current: Mutex<SandboxRecoveryRecord>,
    persist: Option<Arc<dyn Persist>>,
    /// Serializes checkpoints, so records are persisted in the order the driver made them.
    order: tokio::sync::Mutex<()>,
    fence: Mutex<Option<OwnerError>>,
    /// Set once the initial record was handed to persistence (it is final from then on).
    initialized: std::sync::atomic::AtomicBool,
    /// Fired when the journal fences: startup must not reach another effect.
    startup: Cancel,
}

impl Journal {
    pub fn new(
        initial: SandboxRecoveryRecord,
        persist: Option<Arc<dyn Persist>>,
        startup: Cancel,
    ) -> Self {
        Self {
            current: Mutex::new(initial),
            persist,
            order: tokio::sync::Mutex::new(()),
            fence: Mutex::new(None),
            initialized: std::sync::atomic::AtomicBool::new(false),
            startup,
        }
    }

    /// The last record that finished persisting (or the initial one).
    pub fn current(&self) -> SandboxRecoveryRecord {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn fenced(&self) -> Option<OwnerError> {
        self.fence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Completes the initial record before it is first persisted (see
    /// `DriverReservation::prepare`): only the image and configuration digests may change.
    pub async fn complete_initial(
        &self,
        completed: SandboxRecoveryRecord,
    ) -> Result<(), OwnerError> {
        let _order = self.order.lock().await;
        if self.initialized.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(OwnerError::state(
                "the initial recovery record was already persisted; it cannot be completed any more",
            ));
        }
        let mut comparable = completed.clone();
        let current = self.current();
        comparable.image_digest = current.image_digest.clone();
        comparable.configuration_digest = current.configuration_digest.clone();
        if comparable != current {
            return Err(OwnerError::state(
                "a driver may complete only the image and configuration digests of its initial record",
            ));
        }
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = completed;
        Ok(())
    }

    /// Persists the initial record before anything is acquired.
    pub async fn initialize(&self) -> Result<(), OwnerError> {
        let _order = self.order.lock().await;
        self.initialized
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.guard()?;
        let initial = self.current();
        self.write(initial).await
    }

    /// Checks that `next` continues the current record, persists it, then makes it current.
    pub async fn checkpoint(&self, next: SandboxRecoveryRecord) -> Result<(), OwnerError> {
        let _order = self.order.lock().await;
        self.guard()?;
        if let Err(why) = check_continuation(&self.current(), &next, Continuation::Checkpoint) {
            let error = OwnerError::state(why);
            self.fence_with(error.clone());
            return Err(error);
        }
        self.write(next).await
    }

    fn guard(&self) -> Result<(), OwnerError> {
        match self.fenced() {
            Some(reason) => Err(OwnerError::Operation {
                code: OperationCode::PersistenceFailure,
                message: "recovery progress is fenced after an earlier failure; only stop and destroy remain".into(),
                cause: Some(Arc::new(reason)),
            }),
            None => Ok(()),
        }
    }

    async fn write(&self, record: SandboxRecoveryRecord) -> Result<(), OwnerError> {
        if let Some(persist) = &self.persist {
            if let Err(cause) = persist.persist(record.clone()).await {
                let error = OwnerError::Operation {
                    code: OperationCode::PersistenceFailure,
                    message: "persisting the recovery record failed; progress is fenced, stop and destroy remain".into(),
                    cause: Some(Arc::new(cause)),
                };
                self.fence_with(error.clone());
                return Err(error);
            }
        }
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = record;
        Ok(())
    }

    fn fence_with(&self, error: OwnerError) {
        self.fence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(error.clone());
        self.startup.cancel(error);
    }
}
