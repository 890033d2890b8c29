//! One Docker sandbox: startup under checkpoints, the process container, stop and destroy.

use std::collections::HashMap;
use std::sync::Arc;

use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, NetworkCreateRequest, VolumeCreateRequest};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder,
    DownloadFromContainerOptionsBuilder, KillContainerOptionsBuilder,
    UploadToContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use bollard::{body_try_stream, Docker};
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use tokio::sync::Mutex;

use super::engine::{engine_error, is_not_found, with_causes};
use super::hardening::{applied, check_exact, host_config, Placement};
use super::layout::{fixed_environment, labels, WORKSPACE};
use super::objects::{
    container_fingerprint, network_fingerprint, provable_container, remove_all, volume_fingerprint,
    with_identity,
};
use super::seed::ensure_seed_image;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    ArchiveDownload, ArchiveUpload, DriverReservation, OutputStream, ProcessChannels, ProcessExit,
    ReadyFacts, StartContext, TransferSettings,
};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::{Authority, Identity, Phase, Role, SandboxRecoveryRecord};

/// Archive transfers wait on the engine as long as the bytes keep flowing; the caller's
/// signal and deadline bound how long anyone observes them.
const UPLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// Chunks queued between the import producer and the engine upload.
const UPLOAD_QUEUE: usize = 4;

/// How soon, and at most how rarely, a lost wait for the leader's exit is asked again.
const EXIT_WAIT_FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(200);
const EXIT_WAIT_LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// What a reservation needs from its backend, fixed at reservation time.
#[derive(Clone)]
pub struct Settings {
    pub docker: Docker,
    /// Caller-owned directory for transfer metadata spill files.
    pub spill_directory: std::path::PathBuf,
    pub image_id: String,
    pub user: String,
    pub runtime: Option<String>,
    pub configuration_digest: String,
}

pub struct DockerReservation {
    settings: Settings,
    request: SandboxRequest,
    state: Mutex<Progress>,
}

/// What startup has established; read by stop, destroy and the process port.
struct Progress {
    record: SandboxRecoveryRecord,
    journal: Option<Arc<Journal>>,
    effective: Option<SandboxEffectivePolicy>,
    compute: Option<String>,
    /// Set when a stop removed compute: the leader's exit is then unknowable.
    stopped_by_owner: bool,
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
            }),
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
        next: SandboxRecoveryRecord,
    ) -> Result<(), OwnerError> {
        journal.checkpoint(next.clone()).await?;
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
        let engine_id = info
            .id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| OwnerError::driver("the engine reported no identity"))?;
        let mut next = self.record().await;
        next.phase = Phase::Starting;
        next.authority = Authority::Verified {
            backend_identity: format!("docker-engine:{engine_id}"),
        };
        self.checkpoint(journal, next).await?;
        self.admit_image().await?;
        context.cancel.check()?;

        let network = match self.request.policy.network {
            NetworkKind::Outbound => Some(self.create_network(context).await?),
            NetworkKind::Isolated => None,
        };
        context.cancel.check()?;
        let volume = self.create_volume(context).await?;
        context.cancel.check()?;
        let holder = self
            .create_holder(context, &volume, network.as_deref())
            .await?;
        context.cancel.check()?;

        let inspect = docker
            .inspect_container(&holder, None)
            .await
            .map_err(|e| engine_error("inspecting the workspace holder", e))?;
        let host = inspect.host_config.clone().unwrap_or_default();
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        let effective = applied(&host, user.as_deref(), &self.settings.user)?;
        check_exact(&self.request.policy, &effective)?;

        let mut ready = self.record().await;
        ready.phase = Phase::Ready;
        self.checkpoint(journal, ready).await?;
        self.state.lock().await.effective = Some(effective.clone());
        Ok(ReadyFacts {
            effective,
            workspace: WORKSPACE.to_owned(),
        })
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
        role: Role,
        identity: Identity,
    ) -> Result<SandboxRecoveryRecord, OwnerError> {
        let next = with_identity(&self.record().await, role, identity);
        self.checkpoint(journal, next.clone()).await?;
        Ok(next)
    }

    async fn create_network(&self, context: &StartContext) -> Result<String, OwnerError> {
        let record = self
            .announce(&context.journal, Role::Network, Identity::Creating)
            .await?;
        let name = super::objects::name_of(&record, Role::Network)
            .unwrap_or_default()
            .to_owned();
        let created = self
            .settings
            .docker
            .create_network(NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                internal: Some(false),
                attachable: Some(false),
                labels: Some(self.labels(&record, Role::Network)),
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
            Role::Network,
            Identity::Identified {
                id: created.id.clone(),
                fingerprint,
            },
        )
        .await?;
        Ok(name)
    }

    async fn create_volume(&self, context: &StartContext) -> Result<String, OwnerError> {
        let record = self
            .announce(&context.journal, Role::Storage, Identity::Creating)
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
            host_config: Some(host_config(&self.request.policy, &placement)),
            ..Default::default()
        }
    }

    /// The never-started container that holds the workspace volume for archive transfers.
    async fn create_holder(
        &self,
        context: &StartContext,
        volume: &str,
        network: Option<&str>,
    ) -> Result<String, OwnerError> {
        let record = self
            .announce(&context.journal, Role::Export, Identity::Creating)
            .await?;
        let name = super::objects::name_of(&record, Role::Export)
            .unwrap_or_default()
            .to_owned();
        let mut body = self.container_body(&record, Role::Export, volume, network);
        // Created from the seed image, whose workspace directory belongs to the sandbox user:
        // the engine copies that ownership onto the fresh volume's root.
        body.image = Some(ensure_seed_image(&self.settings.docker, &self.settings.user).await?);
        // Never started: the entrypoint only has to exist as a string.
        body.entrypoint = Some(vec!["/sandbox-holder-is-never-started".into()]);
        let id = self.create_container(&name, body).await?;
        self.identify_container(&context.journal, Role::Export, &id)
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
            role,
            Identity::Identified {
                id: id.to_owned(),
                fingerprint,
            },
        )
        .await
        .map(drop)
    }

    async fn run_process(
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
            .announce(&journal, Role::Compute, Identity::Creating)
            .await?;
        let name = super::objects::name_of(&record, Role::Compute)
            .unwrap_or_default()
            .to_owned();
        let volume = super::objects::name_of(&record, Role::Storage)
            .unwrap_or_default()
            .to_owned();
        let network = match self.request.policy.network {
            NetworkKind::Outbound => {
                super::objects::name_of(&record, Role::Network).map(str::to_owned)
            }
            NetworkKind::Isolated => None,
        };
        let mut body = self.container_body(&record, Role::Compute, &volume, network.as_deref());
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
        body.stdin_once = Some(true);
        let id = self.create_container(&name, body).await?;
        self.state.lock().await.compute = Some(id.clone());
        self.identify_container(&journal, Role::Compute, &id)
            .await?;

        let docker = &self.settings.docker;
        let inspect = docker
            .inspect_container(&id, None)
            .await
            .map_err(|e| engine_error("inspecting the process container", e))?;
        let host = inspect.host_config.clone().unwrap_or_default();
        let user = inspect.config.as_ref().and_then(|c| c.user.clone());
        let effective = applied(&host, user.as_deref(), &self.settings.user)?;
        if effective != expected {
            return Err(OwnerError::Unsupported(
                "the process container was not given the sandbox's observed policy".into(),
            ));
        }
        cancel.check()?;

        let attach = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let attached = docker
            .attach_container(&id, Some(attach))
            .await
            .map_err(|e| engine_error("attaching to the process", e))?;
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

        let output = attached
            .output
            .filter_map(|item| async move {
                match item {
                    Ok(LogOutput::StdOut { message }) => Some(Ok((OutputStream::Stdout, message))),
                    Ok(LogOutput::StdErr { message }) => Some(Ok((OutputStream::Stderr, message))),
                    Ok(_) => None,
                    Err(e) => Some(Err(OwnerError::operation(
                        OperationCode::StreamFailure,
                        format!("reading the process output failed: {e}"),
                    ))),
                }
            })
            .boxed();
        let exit = Arc::clone(&self).exit_of(id);
        Ok(ProcessChannels {
            input: attached.input,
            output,
            exit,
        })
    }

    /// The leader's fate. A lost engine connection is not a fate: the wait is asked again (with
    /// backoff) until the engine answers or the owner stops the sandbox, so `exit` never reports
    /// a stop that did not happen. Only a stop, or a container that no longer exists, makes the
    /// receipt `Unavailable`.
    fn exit_of(self: Arc<Self>, id: String) -> BoxFuture<'static, ProcessExit> {
        let docker = self.settings.docker.clone();
        async move {
            let mut backoff = EXIT_WAIT_FIRST_RETRY;
            let code = loop {
                let options = WaitContainerOptionsBuilder::default()
                    .condition("not-running")
                    .build();
                match docker.wait_container(&id, Some(options)).next().await {
                    Some(Ok(response)) => break Some(response.status_code),
                    Some(Err(bollard::errors::Error::DockerContainerWaitError {
                        code, ..
                    })) => break Some(code),
                    Some(Err(e)) if is_not_found(&e) => break None,
                    _ => {}
                }
                if self.state.lock().await.stopped_by_owner {
                    break None;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(EXIT_WAIT_LAST_RETRY);
            };
            if self.state.lock().await.stopped_by_owner {
                return ProcessExit::Unavailable;
            }
            match code {
                None => ProcessExit::Unavailable,
                // The init process reports a leader killed by signal N as 128 + N.
                Some(code) if (129..=128 + 64).contains(&code) => {
                    ProcessExit::Signaled(signal_name(code - 128))
                }
                Some(code) => ProcessExit::Exited(code),
            }
        }
        .boxed()
    }

    async fn holder(&self) -> Result<String, OwnerError> {
        let state = self.state.lock().await;
        match super::objects::identity_of(&state.record, Role::Export) {
            Some(Identity::Identified { id, .. }) => Ok(id.clone()),
            _ => Err(OwnerError::state("the workspace holder does not exist yet")),
        }
    }

    async fn run_open_import(&self) -> Result<ArchiveUpload, OwnerError> {
        let holder = self.holder().await?;
        // The engine answers an upload only after extracting all of it: no request timeout.
        let docker = self.settings.docker.clone().with_timeout(UPLOAD_TIMEOUT);
        let (sink, receiver) = tokio::sync::mpsc::channel::<Bytes>(UPLOAD_QUEUE);
        let body = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver
                .recv()
                .await
                .map(|chunk| (Ok::<Bytes, std::io::Error>(chunk), receiver))
        });
        let options = UploadToContainerOptionsBuilder::default()
            .path(WORKSPACE)
            .build();
        let upload = tokio::spawn(async move {
            docker
                .upload_to_container(&holder, Some(options), body_try_stream(body))
                .await
                .map_err(|e| engine_error("importing into the workspace", e))
        });
        let done = async move {
            upload.await.unwrap_or_else(|e| {
                Err(OwnerError::driver(format!(
                    "the import upload ended abnormally: {e}"
                )))
            })
        }
        .boxed();
        Ok(ArchiveUpload { sink, done })
    }

    async fn run_open_export(
        &self,
        relative: String,
    ) -> Result<Option<ArchiveDownload>, OwnerError> {
        let holder = self.holder().await?;
        let path = if relative.is_empty() {
            WORKSPACE.to_owned()
        } else {
            format!("{WORKSPACE}/{relative}")
        };
        let docker = self.settings.docker.clone().with_timeout(UPLOAD_TIMEOUT);
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(&path)
            .build();
        let mut stream = docker
            .download_from_container(&holder, Some(options))
            .boxed();
        let first = match stream.next().await {
            Some(Err(e)) if is_not_found(&e) => return Ok(None),
            Some(Err(e)) => return Err(engine_error(&format!("exporting {path}"), e)),
            Some(Ok(first)) => Some(first),
            None => None,
        };
        let rest = stream.map(|item| {
            item.map_err(|e| {
                format!(
                    "reading the workspace archive from the engine: {}",
                    with_causes(&e)
                )
            })
        });
        Ok(Some(
            futures::stream::iter(first.map(Ok)).chain(rest).boxed(),
        ))
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
        match docker.wait_container(&id, Some(wait)).next().await {
            Some(Ok(_))
            | Some(Err(bollard::errors::Error::DockerContainerWaitError { .. }))
            | None => Ok(()),
            Some(Err(e)) if is_not_found(&e) => Ok(()),
            Some(Err(e)) => Err(engine_error("waiting for the process container to stop", e)),
        }
    }

    async fn run_destroy(&self) -> Result<(), OwnerError> {
        let record = self.record().await;
        remove_all(&self.settings.docker, &record).await
    }
}

/// The conventional name of signal `n` on Linux.
pub fn signal_name(n: i64) -> String {
    let name = match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        other => return format!("SIGRT{}", other - 34),
    };
    name.to_owned()
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
}
