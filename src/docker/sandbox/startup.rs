//! A Docker sandbox's startup under checkpoints: the runtime and image admitted, then its
//! network, workspace volume and holder announced, created and identified one by one, the
//! holder's hardening read back, and an allowlist sandbox's gateway started.

use std::collections::HashMap;
use std::sync::Arc;

use bollard::models::{
    ContainerCreateBody, NetworkCreateRequest, NetworkInspect, VolumeCreateRequest,
};
use bollard::query_parameters::CreateContainerOptionsBuilder;

use crate::docker::engine::engine_error;
use crate::docker::hardening::{applied, check_exact, host_config, Placement};
use crate::docker::layout::{fixed_environment, WORKSPACE};
use crate::docker::objects::{
    container_fingerprint, network_fingerprint, volume_fingerprint, with_identity,
};
use crate::docker::seed::{ensure_seed_image, helper_for, GuestHelper, HELPER_PATH};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{ReadyFacts, StartContext};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::recovery::record::{Authority, Identity, Phase, Role, SandboxRecoveryRecord};

use super::{gateway, DockerSandbox, INHIBIT_HOST_ADDRESS};

impl DockerSandbox {
    pub(super) async fn run_start(&self, context: &StartContext) -> Result<ReadyFacts, OwnerError> {
        let docker = &self.settings.docker;
        let journal = &context.journal;
        self.state.lock().await.journal = Some(Arc::clone(journal));

        // Read-only preflight: which engine this is, and whether the image may run at all.
        let info = docker.info().await.map_err(|e| {
            engine_error(
                &format!(
                    "reading the engine identity (the engine: {})",
                    self.settings.engine_label
                ),
                e,
            )
        })?;
        let helper = helper_for(info.architecture.as_deref())?;
        self.state.lock().await.helper = Some(helper);
        let engine_id = info
            .id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| OwnerError::driver("the engine reported no identity"))?;
        let mut next = self.record().await;
        next.phase = Phase::Starting;
        next.authority = Authority::Verified {
            backend_identity: format!("docker-engine:{engine_id}"),
        };
        self.checkpoint(journal, &context.cancel, next).await?;
        self.admit_runtime().await?;
        self.admit_image().await?;
        context.cancel.check()?;

        let kind = self.request.policy.network.kind;
        let network = match kind {
            NetworkKind::Outbound | NetworkKind::Allowlist => {
                Some(self.create_network(context).await?)
            }
            NetworkKind::Isolated => None,
        };
        // An allowlist's gateway: the internal network's subnet and the host's addresses it
        // must refuse (on the upstream network, and every one of this host's when the engine
        // runs here), read before the holder that serves them is created.
        let gateway_command = match (&network, kind) {
            (Some((_, inspect)), NetworkKind::Allowlist) => {
                let internal = gateway::internal_network(inspect)?;
                let denied = gateway::host_addresses(
                    docker,
                    &self.settings.egress.network,
                    &self.settings.dialer,
                )
                .await?;
                Some(gateway::gateway_command(self, &internal, &denied))
            }
            _ => None,
        };
        let network = network.map(|(name, _)| name);
        context.cancel.check()?;
        let volume = self.create_volume(context).await?;
        context.cancel.check()?;
        let holder = self
            .create_holder(
                context,
                &volume,
                network.as_deref(),
                helper,
                gateway_command,
            )
            .await?;
        context.cancel.check()?;

        let (effective, runtime) = self
            .read_holder(&holder, &volume, network.as_deref())
            .await?;
        check_exact(&self.request.policy, &effective)?;
        if let Some(runtime) = runtime {
            let _ = self.runtime.set(runtime);
        }
        // Started only once the engine was read back applying exactly the hardening asked.
        if let (Some(internal), NetworkKind::Allowlist) = (network.as_deref(), kind) {
            let address = self
                .start_gateway(&holder, internal, &context.cancel)
                .await?;
            self.state.lock().await.gateway = Some(address);
            context.cancel.check()?;
        }

        let mut ready = self.record().await;
        ready.phase = Phase::Ready;
        self.checkpoint(journal, &context.cancel, ready).await?;
        self.state.lock().await.effective = Some(effective.clone());
        Ok(ReadyFacts {
            effective,
            workspace: WORKSPACE.to_owned(),
        })
    }

    /// Reads the holder `holder` back: the policy the engine applies to it (for an allowlist,
    /// the guest's share of the gateway's budget) and its runtime. Anything but exactly the
    /// hardening asked is an error. At startup, and again at a pool's claim.
    pub(super) async fn read_holder(
        &self,
        holder: &str,
        volume: &str,
        network: Option<&str>,
    ) -> Result<(SandboxEffectivePolicy, Option<String>), OwnerError> {
        let inspect = self
            .settings
            .docker
            .inspect_container(holder, None)
            .await
            .map_err(|e| engine_error("inspecting the workspace holder", e))?;
        let host = inspect.host_config.clone().unwrap_or_default();
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        let expected = self
            .container_body(&self.record().await, Role::Holder, volume, network)
            .host_config
            .unwrap_or_default();
        let effective = applied(
            &host,
            user.as_deref(),
            &self.settings.user,
            &expected,
            &self.request.policy.network,
        )?;
        // An allowlist's holder is its gateway, with a budget of its own.
        let effective = match self.request.policy.network.kind {
            NetworkKind::Allowlist => {
                gateway::guest_policy_from_gateway(effective, &self.request.policy.resources)?
            }
            _ => effective,
        };
        Ok((effective, host.runtime))
    }

    /// A named runtime must be one the engine has: otherwise startup fails before any object
    /// exists (the engine would refuse only at container creation, after the volume).
    async fn admit_runtime(&self) -> Result<(), OwnerError> {
        let Some(runtime) = self.settings.runtime.as_deref() else {
            return Ok(());
        };
        let info = self
            .settings
            .docker
            .info()
            .await
            .map_err(|e| engine_error("reading the engine's runtimes", e))?;
        let known = info
            .runtimes
            .as_ref()
            .is_some_and(|runtimes| runtimes.contains_key(runtime));
        if !known {
            return Err(OwnerError::Unsupported(format!(
                "the engine has no runtime {runtime}; register it with the engine (for gVisor: runsc with --network=none)"
            )));
        }
        Ok(())
    }

    /// The image's environment may hold only HOME, TMPDIR and PATH, with exactly our values.
    async fn admit_image(&self) -> Result<(), OwnerError> {
        let image = self
            .settings
            .docker
            .inspect_image(&self.settings.image_id)
            .await
            .map_err(|e| {
                engine_error(&format!("inspecting image {}", self.settings.image_id), e)
            })?;
        if image.id.as_deref() != Some(self.settings.image_id.as_str()) {
            return Err(OwnerError::state(
                "the image resolved at backend creation is no longer the same image",
            ));
        }
        let env = image.config.and_then(|c| c.env).unwrap_or_default();
        let allowed: Vec<String> = fixed_environment()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let extra: Vec<&String> = env
            .iter()
            .filter(|entry| !allowed.contains(entry))
            .collect();
        if !extra.is_empty() {
            let names: Vec<&str> = extra
                .iter()
                .map(|e| e.split('=').next().unwrap_or_default())
                .collect();
            return Err(OwnerError::Unsupported(format!(
                "image {id} carries environment that the sandbox does not admit ({}); only {} are allowed. Make an admissible copy with prepareDockerSandboxImage({{ from: '{id}', tag: 'my-sandbox-image:1' }}) from native-sandbox/docker and use its tag: it returns what it dropped (droppedEnv) to pass in the process's env",
                names.join(", "),
                allowed.join(" "),
                id = self.settings.image_id,
            )));
        }
        Ok(())
    }

    pub(super) async fn announce(
        &self,
        journal: &Journal,
        cancel: &Cancel,
        role: Role,
        identity: Identity,
    ) -> Result<SandboxRecoveryRecord, OwnerError> {
        let next = with_identity(&self.record().await, role, identity);
        self.checkpoint(journal, cancel, next.clone()).await?;
        Ok(next)
    }

    /// The sandbox's own network (its name, and the engine's inspection of it): a bridge for
    /// `outbound`, an internal one (no route out; the gateway its guest's only peer) for
    /// `allowlist`.
    async fn create_network(
        &self,
        context: &StartContext,
    ) -> Result<(String, NetworkInspect), OwnerError> {
        let record = self
            .announce(
                &context.journal,
                &context.cancel,
                Role::Network,
                Identity::Creating,
            )
            .await?;
        let name = crate::docker::objects::name_of(&record, Role::Network)
            .unwrap_or_default()
            .to_owned();
        let internal = self.request.policy.network.kind == NetworkKind::Allowlist;
        let created = self
            .settings
            .docker
            .create_network(NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                internal: Some(internal),
                attachable: Some(false),
                labels: Some(self.labels(&record, Role::Network)),
                // An internal network's bridge gets no address on the host: the guest cannot
                // reach the host's services through it, only the gateway.
                options: internal
                    .then(|| HashMap::from([(INHIBIT_HOST_ADDRESS.to_owned(), "true".to_owned())])),
                ..Default::default()
            })
            .await
            .map_err(|e| engine_error("creating the sandbox network", e))?;
        let inspect = self
            .settings
            .docker
            .inspect_network(&created.id, None)
            .await
            .map_err(|e| engine_error("inspecting the sandbox network", e))?;
        let fingerprint = network_fingerprint(&created.id, inspect.created.as_deref());
        self.announce(
            &context.journal,
            &context.cancel,
            Role::Network,
            Identity::Identified {
                id: created.id.clone(),
                fingerprint,
            },
        )
        .await?;
        Ok((name, inspect))
    }

    async fn create_volume(&self, context: &StartContext) -> Result<String, OwnerError> {
        let record = self
            .announce(
                &context.journal,
                &context.cancel,
                Role::Storage,
                Identity::Creating,
            )
            .await?;
        let name = crate::docker::objects::name_of(&record, Role::Storage)
            .unwrap_or_default()
            .to_owned();
        let volume = self
            .settings
            .docker
            .create_volume(VolumeCreateRequest {
                name: Some(name.clone()),
                driver: Some("local".into()),
                labels: Some(self.labels(&record, Role::Storage)),
                ..Default::default()
            })
            .await
            .map_err(|e| engine_error("creating the workspace volume", e))?;
        // Fingerprint what inspection reports, the same view every later proof reads.
        let volume = self
            .settings
            .docker
            .inspect_volume(&volume.name)
            .await
            .map_err(|e| engine_error("inspecting the workspace volume", e))?;
        let fingerprint = volume_fingerprint(&volume.name, &volume.labels);
        self.announce(
            &context.journal,
            &context.cancel,
            Role::Storage,
            Identity::Identified {
                id: volume.name.clone(),
                fingerprint,
            },
        )
        .await?;
        Ok(name)
    }

    /// The body every container of the sandbox shares. Only the holder's (from the seed image)
    /// seeds the fresh volume; every other container mounts it without copying.
    pub(super) fn container_body(
        &self,
        record: &SandboxRecoveryRecord,
        role: Role,
        volume: &str,
        network: Option<&str>,
    ) -> ContainerCreateBody {
        let env = fixed_environment()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let placement = Placement {
            user: &self.settings.user,
            volume,
            network,
            runtime: self.settings.runtime.as_deref(),
            seed_volume: role == Role::Holder,
        };
        ContainerCreateBody {
            image: Some(self.settings.image_id.clone()),
            user: Some(self.settings.user.clone()),
            env: Some(env),
            working_dir: Some(WORKSPACE.to_owned()),
            labels: Some(self.labels(record, role)),
            network_disabled: Some(network.is_none()),
            tty: Some(false),
            host_config: Some(gateway::with_gateway_budget(
                gateway::with_network_sysctls(
                    host_config(&self.request.policy, &placement),
                    self.request.policy.network.kind,
                    role,
                ),
                self.request.policy.network.kind,
                role,
            )),
            ..Default::default()
        }
    }

    /// The container that holds the workspace volume for archive transfers; it runs only the
    /// workspace helper, one transfer at a time.
    async fn create_holder(
        &self,
        context: &StartContext,
        volume: &str,
        network: Option<&str>,
        helper: &GuestHelper,
        gateway_command: Option<Vec<String>>,
    ) -> Result<String, OwnerError> {
        let record = self
            .announce(
                &context.journal,
                &context.cancel,
                Role::Holder,
                Identity::Creating,
            )
            .await?;
        let name = crate::docker::objects::name_of(&record, Role::Holder)
            .unwrap_or_default()
            .to_owned();
        let mut body = self.container_body(&record, Role::Holder, volume, network);
        // Created from the seed image, whose workspace directory belongs to the sandbox user:
        // the engine copies that ownership onto the fresh volume's root.
        body.image =
            Some(ensure_seed_image(&self.settings.docker, &self.settings.user, helper).await?);
        // Started only for transfers: the workspace helper reads its request on stdin, writes
        // an export archive on stdout or extracts the import archive that follows, then exits
        // (see `helper_run.rs`).
        match gateway_command {
            // An allowlist's holder runs the gateway from the start (`gateway.rs`).
            Some(command) => gateway::as_gateway(&mut body, command),
            None => {
                body.entrypoint = Some(vec![HELPER_PATH.into()]);
                body.attach_stdin = Some(true);
                body.attach_stdout = Some(true);
                body.attach_stderr = Some(true);
                body.open_stdin = Some(true);
                body.stdin_once = Some(true);
            }
        }
        let id = self.create_container(&name, body).await?;
        self.identify_container(&context.journal, &context.cancel, Role::Holder, &id)
            .await?;
        Ok(id)
    }

    pub(super) async fn create_container(
        &self,
        name: &str,
        body: ContainerCreateBody,
    ) -> Result<String, OwnerError> {
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        self.settings
            .docker
            .create_container(Some(options), body)
            .await
            .map(|created| created.id)
            .map_err(|e| engine_error(&format!("creating container {name}"), e))
    }

    pub(super) async fn identify_container(
        &self,
        journal: &Journal,
        cancel: &Cancel,
        role: Role,
        id: &str,
    ) -> Result<(), OwnerError> {
        let inspect = self
            .settings
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|e| engine_error("inspecting a new container", e))?;
        let fingerprint = container_fingerprint(&inspect);
        self.announce(
            journal,
            cancel,
            role,
            Identity::Identified {
                id: id.to_owned(),
                fingerprint,
            },
        )
        .await
        .map(drop)
    }
}
