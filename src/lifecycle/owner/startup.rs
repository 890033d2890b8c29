//! Startup: entered once, from an inert reservation, as a task of its own; observed within
//! `deadlines.startupMs` and the caller's cancellation. A failed or interrupted startup keeps
//! cleanup ownership of whatever it acquired (it fences and stops).

use std::sync::Arc;

use super::SandboxOwner;
use crate::lifecycle::admission::check_effective;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{ReadyFacts, StartContext};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::observe::{enter, observe, Actual, Observed};
use crate::lifecycle::state::{Operation, State};

impl SandboxOwner {
    /// Starts the sandbox once. Any failure comes back as `OwnerError::Start`: this owner keeps
    /// cleanup ownership of whatever was acquired. `caller` is the caller's cancellation.
    pub async fn start(&self, caller: Option<Cancel>) -> Result<ReadyFacts, OwnerError> {
        let actual = self.begin_start(caller.as_ref())?;
        self.observe_start(actual, caller).await
    }

    /// Enters startup synchronously (the state reads `starting` on return). Needs a tokio
    /// runtime context: the startup runs as its own task.
    pub fn begin_start(&self, caller: Option<&Cancel>) -> Result<Actual<ReadyFacts>, OwnerError> {
        let mut core = self.core();
        if core.state != State::Reserved {
            return Err(OwnerError::state(
                "Sandbox startup is once-only and cannot follow cleanup.",
            ));
        }
        core.state = State::Starting;
        if caller.is_some_and(Cancel::is_cancelled) {
            self.inner.startup_cancel.cancel(OwnerError::cancelled(
                "Sandbox startup was cancelled before entry.",
            ));
        }
        let owner = self.clone();
        let actual = enter(async move {
            let result = owner.run_startup().await;
            if result.is_err() {
                owner.fence(Operation::Start);
            }
            result
        });
        core.startup = Some(actual.clone());
        Ok(actual)
    }

    /// Observes an entered startup within `deadlines.startupMs` and the caller's cancellation.
    pub async fn observe_start(
        &self,
        actual: Actual<ReadyFacts>,
        caller: Option<Cancel>,
    ) -> Result<ReadyFacts, OwnerError> {
        let mut cancels = vec![self.inner.startup_cancel.clone()];
        cancels.extend(caller);
        let result = match observe(
            actual,
            Some(self.startup_limit()),
            &cancels,
            "sandbox startup",
        )
        .await
        {
            Observed::Settled(result) => result,
            Observed::Interrupted(reason) => {
                self.inner.startup_cancel.cancel(reason.clone());
                self.fence(Operation::Start);
                self.stop_in_background();
                Err(reason)
            }
        };
        result.map_err(|cause| OwnerError::Start {
            message: "Sandbox startup failed; its reservation retains cleanup ownership.".into(),
            cause: Arc::new(cause),
        })
    }

    async fn run_startup(&self) -> Result<ReadyFacts, OwnerError> {
        let cancel = &self.inner.startup_cancel;
        cancel.check()?;
        if let Some(completed) = Arc::clone(&self.inner.driver)
            .prepare(cancel.clone())
            .await?
        {
            self.inner.journal.complete_initial(completed).await?;
        }
        cancel.check()?;
        self.inner.journal.initialize().await?;
        cancel.check()?;
        let context = StartContext {
            cancel: cancel.clone(),
            journal: self.journal(),
        };
        let ready = Arc::clone(&self.inner.driver).start(context).await?;
        let mut core = self.core();
        if core.state != State::Starting || cancel.is_cancelled() {
            return Err(OwnerError::cancelled(
                "Sandbox startup settled after its admission was closed.",
            ));
        }
        check_effective(&self.inner.request, &ready.effective)?;
        core.ready = Some(ready.clone());
        core.state = State::Ready;
        Ok(ready)
    }
}
