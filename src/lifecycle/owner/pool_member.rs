//! What a pool asks of a sandbox it keeps: its supervisor brought up before any claim (the
//! first command is then one frame away, and nothing of any process is fixed), and, at the
//! claim, the sandbox read back from its engine (a member that no longer applies what it started
//! with is never handed out).

use std::sync::Arc;

use super::SandboxOwner;
use crate::lifecycle::admission::check_effective;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::observe::{enter, observe, Observed};
use crate::lifecycle::state::State;

impl SandboxOwner {
    /// Brings up what runs the sandbox's commands and file calls (made once, kept), within
    /// `deadlines.startupMs`; a backend without sessions has nothing to bring up.
    pub async fn prepare_sessions(&self, caller: Option<Cancel>) -> Result<(), OwnerError> {
        if !self.sessions_supported() {
            return Ok(());
        }
        self.file_call(caller, |_link, _roots| Box::pin(async { Ok(()) }))
            .await
    }

    /// Reads the started sandbox back from its engine within `deadlines.startupMs`: it must be
    /// ready, and what its driver reads now must be exactly what startup read (and still pass
    /// the request's check).
    pub async fn read_back(&self, caller: Option<Cancel>) -> Result<(), OwnerError> {
        let started = {
            let core = self.core();
            if core.state != State::Ready {
                return Err(OwnerError::state(format!(
                    "only a started sandbox is read back; it is {}",
                    core.state.kind()
                )));
            }
            core.ready.as_ref().map(|ready| ready.effective.clone())
        };
        let Some(started) = started else {
            return Err(OwnerError::state("the sandbox has no startup facts"));
        };
        let driver = Arc::clone(&self.inner.driver);
        let read = enter(async move { driver.read_back().await });
        let cancels: Vec<Cancel> = caller.into_iter().collect();
        let now = match observe(
            read,
            Some(self.startup_limit()),
            &cancels,
            "reading the sandbox back",
        )
        .await
        {
            Observed::Settled(settled) => settled?,
            Observed::Interrupted(why) => return Err(why),
        };
        let Some(now) = now else {
            return Ok(());
        };
        if now != started {
            return Err(OwnerError::Unsupported(
                "the sandbox no longer applies the effective policy it started with".into(),
            ));
        }
        check_effective(&self.inner.request, &now)
    }
}
