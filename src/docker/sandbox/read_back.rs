//! A started sandbox read back from the engine once more (a pool's claim): its holder and its
//! process container must still apply exactly what startup read (limits, placement, hardening,
//! network kind), from the same images under the same runtime, and a supervisor kept must still
//! be connected. A member that no longer matches is never handed out.

use std::sync::Arc;

use bollard::models::HostConfig;

use super::DockerSandbox;
use crate::docker::engine::engine_error;
use crate::docker::hardening::applied;
use crate::docker::objects::name_of;
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::recovery::record::Role;

/// What the process container was created with and read back as, kept to read it again.
#[derive(Clone)]
pub(super) struct ComputeReading {
    pub id: String,
    /// The host configuration asked, and the entry's user.
    pub asked: HostConfig,
    pub user: String,
    /// The image it was asked to run: the ID of the image made from the backend's image (the
    /// guest helper added), resolved when the backend was created.
    pub image: String,
}

/// How long a read-back waits for a supervisor's start in flight.
const GATE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

fn mismatch(what: &str) -> OwnerError {
    OwnerError::Unsupported(format!(
        "the sandbox no longer applies what it started with: {what}"
    ))
}

impl DockerSandbox {
    /// The effective policy read now, or why the sandbox no longer matches its startup.
    pub(super) async fn run_read_back(
        self: &Arc<Self>,
    ) -> Result<SandboxEffectivePolicy, OwnerError> {
        let (record, expected, compute) = {
            let state = self.state.lock().await;
            (
                state.record.clone(),
                state.effective.clone(),
                state.compute_reading.clone(),
            )
        };
        let Some(expected) = expected else {
            return Err(OwnerError::state("the sandbox has not started"));
        };
        let (Some(holder), Some(volume)) = (
            name_of(&record, Role::Holder),
            name_of(&record, Role::Storage),
        ) else {
            return Err(OwnerError::state("the sandbox's record names no holder"));
        };
        let network = match self.request.policy.network.kind {
            NetworkKind::Outbound | NetworkKind::Allowlist => name_of(&record, Role::Network),
            NetworkKind::Isolated => None,
        };
        let holder_read = self.read_holder(holder, volume, network);
        let compute_read = async {
            match &compute {
                Some(reading) => self.read_compute(reading).await.map(Some),
                None => Ok(None),
            }
        };
        let ((held, runtime), computed) = futures::try_join!(holder_read, compute_read)?;
        if held != expected {
            return Err(mismatch("the workspace holder's limits or network"));
        }
        if runtime != self.runtime.get().cloned() {
            return Err(mismatch("the workspace holder's runtime"));
        }
        if computed.is_some_and(|computed| computed != expected) {
            return Err(mismatch("the process container's limits or network"));
        }
        // The gate is held only while a supervisor starts: a ready member's is free at once.
        let gate = tokio::time::timeout(GATE_WAIT, self.compute_gate.lock())
            .await
            .map_err(|_| {
                OwnerError::operation(
                    OperationCode::DeadlineExceeded,
                    format!(
                        "the sandbox's supervisor was still starting after {} ms: it could not be read back",
                        GATE_WAIT.as_millis()
                    ),
                )
            })?;
        let supervisor_gone = gate.as_ref().is_some_and(|live| live.link.gone().is_some());
        drop(gate);
        if supervisor_gone {
            return Err(mismatch("its process supervisor is gone"));
        }
        Ok(held)
    }

    /// The process container read again: running, from the image it was created from, under
    /// the runtime startup read, applying exactly what it was created with.
    async fn read_compute(
        &self,
        reading: &ComputeReading,
    ) -> Result<SandboxEffectivePolicy, OwnerError> {
        let inspect = self
            .settings
            .docker
            .inspect_container(&reading.id, None)
            .await
            .map_err(|e| engine_error("inspecting the process container", e))?;
        let running = inspect.state.as_ref().and_then(|state| state.running);
        if running != Some(true) {
            return Err(mismatch("the process container is not running"));
        }
        if inspect.image.as_deref() != Some(reading.image.as_str()) {
            return Err(mismatch("the process container's image"));
        }
        let host = inspect.host_config.clone().unwrap_or_default();
        if host.runtime != self.runtime.get().cloned() {
            return Err(mismatch("the process container's runtime"));
        }
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        applied(
            &host,
            user.as_deref(),
            &reading.user,
            &reading.asked,
            &self.request.policy.network,
        )
    }
}
