//! One Docker sandbox: startup under checkpoints, stop and destroy. The process container is in
//! `process.rs`, archive transfers through the workspace holder in `archive.rs`, which runs the
//! holder's workspace helper (`helper_run.rs`) for exports (`export_helper.rs`) and imports
//! (`import_helper.rs`).

mod abort_on_drop;
mod archive;
mod deferred_bodies;
mod export_helper;
mod gateway;
mod helper_run;
mod import_bodies;
mod import_helper;
mod pending;
mod process;

pub use pending::PendingReservation;

use std::collections::HashMap;
use std::sync::Arc;

use bollard::models::{
    ContainerCreateBody, NetworkCreateRequest, NetworkInspect, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use bollard::Docker;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use tokio::sync::Mutex;

use super::engine::{engine_error, is_not_found};
use super::freezer::{set_frozen, Freeze};
use super::hardening::{applied, check_exact, host_config, Placement};
use super::layout::{fixed_environment, labels, WORKSPACE};
use super::objects::{
    container_fingerprint, network_fingerprint, provable_container, remove_all, volume_fingerprint,
    with_identity,
};
use super::seed::{ensure_seed_image, helper_for, GuestHelper, HELPER_PATH};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    ArchiveDownload, ArchiveUpload, DriverReservation, ProcessChannels, ReadyFacts, StartContext,
    TransferSettings,
};
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::{Authority, Identity, Phase, Role, SandboxRecoveryRecord};

/// The bridge driver's option that leaves the host without an address on the network.
const INHIBIT_HOST_ADDRESS: &str = "com.docker.network.bridge.inhibit_ipv4";

/// What a reservation needs from its backend, fixed at reservation time.
#[derive(Clone)]
pub struct Settings {
    pub docker: Docker,
    /// Attach connections to the same engine.
    pub dialer: crate::docker::dialer::Dialer,
    /// Caller-owned directory for transfer metadata spill files.
    pub spill_directory: std::path::PathBuf,
    pub image_id: String,
    pub user: String,
    pub runtime: Option<String>,
    pub configuration_digest: String,
    /// The reaper every record of an `in_process` sandbox goes to (before its effect), and
    /// which forgets it once destroyed.
    pub reaper: Option<crate::docker::reaper::link::ReaperEntry>,
    /// Where an allowlist sandbox's gateway reaches upstream.
    pub egress: crate::docker::options::EgressUpstream,
}

pub struct DockerReservation {
    settings: Settings,
    request: SandboxRequest,
    state: Mutex<Progress>,
    /// The runtime the engine reports for the holder once it was read back and found exactly
    /// as asked (the process container is held to the same).
    runtime: std::sync::OnceLock<String>,
    /// One run of the workspace helper at a time (`helper_run.rs`).
    helper_permit: Arc<tokio::sync::Semaphore>,
    /// The last run by exec beside an egress gateway (`helper_run.rs`).
    exec_history: helper_run::SharedExecHistory,
}

/// What startup has established; read by stop, destroy and the process port.
struct Progress {
    record: SandboxRecoveryRecord,
    journal: Option<Arc<Journal>>,
    effective: Option<SandboxEffectivePolicy>,
    compute: Option<String>,
    /// Set when a stop removed compute: the leader's exit is then unknowable.
    stopped_by_owner: bool,
    /// An allowlist sandbox's gateway address on its internal network: the guest's resolver.
    gateway: Option<String>,
}

impl DockerReservation {
    pub fn new(
        settings: Settings,
        request: SandboxRequest,
        record: SandboxRecoveryRecord,
    ) -> Arc<Self> {
        Arc::new(Self {
            settings,
            request,
            state: Mutex::new(Progress {
                record,
                journal: None,
                effective: None,
                compute: None,
                stopped_by_owner: false,
                gateway: None,
            }),
            runtime: std::sync::OnceLock::new(),
            helper_permit: helper_run::helper_permits(),
            exec_history: Default::default(),
        })
    }

    fn labels(&self, record: &SandboxRecoveryRecord, role: Role) -> HashMap<String, String> {
        labels(
            &record.namespace,
            &record.sandbox_id,
            &record.operation_id,
            &self.settings.configuration_digest,
            role.as_str(),
        )
    }

    /// Persists `next` through the journal (before the effect it announces) and keeps it.
    async fn checkpoint(
        &self,
        journal: &Journal,
        cancel: &Cancel,
        next: SandboxRecoveryRecord,
    ) -> Result<(), OwnerError> {
        journal.checkpoint(next.clone()).await?;
        if let Some(reaper) = &self.settings.reaper {
            // Cancellable: a stop never waits on a reaper that is slow to take the record.
            tokio::select! {
                taken = reaper.register(&next) => taken?,
                reason = cancel.cancelled() => return Err(reason),
            }
        }
        self.state.lock().await.record = next;
        Ok(())
    }

    async fn record(&self) -> SandboxRecoveryRecord {
        self.state.lock().await.record.clone()
    }

    async fn run_start(&self, context: &StartContext) -> Result<ReadyFacts, OwnerError> {
        let docker = &self.settings.docker;
        let journal = &context.journal;
        self.state.lock().await.journal = Some(Arc::clone(journal));

        // Read-only preflight: which engine this is, and whether the image may run at all.
        let info = docker
            .info()
            .await
            .map_err(|e| engine_error("reading the engine identity", e))?;
        let helper = helper_for(info.architecture.as_deref())?;
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

        let inspect = docker
            .inspect_container(&holder, None)
            .await
            .map_err(|e| engine_error("inspecting the workspace holder", e))?;
        let host = inspect.host_config.clone().unwrap_or_default();
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        let expected = self
            .container_body(
                &self.record().await,
                Role::Export,
                &volume,
                network.as_deref(),
            )
            .host_config
            .unwrap_or_default();
        let effective = applied(
            &host,
            user.as_deref(),
            &self.settings.user,
            &expected,
            &self.request.policy.network,
        )?;
        check_exact(&self.request.policy, &effective)?;
        if let Some(runtime) = host.runtime.clone() {
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
                "image {} carries environment that the sandbox does not admit ({}); only {} are allowed",
                self.settings.image_id,
                names.join(", "),
                allowed.join(" ")
            )));
        }
        Ok(())
    }

    async fn announce(
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
        let name = super::objects::name_of(&record, Role::Network)
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
        let name = super::objects::name_of(&record, Role::Storage)
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
    fn container_body(
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
            seed_volume: role == Role::Export,
        };
        ContainerCreateBody {
            image: Some(self.settings.image_id.clone()),
            user: Some(self.settings.user.clone()),
            env: Some(env),
            working_dir: Some(WORKSPACE.to_owned()),
            labels: Some(self.labels(record, role)),
            network_disabled: Some(network.is_none()),
            tty: Some(false),
            host_config: Some(gateway::with_network_sysctls(
                host_config(&self.request.policy, &placement),
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
                Role::Export,
                Identity::Creating,
            )
            .await?;
        let name = super::objects::name_of(&record, Role::Export)
            .unwrap_or_default()
            .to_owned();
        let mut body = self.container_body(&record, Role::Export, volume, network);
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
        self.identify_container(&context.journal, &context.cancel, Role::Export, &id)
            .await?;
        Ok(id)
    }

    async fn create_container(
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

    async fn identify_container(
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

    /// Kills compute (the whole process tree goes with its container); storage stays.
    async fn run_stop(&self) -> Result<(), OwnerError> {
        let record = {
            let mut state = self.state.lock().await;
            state.stopped_by_owner = true;
            state.record.clone()
        };
        let docker = &self.settings.docker;
        let Some(id) = provable_container(docker, &record, Role::Compute).await? else {
            return Ok(());
        };
        let kill = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        match docker.kill_container(&id, Some(kill)).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            // 409: not running (never started, or already exited).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => {}
            Err(e) => return Err(engine_error("stopping the process container", e)),
        }
        let wait = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        // A killed container stops at once; an engine that never says so fails this stop
        // (retryable) instead of holding it for ever.
        let limit = std::time::Duration::from_millis(self.request.policy.deadlines.cleanup_ms);
        let mut waiting = docker.wait_container(&id, Some(wait));
        match tokio::time::timeout(limit, waiting.next()).await {
            Err(_) => Err(OwnerError::operation(
                crate::lifecycle::error::OperationCode::DeadlineExceeded,
                format!(
                    "the engine did not report the killed process container stopped within {} ms",
                    limit.as_millis()
                ),
            )),
            Ok(Some(Ok(_)))
            | Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { .. })))
            | Ok(None) => Ok(()),
            Ok(Some(Err(e))) if is_not_found(&e) => Ok(()),
            Ok(Some(Err(e))) => Err(engine_error("waiting for the process container to stop", e)),
        }
    }

    async fn run_destroy(&self) -> Result<(), OwnerError> {
        let record = self.record().await;
        remove_all(&self.settings.docker, &record).await?;
        if let Some(reaper) = &self.settings.reaper {
            reaper.forget(&record.sandbox_id);
        }
        Ok(())
    }
}

impl DriverReservation for DockerReservation {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        async move { self.run_start(&context).await }.boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.run_stop().await }.boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.run_destroy().await }.boxed()
    }

    fn open_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.run_open_import().await }.boxed()
    }

    fn open_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.run_open_export(relative).await }.boxed()
    }

    fn open_export_files(
        self: Arc<Self>,
        paths: Vec<String>,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.run_open_export_files(paths).await }.boxed()
    }

    fn applied_runtime(&self) -> Option<String> {
        self.runtime.get().cloned()
    }

    fn egress(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<crate::lifecycle::egress_report::EgressReport>, OwnerError>>
    {
        async move {
            if self.request.policy.network.kind != NetworkKind::Allowlist {
                return Ok(None);
            }
            let holder = self.holder().await?;
            self.read_report(&holder).await
        }
        .boxed()
    }

    fn transfer_settings(&self) -> TransferSettings {
        let (uid, gid) = super::seed::numeric_user(&self.settings.user).unwrap_or((65532, 65532));
        TransferSettings {
            uid,
            gid,
            spill_directory: Some(self.settings.spill_directory.clone()),
        }
    }

    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        self.run_process(spec, cancel).boxed()
    }

    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let record = self.record().await;
            set_frozen(&self.settings.docker, &record, Freeze::Pause).await
        }
        .boxed()
    }

    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let record = self.record().await;
            set_frozen(&self.settings.docker, &record, Freeze::Resume).await
        }
        .boxed()
    }
}
