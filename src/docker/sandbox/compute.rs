//! The process container: created under the compute checkpoint with the sandbox's placement,
//! read back against the effective policy, then attached and started under the lock a stop
//! takes first. What it runs (the supervisor, or a reattachable daemon directly) is the caller's.

use std::sync::Arc;

use super::read_back::ComputeReading;
use super::{gateway, DockerSandbox};
use crate::docker::attach::{attach_error, attach_streams, Attached};
use crate::docker::engine::engine_error;
use crate::docker::hardening::applied;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::recovery::record::{Identity, Role};

/// What the bounding set of a process container keeps, for a sandbox user other than root: the
/// two capabilities the supervisor, started as root, needs to take an identity apart from its
/// commands', which it drops at once (the helper's `identity.rs`). The container's entry, the
/// supervisor or the reserved process (`--exec-as`, which becomes the user before it runs the
/// process), starts as root with them, so a supervisor started later by exec as root gets them
/// too. No process of the sandbox's user ever holds them: each starts without any, and
/// `no-new-privileges` stops every exec from granting one.
pub(super) fn supervisor_capabilities(sandbox_user: &str) -> Vec<String> {
    if separate_supervisor(sandbox_user) {
        vec!["SETUID".to_owned(), "SETGID".to_owned()]
    } else {
        Vec::new()
    }
}

/// The user a process container whose entry takes another identity starts as (with
/// `supervisor_capabilities`).
pub(super) const ENTRY_START_USER: &str = "0:0";

/// Whether the supervisor takes an identity of its own: for any sandbox user but root.
fn separate_supervisor(sandbox_user: &str) -> bool {
    crate::docker::seed::numeric_user(sandbox_user).is_ok_and(|(uid, _)| uid != 0)
}

/// What the process container runs.
pub(super) struct Launch {
    /// The image: the sandbox's own, or it with the guest helper added.
    pub image: String,
    /// The entry's user: the sandbox's, or root for an entry that takes another identity.
    pub user: String,
    /// Capabilities the bounding set keeps: none, or `supervisor_capabilities`.
    pub cap_add: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=value`, the fixed environment first.
    pub env: Vec<String>,
    pub cwd: String,
    /// Whether stdin closes with the first attachment (a reattachable daemon's stays open).
    pub stdin_once: bool,
    /// The entry is its own init (the supervisor reaps every orphan): no engine init runs as
    /// PID 1, whose stdout, the attached connection, the guest could otherwise write to.
    pub entry_is_init: bool,
}

impl DockerSandbox {
    /// Creates the process container for `launch` and reads it back; returns its ID. Nothing
    /// runs yet.
    pub(super) async fn create_compute(
        self: &Arc<Self>,
        launch: Launch,
        cancel: &Cancel,
    ) -> Result<String, OwnerError> {
        let (journal, expected) = {
            let state = self.state.lock().await;
            (state.journal.clone(), state.effective.clone())
        };
        let (Some(journal), Some(expected)) = (journal, expected) else {
            return Err(OwnerError::state("the process needs a started sandbox"));
        };
        cancel.check()?;
        let record = self
            .announce(&journal, cancel, Role::Compute, Identity::Creating)
            .await?;
        let name = crate::docker::objects::name_of(&record, Role::Compute)
            .unwrap_or_default()
            .to_owned();
        let volume = crate::docker::objects::name_of(&record, Role::Storage)
            .unwrap_or_default()
            .to_owned();
        let network = match self.request.policy.network.kind {
            NetworkKind::Outbound | NetworkKind::Allowlist => {
                crate::docker::objects::name_of(&record, Role::Network).map(str::to_owned)
            }
            NetworkKind::Isolated => None,
        };
        let mut body = self.container_body(&record, Role::Compute, &volume, network.as_deref());
        if self.request.policy.network.kind == NetworkKind::Allowlist {
            let Some(address) = self.state.lock().await.gateway.clone() else {
                return Err(OwnerError::state(
                    "the sandbox's egress gateway is not serving",
                ));
            };
            if let Some(host) = body.host_config.as_mut() {
                gateway::resolved_by(host, address);
            }
        }
        if let Some(host) = body.host_config.as_mut() {
            if launch.entry_is_init {
                host.init = Some(false);
            }
            host.cap_add = (!launch.cap_add.is_empty()).then(|| launch.cap_add.clone());
        }
        body.user = Some(launch.user.clone());
        let asked = body.host_config.clone().unwrap_or_default();
        let image = launch.image.clone();
        body.image = Some(launch.image);
        body.env = Some(launch.env);
        body.entrypoint = Some(launch.entrypoint);
        body.cmd = Some(launch.cmd);
        body.working_dir = Some(launch.cwd);
        body.attach_stdin = Some(true);
        body.attach_stdout = Some(true);
        body.attach_stderr = Some(true);
        body.open_stdin = Some(true);
        body.stdin_once = Some(launch.stdin_once);
        // The last moment a stop can keep the container from existing at all; past it, the
        // container is recorded before anything else happens, so the stop finds and kills it.
        cancel.check()?;
        self.guest_started
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let id = self.create_container(&name, body).await?;
        self.state.lock().await.compute = Some(id.clone());
        self.identify_container(&journal, cancel, Role::Compute, &id)
            .await?;

        let docker = &self.settings.docker;
        let inspect = docker
            .inspect_container(&id, None)
            .await
            .map_err(|e| engine_error("inspecting the process container", e))?;
        let host = inspect.host_config.clone().unwrap_or_default();
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        let effective = applied(
            &host,
            user.as_deref(),
            &launch.user,
            &asked,
            &self.request.policy.network,
        )?;
        if effective != expected {
            return Err(OwnerError::Unsupported(
                "the process container was not given the sandbox's effective policy (read back on it: its limits, placement and hardening)".into(),
            ));
        }
        self.state.lock().await.compute_reading = Some(ComputeReading {
            id: id.clone(),
            asked,
            user: launch.user,
            image,
        });
        cancel.check()?;
        Ok(id)
    }

    /// Attaches to the created process container `id`, then starts it, unless a stop came first.
    pub(super) async fn attach_and_start(
        &self,
        id: &str,
        cancel: &Cancel,
    ) -> Result<Attached, OwnerError> {
        let attached = attach_streams(&self.settings.dialer, id)
            .await
            .map_err(|e| attach_error("the process", &e))?;
        // Decided under the lock a stop takes first: either this start is visible to the stop
        // (and killed), or the stop is visible here (and nothing starts).
        let state = self.state.lock().await;
        if state.stopped_by_owner || cancel.is_cancelled() {
            return Err(OwnerError::cancelled(
                "the sandbox stopped before its process started",
            ));
        }
        self.settings
            .docker
            .start_container(id, None)
            .await
            .map_err(|e| engine_error("starting the process", e))?;
        Ok(attached)
    }
}
