//! A sandbox's objects on the cluster, each under the sandbox's one name and proven by its UID:
//! found by name only with the sandbox's labels (an object a start announced but never
//! identified), deleted only by UID (a precondition, so never another object that took the
//! name) and waited for until gone, and the guest's end awaited. Shared by the live sandbox
//! (`sandbox.rs`) and a reconciled one (`recovered.rs`); every API request is bounded
//! (`requests.rs`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::Client;

use super::client::REQUEST_TIMEOUT;
use super::layout::{labels_match, object_name, SANDBOX_CONTAINER};
use super::requests::{api_error, idempotent, is_not_found, is_transport, retried, Retry};
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Identity, Role, SandboxRecoveryRecord};

/// How often an object's state is read while waiting for it.
pub const POLL: Duration = Duration::from_millis(100);
/// How long a destroy waits for each object to be gone.
const DESTROY_BOUND: Duration = Duration::from_secs(60);

/// A record's fingerprint of the object `uid` (a record holds digests): the UID names one
/// incarnation of an object for the cluster's life, so it proves the object alone.
pub fn fingerprint_of(uid: &str) -> String {
    crate::digest::sha256(format!("kubernetes-uid:{uid}").as_bytes())
}

/// The label value of an object of `role`.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::Network => "network",
        _ => "compute",
    }
}

/// Where the guest's containers are, as a stop waits for them.
#[derive(Debug, PartialEq, Eq)]
pub enum Guest {
    /// The pod is gone, or is another pod now.
    Gone,
    /// Every container of the guest's ended (the workspace container may run on).
    Ended,
    /// The sandbox container (or the init container) runs or waits to.
    Running,
}

/// The guest's state in `pod`: only the sandbox and init containers count; the workspace
/// container holds the pod for exports.
pub fn guest_of(pod: &Pod) -> Guest {
    let status = pod.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return Guest::Ended;
    }
    let running = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.name == SANDBOX_CONTAINER)
        .chain(
            status
                .and_then(|s| s.init_container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
        .any(|c| {
            c.state
                .as_ref()
                .is_none_or(|s| s.running.is_some() || s.waiting.is_some())
        });
    if running {
        Guest::Running
    } else {
        Guest::Ended
    }
}

/// The objects of one sandbox.
#[derive(Clone)]
pub struct Objects {
    pub pods: Api<Pod>,
    pub policies: Api<NetworkPolicy>,
    /// The one name every object of the sandbox has.
    pub name: String,
    scope: String,
    sandbox_id: String,
}

impl Objects {
    pub fn new(client: Client, namespace: &str, scope: &str, sandbox_id: &str) -> Self {
        Self {
            pods: Api::namespaced(client.clone(), namespace),
            policies: Api::namespaced(client, namespace),
            name: object_name(scope, sandbox_id),
            scope: scope.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
        }
    }

    /// The object of `role` under the sandbox's name, when it carries the sandbox's labels for
    /// that role: its UID and labels' verdict. `None` when nothing has the name.
    pub async fn find(&self, role: Role) -> Result<Option<(String, bool)>, OwnerError> {
        let what = format!("looking for the sandbox's {}", kind_of(role));
        let meta = match role {
            Role::Network => idempotent(&what, || self.policies.get_opt(&self.name))
                .await?
                .map(|p| p.metadata),
            _ => idempotent(&what, || self.pods.get_opt(&self.name))
                .await?
                .map(|p| p.metadata),
        };
        Ok(meta.and_then(|meta| {
            let labelled = labels_match(
                meta.labels.as_ref(),
                &self.scope,
                &self.sandbox_id,
                role_label(role),
            );
            meta.uid.map(|uid| (uid, labelled))
        }))
    }

    /// The UID of the object of `role` under the sandbox's name, only when it carries the
    /// sandbox's labels.
    pub async fn labelled_uid(&self, role: Role) -> Result<Option<String>, OwnerError> {
        Ok(self
            .find(role)
            .await?
            .and_then(|(uid, labelled)| labelled.then_some(uid)))
    }

    /// The guest's state in the pod `uid`.
    pub async fn guest(&self, uid: &str) -> Result<Guest, OwnerError> {
        let found = idempotent("reading the sandbox's pod at stop", || {
            self.pods.get_opt(&self.name)
        })
        .await?;
        Ok(match found {
            Some(pod) if pod.metadata.uid.as_deref() == Some(uid) => guest_of(&pod),
            _ => Guest::Gone,
        })
    }

    /// Waits until the guest in the pod `uid` ended, until `deadline`; past it the pod is
    /// deleted, and every process with it.
    pub async fn guest_ended_by(
        &self,
        uid: &str,
        deadline: tokio::time::Instant,
    ) -> Result<(), OwnerError> {
        loop {
            if self.guest(uid).await? != Guest::Running {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return self.delete(Role::Compute, uid).await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes the sandbox's object of `role` by its UID and waits until it is gone, within
    /// `DESTROY_BOUND`.
    pub async fn delete(&self, role: Role, uid: &str) -> Result<(), OwnerError> {
        match role {
            Role::Network => delete_by_uid(&self.policies, &self.name, "NetworkPolicy", uid).await,
            _ => delete_by_uid(&self.pods, &self.name, "pod", uid).await,
        }
    }

    /// Deletes every object of the sandbox: each known UID, or for an object announced but
    /// never identified, the object under its name that carries the sandbox's labels.
    pub async fn destroy(&self, objects: [(Role, Located); 2]) -> Result<(), OwnerError> {
        for (role, located) in objects {
            let uid = match located {
                Located::Identified(uid) => Some(uid),
                Located::Announced => self.labelled_uid(role).await?,
                Located::None => None,
            };
            if let Some(uid) = uid {
                self.delete(role, &uid).await?;
            }
        }
        Ok(())
    }
}

/// What a sandbox knows of one of its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Made, with this UID.
    Identified(String),
    /// Announced before its creation, never identified: it may exist.
    Announced,
    /// Never announced: it does not exist.
    None,
}

/// What the record says of its object of `role`.
pub fn located_in(record: &SandboxRecoveryRecord, role: Role) -> Located {
    match record.resources.iter().find(|r| r.role == role) {
        Some(resource) => match &resource.identity {
            Identity::Identified { id, .. } => Located::Identified(id.clone()),
            Identity::Creating => Located::Announced,
            Identity::Planned => Located::None,
        },
        None => Located::None,
    }
}

fn kind_of(role: Role) -> &'static str {
    match role {
        Role::Network => "NetworkPolicy",
        _ => "pod",
    }
}

/// Deletes the object `name` by its UID (never another that took the name) and waits until it
/// is gone, within `DESTROY_BOUND`.
async fn delete_by_uid<K>(api: &Api<K>, name: &str, kind: &str, uid: &str) -> Result<(), OwnerError>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let what = format!("deleting the sandbox's {kind}");
    let params = delete_params(uid);
    match retried(Retry::Idempotent, || api.delete(name, &params)).await {
        Ok(_) => {}
        Err(None) => return Err(OwnerError::driver(format!("{what}: no answer"))),
        Err(Some(e)) if is_not_found(&e) => return Ok(()),
        // The precondition failed: the name is another object's now, and this one is gone.
        Err(Some(kube::Error::Api(status))) if status.code == 409 => return Ok(()),
        Err(Some(e)) => return Err(api_error(&what, e)),
    }
    gone(name, uid, DESTROY_BOUND, move |name| {
        let api = api.clone();
        async move {
            api.get_opt(&name)
                .await
                .map(|found| found.and_then(|object| object.meta().uid.clone()))
        }
    })
    .await
}

fn delete_params(uid: &str) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// Waits until the object `name` is gone or is another object (another UID), within `bound`.
async fn gone<F, Fut>(name: &str, uid: &str, bound: Duration, get: F) -> Result<(), OwnerError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<String>, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match tokio::time::timeout(REQUEST_TIMEOUT, get(name.to_owned())).await {
            Ok(Ok(None)) => return Ok(()),
            Ok(Ok(Some(found))) if found != uid => return Ok(()),
            Ok(Ok(Some(_))) => {}
            Ok(Err(e)) if !is_transport(&e) => {
                return Err(api_error(&format!("waiting for {name} to go"), e))
            }
            Ok(Err(_)) | Err(_) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(OwnerError::driver(format!(
                "{name} was deleted but is still there after {} s",
                bound.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, PodStatus,
    };

    fn status(name: &str, running: bool) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(if running {
                ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..ContainerState::default()
                }
            } else {
                ContainerState {
                    terminated: Some(ContainerStateTerminated::default()),
                    ..ContainerState::default()
                }
            }),
            ..ContainerStatus::default()
        }
    }

    fn pod_with(containers: Vec<ContainerStatus>, phase: &str) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(containers),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn the_guest_ended_when_the_sandbox_container_did_whatever_the_workspace_container_does() {
        let stopped = pod_with(
            vec![status("sandbox", false), status("workspace", true)],
            "Running",
        );
        assert_eq!(guest_of(&stopped), Guest::Ended);
        let running = pod_with(
            vec![status("sandbox", true), status("workspace", true)],
            "Running",
        );
        assert_eq!(guest_of(&running), Guest::Running);
        let done = pod_with(vec![status("sandbox", true)], "Failed");
        assert_eq!(guest_of(&done), Guest::Ended);
        // A container with no state yet is taken as one that may still run.
        let unknown = pod_with(
            vec![ContainerStatus {
                name: "sandbox".into(),
                ..ContainerStatus::default()
            }],
            "Pending",
        );
        assert_eq!(guest_of(&unknown), Guest::Running);
    }
}
