//! The Docker backend: pins the image, reserves sandboxes, and reconciles records by proof.

use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use futures::future::{BoxFuture, FutureExt};

use super::engine::{connect, engine_error, is_not_found};
use super::layout::{Names, BACKEND_ID, BACKEND_REVISION};
use super::objects::{
    container_fingerprint, labels_match, network_fingerprint, provable_container, remove_all,
    volume_fingerprint,
};
use super::options::DockerOptions;
use super::reservation::{DockerReservation, Settings};
use crate::digest::{fresh_id, sha256_of};
use crate::input::{ToValue, Value};
use crate::lifecycle::driver::RecoveredDriver;
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::policy::support::SandboxSupport;
use crate::recovery::record::{Authority, Identity, Phase, Resource, Role, SandboxRecoveryRecord};

/// How long backend creation waits for the engine to resolve the image.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct DockerBackend {
    options: DockerOptions,
    docker: Docker,
    image_id: String,
    configuration_digest: String,
}

pub fn support() -> SandboxSupport {
    SandboxSupport {
        backend_id: BACKEND_ID.into(),
        backend_revision: BACKEND_REVISION.into(),
        network: vec![NetworkKind::Isolated, NetworkKind::Outbound],
        execution: vec!["until_stopped", "deadline"],
        workspace_disk_quota: false,
    }
}

/// What a reconciliation found.
pub enum Reconciled {
    Matched(SandboxRecoveryRecord),
    Uncertain(SandboxRecoveryRecord),
    Conflict(String),
    Absent(SandboxRecoveryRecord),
}

/// The immutable ID a reference names now, asked once with a bounded wait.
async fn resolve_image(docker: &Docker, reference: &str) -> Result<String, OwnerError> {
    let image = tokio::time::timeout(RESOLVE_TIMEOUT, docker.inspect_image(reference))
        .await
        .map_err(|_| {
            OwnerError::driver(format!(
                "the engine did not resolve image {reference} within {RESOLVE_TIMEOUT:?}"
            ))
        })?
        .map_err(|e| engine_error(&format!("resolving image {reference}"), e))?;
    image
        .id
        .filter(|id| crate::recovery::record::is_sha256_digest(id))
        .ok_or_else(|| OwnerError::driver(format!("image {reference} has no sha256 image ID")))
}

impl DockerBackend {
    /// Connects, and pins the image to its immutable ID: every sandbox of this backend runs
    /// exactly that image, and its records say so.
    pub async fn connect(options: DockerOptions) -> Result<Self, OwnerError> {
        let spill = std::fs::metadata(&options.spill_directory).map_err(|e| {
            OwnerError::state(format!(
                "spillDirectory {} is not an existing directory: {e}",
                options.spill_directory
            ))
        })?;
        if !spill.is_dir() {
            return Err(OwnerError::state(format!(
                "spillDirectory {} is not a directory",
                options.spill_directory
            )));
        }
        let docker = connect(&options.engine)?;
        // An image ID is already immutable: creation then asks the engine nothing, and startup's
        // admission inspects the image (a missing one fails startup, before any container).
        let image_id = if crate::recovery::record::is_sha256_digest(&options.image) {
            options.image.clone()
        } else {
            resolve_image(&docker, &options.image).await?
        };
        let configuration = Value::object([
            ("backend", Value::string(BACKEND_ID)),
            ("revision", Value::string(BACKEND_REVISION)),
            ("image", Value::string(image_id.as_str())),
            ("namespace", Value::string(options.namespace.as_str())),
            ("user", Value::string(options.user.as_str())),
            (
                "runtime",
                options
                    .runtime
                    .as_deref()
                    .map_or(Value::Null, Value::string),
            ),
        ]);
        Ok(Self {
            configuration_digest: sha256_of(&configuration),
            options,
            docker,
            image_id,
        })
    }

    pub fn image_id(&self) -> &str {
        &self.image_id
    }

    /// Inert: assigns identities and names, acquires nothing.
    pub fn reserve(
        &self,
        request: &SandboxRequest,
    ) -> (String, SandboxRecoveryRecord, Arc<DockerReservation>) {
        let sandbox_id = fresh_id("sbx");
        let names = Names::new(&self.options.namespace, &sandbox_id);
        let mut resources = vec![
            planned(Role::Storage, names.storage),
            planned(Role::Export, names.export),
            planned(Role::Compute, names.compute),
        ];
        if request.policy.network == NetworkKind::Outbound {
            resources.push(planned(Role::Network, names.network));
        }
        let record = SandboxRecoveryRecord {
            backend_id: BACKEND_ID.into(),
            backend_revision: BACKEND_REVISION.into(),
            namespace: self.options.namespace.clone(),
            operation_id: fresh_id("op"),
            sandbox_id: sandbox_id.clone(),
            image_digest: self.image_id.clone(),
            policy_digest: sha256_of(&request.to_value()),
            configuration_digest: self.configuration_digest.clone(),
            phase: Phase::Reserved,
            authority: Authority::Unverified,
            resources,
        };
        let reservation = DockerReservation::new(self.settings(), request.clone(), record.clone());
        (sandbox_id, record, reservation)
    }

    fn settings(&self) -> Settings {
        Settings {
            docker: self.docker.clone(),
            spill_directory: std::path::PathBuf::from(&self.options.spill_directory),
            image_id: self.image_id.clone(),
            user: self.options.user.clone(),
            runtime: self.options.runtime.clone(),
            configuration_digest: self.configuration_digest.clone(),
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
        if record.configuration_digest != self.configuration_digest
            || record.image_digest != self.image_id
        {
            return Ok(Reconciled::Conflict(
                "the record was written under another backend configuration or image".into(),
            ));
        }
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| engine_error("reading the engine identity", e))?;
        let engine = format!("docker-engine:{}", info.id.unwrap_or_default());
        match &record.authority {
            Authority::Verified { backend_identity } if *backend_identity != engine => {
                return Ok(Reconciled::Conflict(
                    "the record was written against another engine".into(),
                ));
            }
            Authority::Unverified
                if record
                    .resources
                    .iter()
                    .any(|r| r.identity != Identity::Planned) =>
            {
                return Ok(Reconciled::Conflict(
                    "an unverified record cannot own entered resources".into(),
                ));
            }
            _ => {}
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
        Ok(if found_creating || pending_creating {
            Reconciled::Uncertain(record.clone())
        } else if found_identified {
            Reconciled::Matched(record.clone())
        } else {
            let mut absent = record.clone();
            absent.phase = Phase::Destroyed;
            Reconciled::Absent(absent)
        })
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
            Role::Compute | Role::Export => {
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
            record,
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
    record: SandboxRecoveryRecord,
}

impl RecoveredDriver for DockerRecovered {
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>> {
        async move { Ok(self.record.clone()) }.boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            if let Some(id) = provable_container(&self.docker, &self.record, Role::Compute).await? {
                match self
                    .docker
                    .remove_container(
                        &id,
                        Some(
                            bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                                .force(true)
                                .build(),
                        ),
                    )
                    .await
                {
                    Ok(()) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => {
                        return Err(engine_error("stopping the recovered process container", e))
                    }
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { remove_all(&self.docker, &self.record).await }.boxed()
    }
}
