//! The Docker backend: pins the image, reserves sandboxes, and reconciles records by proof.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bollard::Docker;
use futures::future::{BoxFuture, FutureExt};

use super::attach::attach_again;
use super::dialer::Dialer;
use super::engine::{connect, engine_error, engine_label, is_not_found, Connected};
use super::freezer::{set_frozen, Freeze};
use super::image::{ImageSource, Pinned, UNRESOLVED_IMAGE};
use super::layout::{Names, BACKEND_ID, BACKEND_REVISION};
use super::objects::{
    container_fingerprint, labels_match, network_fingerprint, remove_all, remove_container,
    volume_fingerprint,
};
use super::options::DockerOptions;
use super::reaper::link::{shared, ReaperCommand, ReaperEntry};
use super::sandbox::{DockerSandbox, PendingDockerSandbox, Settings};
use crate::digest::{fresh_id, sha256_of};
use crate::input::{Issue, IssueCode, Seg, ToValue};
use crate::lifecycle::driver::{DriverReservation, ProcessChannels, RecoveredDriver};
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::policy::support::SandboxSupport;
use crate::recovery::record::{Authority, Identity, Phase, Resource, Role, SandboxRecoveryRecord};

pub struct DockerBackend {
    options: DockerOptions,
    docker: Docker,
    dialer: Dialer,
    image: ImageSource,
    /// The process's reaper, for this backend's engine (`None` with `reaper: false`).
    reaper: Option<ReaperEntry>,
}

/// The runtime that gives only network mode `none` here (gVisor's `runsc`, registered with
/// `--network=none`): a bridge network under it does not work, so `outbound` and `allowlist`
/// (whose guest sits on an internal bridge network with its gateway) are refused.
pub const ISOLATED_ONLY_RUNTIME: &str = super::gvisor::RUNTIME;

/// What a Docker backend with `runtime` (the engine's default when `None`) can enforce.
pub fn support(runtime: Option<&str>) -> SandboxSupport {
    let network = if runtime == Some(ISOLATED_ONLY_RUNTIME) {
        vec![NetworkKind::Isolated]
    } else {
        vec![
            NetworkKind::Isolated,
            NetworkKind::Outbound,
            NetworkKind::Allowlist,
        ]
    };
    SandboxSupport {
        backend_id: BACKEND_ID.into(),
        backend_revision: BACKEND_REVISION.into(),
        network,
        execution: vec!["until_stopped", "deadline"],
        workspace_disk_quota: false,
        sessions: true,
    }
}

pub use crate::recovery::reconciled::Reconciled;
use crate::recovery::reconciled::{authority_conflict, verdict};

impl DockerBackend {
    /// Connects without waiting on the engine: an image ID is pinned at once, a reference
    /// starts resolving in the background (every sandbox of this backend then runs exactly
    /// the ID it names, and its records say so). `reaper` runs this process's reaper (with
    /// `reaper: false` in the options, none runs). Needs a tokio runtime context.
    pub fn new(options: DockerOptions, reaper: ReaperCommand) -> Result<Self, OwnerError> {
        check_spill_directory(&options.spill_directory)?;
        let Connected {
            docker,
            dialer,
            engine,
        } = connect(&options.engine)?;
        let image = ImageSource::new(&docker, &options);
        let reaper = match options.reaper {
            // The engine as resolved for this backend: the reaper reaches exactly the same one.
            true => Some(shared(reaper).entry(engine)?),
            false => None,
        };
        Ok(Self {
            options,
            docker,
            dialer,
            image,
            reaper,
        })
    }

    /// What this backend can enforce (its runtime may narrow the network kinds).
    pub fn support(&self) -> SandboxSupport {
        support(self.options.runtime.as_deref())
    }

    /// The pinned image ID, once known.
    pub fn image_id(&self) -> Option<String> {
        self.image.now().map(|pinned| pinned.image_id)
    }

    /// Inert: assigns identities and names, acquires nothing. While a reference is still
    /// being resolved, the record carries `UNRESOLVED_IMAGE` until the start completes it.
    /// `reapable` (an `in_process` sandbox) registers its records with the reaper.
    pub fn reserve(
        &self,
        request: &SandboxRequest,
        reapable: bool,
    ) -> (String, SandboxRecoveryRecord, Arc<dyn DriverReservation>) {
        let sandbox_id = fresh_id("sbx");
        let names = Names::new(&self.options.namespace, &sandbox_id);
        let mut resources = vec![
            planned(Role::Storage, names.storage),
            planned(Role::Holder, names.export),
            planned(Role::Compute, names.compute),
        ];
        if request.policy.network != NetworkKind::Isolated {
            resources.push(planned(Role::Network, names.network));
        }
        let now = self.image.now();
        let pinned = now
            .clone()
            .unwrap_or_else(|| Pinned::new(UNRESOLVED_IMAGE.into(), &self.options));
        let record = SandboxRecoveryRecord {
            backend_id: BACKEND_ID.into(),
            backend_revision: BACKEND_REVISION.into(),
            namespace: self.options.namespace.clone(),
            operation_id: fresh_id("op"),
            sandbox_id: sandbox_id.clone(),
            image_digest: pinned.image_id.clone(),
            policy_digest: sha256_of(&request.to_value()),
            configuration_digest: pinned.configuration_digest.clone(),
            phase: Phase::Reserved,
            authority: Authority::Unverified,
            resources,
        };
        let mut settings = self.settings(&pinned);
        settings.reaper = self.reaper.clone().filter(|_| reapable);
        let reservation: Arc<dyn DriverReservation> = match (&self.image, now) {
            (ImageSource::Resolving(resolver), None) => PendingDockerSandbox::new(
                resolver.clone(),
                settings,
                request.clone(),
                record.clone(),
            ),
            _ => DockerSandbox::new(settings, request.clone(), record.clone()),
        };
        (sandbox_id, record, reservation)
    }

    fn settings(&self, pinned: &Pinned) -> Settings {
        Settings {
            docker: self.docker.clone(),
            engine_label: engine_label(&self.options.engine),
            dialer: self.dialer.clone(),
            spill_directory: std::path::PathBuf::from(&self.options.spill_directory),
            image_id: pinned.image_id.clone(),
            user: self.options.user.clone(),
            runtime: self.options.runtime.clone(),
            configuration_digest: pinned.configuration_digest.clone(),
            reaper: None,
            egress: self.options.egress.clone(),
        }
    }

    /// Adopts nothing it cannot prove: another namespace, engine or configuration is a conflict
    /// before anything is touched; an unreachable engine is an error, never absence.
    pub async fn reconcile(
        &self,
        record: &SandboxRecoveryRecord,
    ) -> Result<Reconciled, OwnerError> {
        if record.namespace != self.options.namespace {
            return Ok(Reconciled::Conflict(format!(
                "the record belongs to namespace {}, this backend owns namespace {}",
                record.namespace, self.options.namespace
            )));
        }
        // A start that never resolved its image reference acquired nothing: its record (the
        // placeholder digest, every resource still planned) is absent, whatever the reference
        // resolves to now and whether or not the engine answers.
        if record.image_digest == UNRESOLVED_IMAGE
            && record.configuration_digest
                == Pinned::new(UNRESOLVED_IMAGE.into(), &self.options).configuration_digest
            && record
                .resources
                .iter()
                .all(|r| r.identity == Identity::Planned)
        {
            let mut absent = record.clone();
            absent.phase = Phase::Destroyed;
            return Ok(Reconciled::Absent(absent));
        }
        let pinned = self.image.pinned().await?;
        if record.configuration_digest != pinned.configuration_digest
            || record.image_digest != pinned.image_id
        {
            return Ok(Reconciled::Conflict(
                "the record was written under another backend configuration or image".into(),
            ));
        }
        let info = self.docker.info().await.map_err(|e| {
            engine_error(
                &format!(
                    "reading the engine identity (the engine: {})",
                    engine_label(&self.options.engine)
                ),
                e,
            )
        })?;
        let engine = format!("docker-engine:{}", info.id.unwrap_or_default());
        if let Some(conflict) = authority_conflict(record, &engine, "engine") {
            return Ok(conflict);
        }
        let mut found_creating = false;
        let mut found_identified = false;
        let mut pending_creating = false;
        for resource in &record.resources {
            match self.observe(record, resource).await? {
                Observation::Nothing => {}
                Observation::Conflict(reason) => return Ok(Reconciled::Conflict(reason)),
                Observation::Present => match resource.identity {
                    Identity::Creating => found_creating = true,
                    _ => found_identified = true,
                },
                Observation::CreatingNotFound => pending_creating = true,
            }
        }
        Ok(verdict(
            record,
            found_creating || pending_creating,
            found_identified,
        ))
    }

    async fn observe(
        &self,
        record: &SandboxRecoveryRecord,
        resource: &Resource,
    ) -> Result<Observation, OwnerError> {
        let (lookup, fingerprint) = match &resource.identity {
            Identity::Planned => return Ok(Observation::Nothing),
            Identity::Creating => (resource.name.clone(), None),
            Identity::Identified { id, fingerprint } => (id.clone(), Some(fingerprint.as_str())),
        };
        let found = match resource.role {
            Role::Compute | Role::Holder => {
                match self.docker.inspect_container(&lookup, None).await {
                    Ok(inspect) => Some((
                        labels_match(
                            inspect.config.as_ref().and_then(|c| c.labels.as_ref()),
                            record,
                            resource.role,
                        ),
                        container_fingerprint(&inspect),
                    )),
                    Err(e) if is_not_found(&e) => None,
                    Err(e) => return Err(engine_error("inspecting a recorded container", e)),
                }
            }
            Role::Storage => match self.docker.inspect_volume(&lookup).await {
                Ok(volume) => Some((
                    labels_match(Some(&volume.labels), record, resource.role),
                    volume_fingerprint(&volume.name, &volume.labels),
                )),
                Err(e) if is_not_found(&e) => None,
                Err(e) => return Err(engine_error("inspecting the recorded volume", e)),
            },
            Role::Network => match self.docker.inspect_network(&lookup, None).await {
                Ok(network) => Some((
                    labels_match(network.labels.as_ref(), record, resource.role),
                    network_fingerprint(
                        network.id.as_deref().unwrap_or_default(),
                        network.created.as_deref(),
                    ),
                )),
                Err(e) if is_not_found(&e) => None,
                Err(e) => return Err(engine_error("inspecting the recorded network", e)),
            },
        };
        Ok(match (found, fingerprint) {
            (None, None) => Observation::CreatingNotFound,
            (None, Some(_)) => Observation::Nothing,
            (Some((true, actual)), Some(expected)) if actual == expected => Observation::Present,
            (Some((true, _)), None) => Observation::Present,
            (Some(_), _) => Observation::Conflict(format!(
                "the {} object {lookup} exists but is not provably this record's (labels or incarnation differ)",
                resource.role.as_str()
            )),
        })
    }

    /// Cleanup-only ownership of a reconciled record.
    pub fn recovered(&self, record: SandboxRecoveryRecord) -> Arc<DockerRecovered> {
        Arc::new(DockerRecovered {
            docker: self.docker.clone(),
            dialer: self.dialer.clone(),
            record,
            stopped: Arc::new(AtomicBool::new(false)),
        })
    }
}

enum Observation {
    Nothing,
    Present,
    CreatingNotFound,
    Conflict(String),
}

fn planned(role: Role, name: String) -> Resource {
    Resource {
        role,
        name,
        identity: Identity::Planned,
    }
}

/// Stops and destroys what a record proves is its own; nothing else.
pub struct DockerRecovered {
    docker: Docker,
    dialer: Dialer,
    record: SandboxRecoveryRecord,
    /// Set once a stop begins: an attached process's fate is then `Unavailable`.
    stopped: Arc<AtomicBool>,
}

impl RecoveredDriver for DockerRecovered {
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>> {
        async move { Ok(self.record.clone()) }.boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            self.stopped.store(true, Ordering::SeqCst);
            remove_container(&self.docker, &self.record, Role::Compute).await?;
            Ok(())
        }
        .boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { remove_all(&self.docker, &self.record).await }.boxed()
    }

    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { set_frozen(&self.docker, &self.record, Freeze::Pause).await }.boxed()
    }

    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { set_frozen(&self.docker, &self.record, Freeze::Resume).await }.boxed()
    }

    fn attach_process(self: Arc<Self>) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        async move {
            let stopped = Arc::clone(&self.stopped);
            attach_again(self.docker.clone(), &self.dialer, &self.record, stopped).await
        }
        .boxed()
    }
}

/// `spillDirectory` must exist and be a directory: a validation issue naming it otherwise, with
/// how to make one (the package never creates a temporary directory of its own).
pub fn check_spill_directory(path: &str) -> Result<(), OwnerError> {
    let problem = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => "is not a directory".to_owned(),
        Err(e) => format!("is not an existing directory ({e})"),
    };
    Err(OwnerError::Validation(vec![Issue {
        code: IssueCode::InvalidPath,
        path: vec![Seg::from("spillDirectory")],
        message: format!(
            "{path} {problem}: pass a directory you own, such as mkdtempSync(join(tmpdir(), 'sandbox-spill-'))"
        ),
    }]))
}
