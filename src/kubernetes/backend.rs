//! The Kubernetes backend: connects to the cluster once, reserves sandboxes (inert), and says
//! what it can enforce there.

use std::sync::Arc;

use super::client::{connect, Cluster};
use super::layout::{object_name, BACKEND_ID, BACKEND_REVISION};
use super::objects::{fingerprint_of, Objects};
use super::options::KubernetesOptions;
use super::recovered::KubernetesRecovered;
use super::sandbox::{KubernetesSandbox, Settings};
use crate::digest::{fresh_id, sha256_of};
use crate::input::{ToValue, Value};
use crate::lifecycle::driver::DriverReservation;
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::policy::support::SandboxSupport;
use crate::recovery::reconciled::{authority_conflict, verdict, Reconciled};
use crate::recovery::record::{Authority, Identity, Phase, Resource, Role, SandboxRecoveryRecord};

pub struct KubernetesBackend {
    options: KubernetesOptions,
    settings: Arc<Settings>,
}

/// What a backend with these options can enforce: `isolated` only where the cluster enforces
/// NetworkPolicy (a deny-all policy elsewhere would be a silent pass), `outbound` always (the
/// pod's network is the cluster's), never `allowlist` (not built for clusters yet).
pub fn support(options: &KubernetesOptions) -> SandboxSupport {
    let mut network = Vec::new();
    if options.network_policy_enforced {
        network.push(NetworkKind::Isolated);
    }
    network.push(NetworkKind::Outbound);
    SandboxSupport {
        backend_id: BACKEND_ID.into(),
        backend_revision: BACKEND_REVISION.into(),
        network,
        execution: vec!["until_stopped", "deadline"],
        workspace_disk_quota: false,
        sessions: true,
    }
}

/// The digest of everything that shapes a pod besides the request: records written under other
/// options are not this backend's.
fn configuration_digest(options: &KubernetesOptions) -> String {
    let text = |s: &str| Value::string(s);
    sha256_of(&Value::object([
        ("backend", text(BACKEND_ID)),
        ("namespace", text(&options.namespace)),
        ("scope", text(&options.scope)),
        ("image", text(&options.image)),
        ("imagePullPolicy", text(options.image_pull_policy)),
        ("user", text(&options.user)),
        (
            "runtimeClassName",
            options
                .runtime_class_name
                .as_deref()
                .map_or(Value::Null, text),
        ),
        ("architecture", text(options.architecture)),
        (
            "networkPolicy",
            text(if options.network_policy_enforced {
                "enforced"
            } else {
                "not_enforced"
            }),
        ),
        (
            "podPidsLimit",
            options
                .pod_pids_limit
                .map_or(Value::Null, |limit| Value::Number(limit as f64)),
        ),
    ]))
}

impl KubernetesBackend {
    /// Connects to the cluster (bounded; the error names the kubeconfig and context).
    pub async fn connect(options: KubernetesOptions) -> Result<Self, OwnerError> {
        let cluster: Cluster = connect(&options.cluster).await?;
        let settings = Arc::new(Settings {
            cluster,
            namespace: options.namespace.clone(),
            scope: options.scope.clone(),
            image: options.image.clone(),
            image_pull_policy: options.image_pull_policy,
            user: options.user.clone(),
            runtime_class_name: options.runtime_class_name.clone(),
            architecture: options.architecture,
            pod_pids_limit: options.pod_pids_limit,
            configuration_digest: configuration_digest(&options),
        });
        Ok(Self { options, settings })
    }

    pub fn support(&self) -> SandboxSupport {
        support(&self.options)
    }

    /// Inert: assigns the identity and the objects' one name, acquires nothing.
    pub fn reserve(
        &self,
        request: &SandboxRequest,
    ) -> (String, SandboxRecoveryRecord, Arc<dyn DriverReservation>) {
        let sandbox_id = fresh_id("sbx");
        let name = object_name(&self.options.scope, &sandbox_id);
        let mut resources = Vec::new();
        if request.policy.network.kind == NetworkKind::Isolated {
            resources.push(planned(Role::Network, name.clone()));
        }
        resources.push(planned(Role::Compute, name));
        let record = SandboxRecoveryRecord {
            backend_id: BACKEND_ID.into(),
            backend_revision: BACKEND_REVISION.into(),
            namespace: self.options.scope.clone(),
            operation_id: fresh_id("op"),
            sandbox_id: sandbox_id.clone(),
            image_digest: image_digest(&self.options),
            policy_digest: sha256_of(&request.to_value()),
            configuration_digest: self.settings.configuration_digest.clone(),
            phase: Phase::Reserved,
            authority: Authority::Unverified,
            resources,
        };
        let reservation: Arc<dyn DriverReservation> =
            KubernetesSandbox::new(Arc::clone(&self.settings), request.clone(), record.clone());
        (sandbox_id, record, reservation)
    }
}

impl KubernetesBackend {
    fn objects_of(&self, record: &SandboxRecoveryRecord) -> Objects {
        Objects::new(
            self.settings.cluster.client.clone(),
            &self.settings.namespace,
            &self.settings.scope,
            &record.sandbox_id,
        )
    }

    /// Adopts nothing it cannot prove: another scope, configuration, image, cluster or
    /// namespace is a conflict before anything is read; each recorded object is looked up under
    /// the sandbox's name and counts only with the sandbox's labels and, once identified, its
    /// recorded UID. An API server that does not answer is an error, never absence.
    pub async fn reconcile(
        &self,
        record: &SandboxRecoveryRecord,
    ) -> Result<Reconciled, OwnerError> {
        if record.namespace != self.options.scope {
            return Ok(Reconciled::Conflict(format!(
                "the record belongs to scope {}, this backend owns scope {}",
                record.namespace, self.options.scope
            )));
        }
        if record.configuration_digest != self.settings.configuration_digest
            || record.image_digest != image_digest(&self.options)
        {
            return Ok(Reconciled::Conflict(
                "the record was written under another backend configuration or image".into(),
            ));
        }
        let ours = self.settings.backend_identity();
        if let Some(conflict) = authority_conflict(record, &ours, "cluster or namespace") {
            return Ok(conflict);
        }
        let objects = self.objects_of(record);
        let (mut identified, mut creating) = (false, false);
        for resource in &record.resources {
            let recorded = match &resource.identity {
                Identity::Planned => continue,
                Identity::Creating => None,
                Identity::Identified { id, fingerprint } => Some((id, fingerprint)),
            };
            match (objects.find(resource.role).await?, recorded) {
                // Announced and not there: it may still be made by a request in flight.
                (None, None) => creating = true,
                (None, Some(_)) => {}
                (Some((_, true)), None) => creating = true,
                (Some((uid, true)), Some((id, fingerprint)))
                    if uid == *id && *fingerprint == fingerprint_of(&uid) =>
                {
                    identified = true
                }
                (Some(_), _) => {
                    return Ok(Reconciled::Conflict(format!(
                        "the {} object {} exists but is not provably this record's (labels or UID differ)",
                        resource.role.as_str(),
                        objects.name
                    )))
                }
            }
        }
        Ok(verdict(record, creating, identified))
    }

    /// Cleanup-only ownership of a reconciled record.
    pub fn recovered(&self, record: SandboxRecoveryRecord) -> Arc<KubernetesRecovered> {
        Arc::new(KubernetesRecovered {
            objects: self.objects_of(&record),
            record,
        })
    }
}

/// The image as records name it: the digest of the reference the options give (the cluster
/// resolves the reference; a record pins the reference, not its content).
fn image_digest(options: &KubernetesOptions) -> String {
    crate::digest::sha256(format!("reference:{}", options.image).as_bytes())
}

fn planned(role: Role, name: String) -> Resource {
    Resource {
        role,
        name,
        identity: Identity::Planned,
    }
}
