//! `createKubernetesSandboxBackend(options)`: parsed strictly before anything talks to a cluster.

use crate::input::read::{literal, object, positive_integer, string};
use crate::input::{Issue, IssueCode, Issues, Seg, Value};
use crate::paths::{self, Anchor};

/// Where the cluster is, as kubectl finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSource {
    /// A kubeconfig file; else the in-cluster service account, else `KUBECONFIG` or
    /// `~/.kube/config`.
    pub kubeconfig: Option<String>,
    /// A context of that kubeconfig; else its current context.
    pub context: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesOptions {
    pub cluster: ClusterSource,
    /// The Kubernetes namespace the sandboxes' pods live in.
    pub namespace: String,
    /// The ownership scope: reconcile and cleanup never touch another.
    pub scope: String,
    /// The guest image, as the nodes' runtime names it.
    pub image: String,
    pub image_pull_policy: &'static str,
    /// `uid:gid` of the guest's commands.
    pub user: String,
    pub runtime_class_name: Option<String>,
    /// Whether the cluster enforces NetworkPolicy: only then is `isolated` offered.
    pub network_policy_enforced: bool,
    /// The cluster's per-pod PID limit (the kubelet's `podPidsLimit`), which no pod can ask
    /// for itself: the effective `resources.pids` of every sandbox. Without it, no sandbox
    /// starts (nothing would bound its processes).
    pub pod_pids_limit: Option<u64>,
    /// The nodes' architecture the pods are placed on, which picks the guest helper.
    pub architecture: &'static str,
}

pub const DEFAULT_USER: &str = "65532:65532";
const ARCHITECTURES: &[&str] = &["amd64", "arm64"];
const PULL_POLICIES: &[&str] = &["IfNotPresent", "Never", "Always"];

pub fn parse_kubernetes_options(input: &Value) -> Result<KubernetesOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = options(input, &mut issues);
    issues.finish(options)
}

fn options(value: &Value, issues: &mut Issues) -> Option<KubernetesOptions> {
    let mut f = object(value, &[], issues)?;
    let namespace = f
        .required("namespace", issues)
        .and_then(|v| dns_label(v, &f.at("namespace"), issues));
    let scope = f
        .required("scope", issues)
        .and_then(|v| scope(v, &f.at("scope"), issues));
    let image = f
        .required("image", issues)
        .and_then(|v| image(v, &f.at("image"), issues));
    let kubeconfig = match f.optional("kubeconfig") {
        None => Some(None),
        Some(v) => paths::path(v, &f.at("kubeconfig"), Anchor::Host, issues).map(Some),
    };
    let context = match f.optional("context") {
        None => Some(None),
        Some(v) => name(v, &f.at("context"), issues).map(Some),
    };
    let image_pull_policy = match f.optional("imagePullPolicy") {
        None => Some("IfNotPresent"),
        Some(v) => literal(v, &f.at("imagePullPolicy"), PULL_POLICIES, issues),
    };
    let user = match f.optional("user") {
        None => Some(DEFAULT_USER.to_owned()),
        Some(v) => user(v, &f.at("user"), issues),
    };
    let runtime_class_name = match f.optional("runtimeClassName") {
        None => Some(None),
        Some(v) => dns_subdomain(v, &f.at("runtimeClassName"), issues).map(Some),
    };
    let network_policy_enforced = match f.optional("networkPolicy") {
        None => Some(false),
        Some(v) => literal(
            v,
            &f.at("networkPolicy"),
            &["enforced", "not_enforced"],
            issues,
        )
        .map(|kind| kind == "enforced"),
    };
    let pod_pids_limit = match f.optional("podPidsLimit") {
        None => Some(None),
        Some(v) => positive_integer(v, &f.at("podPidsLimit"), issues).map(Some),
    };
    let architecture = match f.optional("architecture") {
        None => Some("amd64"),
        Some(v) => literal(v, &f.at("architecture"), ARCHITECTURES, issues),
    };
    f.finish(issues);
    Some(KubernetesOptions {
        cluster: ClusterSource {
            kubeconfig: kubeconfig?,
            context: context?,
        },
        namespace: namespace?,
        scope: scope?,
        image: image?,
        image_pull_policy: image_pull_policy?,
        user: user?,
        runtime_class_name: runtime_class_name?,
        network_policy_enforced: network_policy_enforced?,
        pod_pids_limit: pod_pids_limit?,
        architecture: architecture?,
    })
}

/// A DNS-1123 label: what a namespace is.
fn dns_label(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 63, issues)?;
    if is_dns_label(&s) {
        return Some(s);
    }
    issues.add(
        IssueCode::InvalidValue,
        at,
        "must be a DNS label: 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
    );
    None
}

/// A scope names the pods (`nsbx-<scope>-<sandbox id>`, at most 63 characters with the id's 20)
/// and is a label value: a DNS label of at most 37 characters.
fn scope(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 37, issues)?;
    if is_dns_label(&s) {
        return Some(s);
    }
    issues.add(
        IssueCode::InvalidValue,
        at,
        "must be 1 to 37 lowercase letters, digits and '-', starting and ending with a letter or digit",
    );
    None
}

fn dns_subdomain(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 253, issues)?;
    if !s.is_empty() && s.split('.').all(is_dns_label) {
        return Some(s);
    }
    issues.add(
        IssueCode::InvalidValue,
        at,
        "must be a DNS subdomain: dot-separated DNS labels of lowercase letters, digits and '-'",
    );
    None
}

pub fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(inner)
        && bytes.last().is_some_and(inner)
        && bytes.iter().all(|b| inner(b) || *b == b'-')
}

/// A kubeconfig context's name: any non-empty printable string.
fn name(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 253, issues)?;
    if s.is_empty() || s.chars().any(char::is_control) {
        issues.add(
            IssueCode::InvalidValue,
            at,
            "must be a non-empty name without control characters",
        );
        return None;
    }
    Some(s)
}

fn image(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 512, issues)?;
    if s.is_empty() || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        issues.add(
            IssueCode::InvalidValue,
            at,
            "must be an image reference without whitespace",
        );
        return None;
    }
    Some(s)
}

fn user(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 64, issues)?;
    let numeric = |part: &str| {
        !part.is_empty() && part.len() <= 10 && part.bytes().all(|b| b.is_ascii_digit())
    };
    match s.split_once(':') {
        Some((uid, gid))
            if numeric(uid) && numeric(gid) && uid.parse::<u32>().is_ok_and(|u| u != 0) =>
        {
            Some(s)
        }
        _ => {
            issues.add(
                IssueCode::InvalidValue,
                at,
                "must be a numeric 'uid:gid' of a user other than root, such as '65532:65532'",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list};

    fn parse(json: &str) -> Result<KubernetesOptions, Vec<Issue>> {
        parse_kubernetes_options(&from_json(serde_json::from_str(json).expect("json")))
    }

    #[test]
    fn the_smallest_options_take_the_defaults() {
        let parsed =
            parse(r#"{"namespace":"sandboxes","scope":"ci","image":"busybox:1"}"#).expect("parsed");
        assert_eq!(parsed.cluster.kubeconfig, None);
        assert_eq!(parsed.user, DEFAULT_USER);
        assert_eq!(parsed.image_pull_policy, "IfNotPresent");
        assert!(!parsed.network_policy_enforced);
        assert_eq!(parsed.pod_pids_limit, None);
        assert_eq!(parsed.architecture, "amd64");
    }

    #[test]
    fn every_bad_field_is_named() {
        let issues = parse(
            r#"{"namespace":"Bad_NS","scope":"-x","image":"a b","kubeconfig":"rel/path",
                "context":"","user":"0:0","runtimeClassName":"G..","networkPolicy":"yes",
                "podPidsLimit":0,"architecture":"riscv","extra":1}"#,
        );
        let named: Vec<String> = issue_list(issues)
            .into_iter()
            .map(|(_, path)| path)
            .collect();
        for field in [
            "namespace",
            "scope",
            "image",
            "kubeconfig",
            "context",
            "user",
            "runtimeClassName",
            "networkPolicy",
            "podPidsLimit",
            "architecture",
            "extra",
        ] {
            assert!(
                named.iter().any(|path| path == field),
                "{field} not named in {named:?}"
            );
        }
    }

    #[test]
    fn dns_labels() {
        for good in ["a", "a-b", "0", "abc123"] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
