//! The Kubernetes backend: connects to the cluster once, reserves sandboxes (inert), and says
//! what it can enforce there.

use std::sync::Arc;

use super::client::{connect, Cluster};
use super::layout::{object_name, BACKEND_ID, BACKEND_REVISION};
use super::options::KubernetesOptions;
use super::sandbox::{KubernetesSandbox, Settings};
use crate::digest::{fresh_id, sha256_of};
use crate::input::{ToValue, Value};
use crate::lifecycle::driver::DriverReservation;
use crate::lifecycle::error::OwnerError;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::policy::support::SandboxSupport;
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
            image_digest: format!("reference:{}", self.options.image),
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

fn planned(role: Role, name: String) -> Resource {
    Resource {
        role,
        name,
        identity: Identity::Planned,
    }
}
