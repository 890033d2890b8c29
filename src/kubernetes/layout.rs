//! The names, labels and identity of a Kubernetes sandbox's objects.

use std::collections::BTreeMap;

pub const BACKEND_ID: &str = "native-sandbox.kubernetes";
pub const BACKEND_REVISION: &str = "1";

pub const LABEL_SCOPE: &str = "native-sandbox.dev/scope";
pub const LABEL_SANDBOX: &str = "native-sandbox.dev/sandbox";
pub const LABEL_OPERATION: &str = "native-sandbox.dev/operation";
pub const LABEL_ROLE: &str = "native-sandbox.dev/role";
/// An annotation (a digest is longer than a label value may be).
pub const ANNOTATION_CONFIGURATION: &str = "native-sandbox.dev/configuration";

/// The pod's containers.
pub const HELPER_CONTAINER: &str = "helper";
pub const SANDBOX_CONTAINER: &str = "sandbox";
/// Holds the pod (and so the workspace) after the sandbox container ended; transfers run in it.
pub const WORKSPACE_CONTAINER: &str = "workspace";
/// Where the init container writes the helper, read-only in the sandbox container.
pub const HELPER_DIRECTORY: &str = "/native-sandbox";
pub const HELPER_PATH: &str = "/native-sandbox/helper";

/// The one name every object of a sandbox has (pod, NetworkPolicy): a DNS label, since the scope
/// is at most 37 characters and a sandbox id 20.
pub fn object_name(scope: &str, sandbox_id: &str) -> String {
    format!("nsbx-{scope}-{sandbox_id}")
}

pub fn labels(
    scope: &str,
    sandbox_id: &str,
    operation_id: &str,
    role: &str,
) -> BTreeMap<String, String> {
    [
        (LABEL_SCOPE, scope),
        (LABEL_SANDBOX, sandbox_id),
        (LABEL_OPERATION, operation_id),
        (LABEL_ROLE, role),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Whether `found` carries exactly the labels of the sandbox's object of `role`.
pub fn labels_match(
    found: Option<&BTreeMap<String, String>>,
    scope: &str,
    sandbox_id: &str,
    role: &str,
) -> bool {
    let Some(found) = found else {
        return false;
    };
    found.get(LABEL_SCOPE).map(String::as_str) == Some(scope)
        && found.get(LABEL_SANDBOX).map(String::as_str) == Some(sandbox_id)
        && found.get(LABEL_ROLE).map(String::as_str) == Some(role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_scope_makes_a_dns_label() {
        let name = object_name(&"s".repeat(37), "sbx-0123456789abcdef");
        assert_eq!(name.len(), 63);
        assert!(crate::kubernetes::options::is_dns_label(&name));
    }

    #[test]
    fn labels_name_scope_sandbox_and_role() {
        let made = labels("ci", "sbx-1", "op-1", "compute");
        assert!(labels_match(Some(&made), "ci", "sbx-1", "compute"));
        assert!(!labels_match(Some(&made), "other", "sbx-1", "compute"));
        assert!(!labels_match(Some(&made), "ci", "sbx-2", "compute"));
        assert!(!labels_match(Some(&made), "ci", "sbx-1", "network"));
        assert!(!labels_match(None, "ci", "sbx-1", "compute"));
    }
}
