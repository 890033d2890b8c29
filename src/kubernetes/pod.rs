//! What a sandbox is on a cluster: its pod (the guest supervisor as the entry, the helper put in
//! place by an init container that reads it from its attached stdin) and, for `isolated`, a
//! deny-all NetworkPolicy; and the effective policy read back from the pod the API server
//! stored.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use super::layout::{
    labels, ANNOTATION_CONFIGURATION, HELPER_CONTAINER, HELPER_DIRECTORY, HELPER_PATH,
    LABEL_SANDBOX, SANDBOX_CONTAINER, WORKSPACE_CONTAINER,
};
use super::quantity;
use crate::guest_layout::{fixed_environment, HOME, TMPDIR, WORKSPACE};
use crate::lifecycle::error::OwnerError;
use crate::policy::effective::{EffectiveDiskQuota, SandboxEffectivePolicy};
use crate::policy::network::{NetworkKind, NetworkPolicy as Network};
use crate::policy::request::SandboxRequest;
use crate::policy::resources::{Resources, TemporaryStorage};

/// What a pod is made from, besides the request.
pub struct PodPlan<'a> {
    pub name: &'a str,
    pub scope: &'a str,
    pub sandbox_id: &'a str,
    pub operation_id: &'a str,
    pub configuration: &'a str,
    pub image: &'a str,
    pub image_pull_policy: &'a str,
    /// `uid:gid` of every command.
    pub user: &'a str,
    pub runtime_class_name: Option<&'a str>,
    pub architecture: &'a str,
}

/// What the workspace container asks for and may use: the workspace helper of one transfer at a
/// time (a few MiB of buffers) and its waiting entry. It asks little CPU (it waits between
/// transfers) and may burst to the policy's CPUs, so a transfer goes as fast as the sandbox's
/// own commands could; its memory is fixed. Outside the policy's amounts, which are the sandbox
/// container's alone: these are the controller's, as a Docker sandbox's holder is.
const WORKSPACE_CPU_REQUEST: &str = "50m";
const WORKSPACE_MEMORY: &str = "64Mi";

/// The sandbox's pod. The init container writes the helper it reads from stdin into a volume
/// the other containers mount read-only; the sandbox container starts the helper as root with
/// only CAP_SETUID and CAP_SETGID, so the supervisor takes an identity of its own and runs every
/// command as `user` with no capability (as on Docker). The workspace container, `user` with no
/// capability and only the workspace mounted, waits (`--hold`) so the pod and its workspace stay
/// after a stop ended the sandbox container, and runs each transfer's workspace helper by exec,
/// as a Docker sandbox's holder does. No service account token, no host
/// namespace, a read-only root filesystem, the runtime's seccomp profile, no privilege gained on
/// exec; HOME and TMPDIR memory-backed with the policy's sizes, the workspace an `emptyDir`.
pub fn pod(plan: &PodPlan<'_>, request: &SandboxRequest) -> Result<Pod, OwnerError> {
    let policy = &request.policy;
    let (uid, gid) = split_user(plan.user)?;
    let env: Vec<serde_json::Value> = fixed_environment()
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect();
    let helper_user = json!({
        "runAsUser": uid, "runAsGroup": gid, "runAsNonRoot": true,
        "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
        "capabilities": { "drop": ["ALL"] }, "seccompProfile": { "type": "RuntimeDefault" },
    });
    let supervisor = json!({
        "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": false,
        "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "privileged": false,
        "capabilities": { "drop": ["ALL"], "add": ["SETUID", "SETGID"] },
        "seccompProfile": { "type": "RuntimeDefault" },
    });
    let cpus = quantity::millicores(policy.resources.cpus);
    let memory = policy.resources.memory_bytes.to_string();
    let limits = json!({ "cpu": cpus.clone(), "memory": memory });
    // The init container needs little; its limits keep the pod's requests the sandbox's.
    let helper_limits = json!({ "cpu": "100m", "memory": "32Mi" });
    let workspace_limits = json!({ "cpu": cpus, "memory": WORKSPACE_MEMORY });
    let workspace_requests = json!({ "cpu": WORKSPACE_CPU_REQUEST, "memory": WORKSPACE_MEMORY });
    let mut spec = json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "hostNetwork": false, "hostPID": false, "hostIPC": false,
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": { "kubernetes.io/arch": plan.architecture, "kubernetes.io/os": "linux" },
        "securityContext": { "seccompProfile": { "type": "RuntimeDefault" } },
        "volumes": [
            { "name": "helper", "emptyDir": { "sizeLimit": "16Mi" } },
            { "name": "workspace", "emptyDir": {} },
            { "name": "home", "emptyDir": { "medium": "Memory",
                "sizeLimit": policy.temporary_storage.home_bytes.to_string() } },
            { "name": "tmp", "emptyDir": { "medium": "Memory",
                "sizeLimit": policy.temporary_storage.temp_bytes.to_string() } },
        ],
        "initContainers": [{
            "name": HELPER_CONTAINER,
            "image": plan.image,
            "imagePullPolicy": plan.image_pull_policy,
            "command": ["/bin/sh", "-c",
                format!("cat > {HELPER_PATH}.part && chmod 0555 {HELPER_PATH}.part && mv {HELPER_PATH}.part {HELPER_PATH}")],
            "stdin": true, "stdinOnce": true, "tty": false,
            "securityContext": helper_user.clone(),
            "resources": { "limits": helper_limits, "requests": helper_limits },
            "volumeMounts": [{ "name": "helper", "mountPath": HELPER_DIRECTORY }],
        }],
        "containers": [{
            "name": SANDBOX_CONTAINER,
            "image": plan.image,
            "imagePullPolicy": plan.image_pull_policy,
            "command": [HELPER_PATH],
            "args": ["--supervise", "--as-user", plan.user, "--roots", WORKSPACE, HOME, TMPDIR],
            "workingDir": WORKSPACE,
            "env": env.clone(),
            "stdin": true, "stdinOnce": true, "tty": false,
            "securityContext": supervisor,
            "resources": { "limits": limits, "requests": limits },
            "volumeMounts": [
                { "name": "helper", "mountPath": HELPER_DIRECTORY, "readOnly": true },
                { "name": "workspace", "mountPath": WORKSPACE },
                { "name": "home", "mountPath": HOME },
                { "name": "tmp", "mountPath": TMPDIR },
            ],
        }, {
            "name": WORKSPACE_CONTAINER,
            "image": plan.image,
            "imagePullPolicy": plan.image_pull_policy,
            "command": [HELPER_PATH],
            "args": ["--hold"],
            "workingDir": WORKSPACE,
            "env": env,
            "securityContext": helper_user,
            "resources": { "limits": workspace_limits, "requests": workspace_requests },
            "volumeMounts": [
                { "name": "helper", "mountPath": HELPER_DIRECTORY, "readOnly": true },
                { "name": "workspace", "mountPath": WORKSPACE },
            ],
        }],
    });
    if let (Some(class), Some(object)) = (plan.runtime_class_name, spec.as_object_mut()) {
        object.insert("runtimeClassName".into(), json!(class));
    }
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": plan.name,
            "labels": labels(plan.scope, plan.sandbox_id, plan.operation_id, "compute"),
            "annotations": { ANNOTATION_CONFIGURATION: plan.configuration },
        },
        "spec": spec,
    });
    serde_json::from_value(manifest)
        .map_err(|e| OwnerError::driver(format!("building the sandbox's pod: {e}")))
}

/// A NetworkPolicy that selects only the sandbox's pod and allows nothing in or out.
pub fn deny_all(plan: &PodPlan<'_>) -> Result<NetworkPolicy, OwnerError> {
    let manifest = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": plan.name,
            "labels": labels(plan.scope, plan.sandbox_id, plan.operation_id, "network"),
        },
        "spec": {
            "podSelector": { "matchLabels": { LABEL_SANDBOX: plan.sandbox_id } },
            "policyTypes": ["Ingress", "Egress"],
        },
    });
    serde_json::from_value(manifest)
        .map_err(|e| OwnerError::driver(format!("building the sandbox's NetworkPolicy: {e}")))
}

fn split_user(user: &str) -> Result<(u32, u32), OwnerError> {
    let parsed = user
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)));
    parsed.ok_or_else(|| OwnerError::driver(format!("the user {user} is not a numeric uid:gid")))
}

/// The policy the stored pod applies, read from what the API server returned: every amount
/// from the sandbox container's limits and the volumes' sizes; `pids` is the cluster's per-pod
/// limit; the network `isolated` only with a deny-all policy the cluster enforces. Anything
/// missing or in a form not understood is an error naming it, never a guess.
pub fn effective(
    pod: &Pod,
    pod_pids_limit: u64,
    network: NetworkKind,
) -> Result<SandboxEffectivePolicy, OwnerError> {
    let missing = |what: &str| OwnerError::driver(format!("the stored pod has no {what}"));
    let spec = pod.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == SANDBOX_CONTAINER)
        .ok_or_else(|| missing("sandbox container"))?;
    let limits = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .ok_or_else(|| missing("resource limits"))?;
    let cpus = limits
        .get("cpu")
        .and_then(|q| quantity::parse(&q.0))
        .ok_or_else(|| missing("readable cpu limit"))?;
    let memory_bytes = limits
        .get("memory")
        .and_then(|q| quantity::bytes(&q.0))
        .ok_or_else(|| missing("readable memory limit"))?;
    let size_of = |volume: &str| {
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == volume)
            .and_then(|v| v.empty_dir.as_ref())
            .filter(|d| d.medium.as_deref() == Some("Memory"))
            .and_then(|d| d.size_limit.as_ref())
            .and_then(|q| quantity::bytes(&q.0))
            .ok_or_else(|| missing(&format!("memory-backed {volume} volume with a size")))
    };
    Ok(SandboxEffectivePolicy {
        resources: Resources {
            cpus,
            memory_bytes,
            pids: pod_pids_limit,
        },
        temporary_storage: TemporaryStorage {
            home_bytes: size_of("home")?,
            temp_bytes: size_of("tmp")?,
        },
        network: Network::of(network),
        workspace_disk_quota: EffectiveDiskQuota::NotRequested,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::from_json;
    use crate::policy::request::parse_sandbox_request;

    fn request() -> SandboxRequest {
        let json = serde_json::json!({ "policy": {
            "resources": { "cpus": 1.5, "memoryBytes": 134217728, "pids": 256 },
            "temporaryStorage": { "homeBytes": 8388608, "tempBytes": 16777216 },
            "network": { "kind": "isolated" },
            "deadlines": { "startupMs": 60000, "cleanupMs": 30000 },
            "transfers": { "chunkBytes": 65536, "metadataBatchBytes": 65536, "mergeFanIn": 8 },
            "streams": { "maxBufferedInputBytes": 1048576, "maxBufferedOutputBytes": 1048576, "highWaterMark": 65536 },
        }});
        parse_sandbox_request(&from_json(json)).expect("request")
    }

    fn plan() -> PodPlan<'static> {
        PodPlan {
            name: "nsbx-ci-sbx-1",
            scope: "ci",
            sandbox_id: "sbx-1",
            operation_id: "op-1",
            configuration: "sha256:0",
            image: "busybox:1",
            image_pull_policy: "Never",
            user: "65532:65532",
            runtime_class_name: Some("gvisor"),
            architecture: "amd64",
        }
    }

    #[test]
    fn the_pod_reads_back_as_the_policy_it_was_made_from() {
        let request = request();
        let made = pod(&plan(), &request).expect("pod");
        let effective = effective(&made, 256, NetworkKind::Isolated).expect("effective");
        crate::lifecycle::admission::check_effective(&request, &effective).expect("as asked");
        assert_eq!(effective.resources.cpus, 1.5);
        assert_eq!(effective.temporary_storage.temp_bytes, 16_777_216);
        let spec = made.spec.expect("spec");
        assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let sandbox = &spec.containers[0];
        let context = sandbox.security_context.as_ref().expect("context");
        assert_eq!(context.allow_privilege_escalation, Some(false));
        assert_eq!(context.read_only_root_filesystem, Some(true));
        let added = context.capabilities.as_ref().and_then(|c| c.add.clone());
        assert_eq!(added, Some(vec!["SETUID".to_owned(), "SETGID".to_owned()]));
    }

    #[test]
    fn a_pid_limit_looser_than_asked_fails_the_check() {
        let request = request();
        let made = pod(&plan(), &request).expect("pod");
        let effective = effective(&made, 4096, NetworkKind::Isolated).expect("effective");
        assert!(crate::lifecycle::admission::check_effective(&request, &effective).is_err());
    }

    #[test]
    fn a_pod_without_limits_is_not_read_as_any_policy() {
        let mut made = pod(&plan(), &request()).expect("pod");
        if let Some(spec) = made.spec.as_mut() {
            spec.containers[0].resources = None;
        }
        let error = effective(&made, 256, NetworkKind::Isolated).expect_err("refused");
        assert!(error.to_string().contains("resource limits"), "{error}");
    }
}
