//! The sandbox's one process: its own container, attached before it starts, and its leader's fate.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};

use super::{gateway, DockerSandbox};
use crate::docker::attach::{attach_error, attach_streams, fate_of, wait_exit_code};
use crate::docker::engine::engine_error;
use crate::docker::hardening::applied;
use crate::docker::layout::fixed_environment;
use crate::docker::output_end::ended_with_the_process;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{output_of_chunks, ProcessChannels, ProcessExit};
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::{Identity, Role};

impl DockerSandbox {
    pub(super) async fn run_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> Result<ProcessChannels, OwnerError> {
        let (journal, expected) = {
            let state = self.state.lock().await;
            (state.journal.clone(), state.effective.clone())
        };
        let (Some(journal), Some(expected)) = (journal, expected) else {
            return Err(OwnerError::state("the process needs a started sandbox"));
        };
        cancel.check()?;
        let record = self
            .announce(&journal, &cancel, Role::Compute, Identity::Creating)
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
        let asked = body.host_config.clone().unwrap_or_default();
        let mut env: Vec<String> = fixed_environment()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        env.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
        body.env = Some(env);
        body.entrypoint = Some(vec![spec.executable.clone()]);
        body.cmd = Some(spec.args.clone());
        body.working_dir = Some(spec.cwd.clone());
        body.attach_stdin = Some(true);
        body.attach_stdout = Some(true);
        body.attach_stderr = Some(true);
        body.open_stdin = Some(true);
        // A reattachable process keeps stdin open when an attachment closes, so a controller
        // that comes after this one can attach again; any other gets EOF with its one stdin.
        body.stdin_once = Some(!spec.reattachable);
        // The last moment a stop can keep the container from existing at all; past it, the
        // container is recorded before anything else happens, so the stop finds and kills it.
        cancel.check()?;
        let id = self.create_container(&name, body).await?;
        self.state.lock().await.compute = Some(id.clone());
        self.identify_container(&journal, &cancel, Role::Compute, &id)
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
            &self.settings.user,
            &asked,
            &self.request.policy.network,
        )?;
        if effective != expected {
            return Err(OwnerError::Unsupported(
                "the process container was not given the sandbox's effective policy (read back on it: its limits, placement and hardening)".into(),
            ));
        }
        cancel.check()?;

        // A recipe that cannot run fails here, naming `executable`, not as init's exit 127. A
        // stop that removed the container meanwhile is the stop's failure, not the recipe's.
        let checked = super::executable::check_executable(docker, &id, &spec.executable).await;
        cancel.check()?;
        checked?;

        let attached = attach_streams(&self.settings.dialer, &id)
            .await
            .map_err(|e| attach_error("the process", &e))?;
        {
            // Decided under the lock a stop takes first: either this start is visible to the
            // stop (and killed), or the stop is visible here (and nothing starts).
            let state = self.state.lock().await;
            if state.stopped_by_owner || cancel.is_cancelled() {
                return Err(OwnerError::cancelled(
                    "the sandbox stopped before its process started",
                ));
            }
            docker
                .start_container(&id, None)
                .await
                .map_err(|e| engine_error("starting the process", e))?;
        }

        let output = ended_with_the_process(attached.output, docker.clone(), id.clone());
        let exit = Arc::clone(&self).exit_of(id);
        Ok(ProcessChannels {
            input: attached.input,
            output: output_of_chunks(output),
            exit,
        })
    }

    /// The leader's fate. A lost engine connection is not a fate: the wait is asked again (with
    /// backoff) until the engine answers or the owner stops the sandbox, so `exit` never reports
    /// a stop that did not happen. Only a stop, or a container that no longer exists, makes the
    /// receipt `Unavailable`; a stop that comes once the engine reported the exit (while its
    /// fate is read, see `fate_of`) leaves the leader's own fate.
    fn exit_of(self: Arc<Self>, id: String) -> BoxFuture<'static, ProcessExit> {
        let docker = self.settings.docker.clone();
        async move {
            let code = wait_exit_code(&docker, &id, || {
                let this = Arc::clone(&self);
                async move { this.state.lock().await.stopped_by_owner }
            })
            .await;
            if self.state.lock().await.stopped_by_owner {
                return ProcessExit::Unavailable;
            }
            match code {
                Some(code) => fate_of(&docker, &id, code).await,
                None => ProcessExit::Unavailable,
            }
        }
        .boxed()
    }
}
