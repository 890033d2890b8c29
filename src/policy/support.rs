//! `parseSandboxSupport`: what a backend declares it can enforce, before any request reaches it.

use super::network::{NetworkKind, NETWORK_KINDS};
use crate::input::read::{array, boolean, literal, object, token};
use crate::input::{child, Issue, IssueCode, Issues, Seg, ToValue, Value};
use crate::limits::IDENTITY_BYTES_MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    pub backend_id: String,
    pub backend_revision: String,
    pub network: Vec<NetworkKind>,
    /// The execution kinds the backend enforces: `until_stopped` and, when it can, `deadline`.
    pub execution: Vec<&'static str>,
    pub workspace_disk_quota: bool,
    /// Whether sandboxes run commands and file calls beside their process (`exec`, `run`,
    /// `files`); absent in a support record reads as `false`.
    pub sessions: bool,
}

pub const EXECUTION_KINDS: &[&str] = &["until_stopped", "deadline"];

pub fn parse_sandbox_support(input: &Value) -> Result<SandboxSupport, Vec<Issue>> {
    let mut issues = Issues::new();
    let support = support(input, &[], &mut issues);
    issues.finish(support)
}

fn support(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<SandboxSupport> {
    let mut f = object(value, path, issues)?;
    let backend_id = f
        .required("backendId", issues)
        .and_then(|v| token(v, &f.at("backendId"), IDENTITY_BYTES_MAX, issues));
    let backend_revision = f
        .required("backendRevision", issues)
        .and_then(|v| token(v, &f.at("backendRevision"), IDENTITY_BYTES_MAX, issues));
    let network = f
        .required("network", issues)
        .and_then(|v| unique_literals(v, &f.at("network"), NETWORK_KINDS, issues))
        .map(|kinds| {
            kinds
                .into_iter()
                .filter_map(NetworkKind::from_literal)
                .collect()
        });
    let execution = f
        .required("execution", issues)
        .and_then(|v| unique_literals(v, &f.at("execution"), EXECUTION_KINDS, issues));
    let workspace_disk_quota = f
        .required("workspaceDiskQuota", issues)
        .and_then(|v| boolean(v, &f.at("workspaceDiskQuota"), issues));
    let sessions = match f.optional("sessions") {
        Some(v) => boolean(v, &f.at("sessions"), issues),
        None => Some(false),
    };
    f.finish(issues);
    Some(SandboxSupport {
        backend_id: backend_id?,
        backend_revision: backend_revision?,
        network: network?,
        execution: execution?,
        workspace_disk_quota: workspace_disk_quota?,
        sessions: sessions?,
    })
}

/// A non-empty array of distinct literals from `allowed`.
fn unique_literals(
    value: &Value,
    path: &[Seg],
    allowed: &[&'static str],
    issues: &mut Issues,
) -> Option<Vec<&'static str>> {
    let items = array(value, path, allowed.len(), issues)?;
    if items.is_empty() {
        issues.add(IssueCode::TooSmall, path, "must name at least one kind");
        return None;
    }
    let before = issues.len();
    let mut out: Vec<&'static str> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let at = child(path, index);
        if let Some(kind) = literal(item, &at, allowed, issues) {
            if out.contains(&kind) {
                issues.add(
                    IssueCode::Duplicate,
                    &at,
                    format!("'{kind}' appears more than once"),
                );
            } else {
                out.push(kind);
            }
        }
    }
    (issues.len() == before).then_some(out)
}

impl ToValue for SandboxSupport {
    fn to_value(&self) -> Value {
        Value::object([
            ("backendId", self.backend_id.to_value()),
            ("backendRevision", self.backend_revision.to_value()),
            (
                "network",
                Value::Array(
                    self.network
                        .iter()
                        .map(|k| Value::string(k.as_str()))
                        .collect(),
                ),
            ),
            (
                "execution",
                Value::Array(self.execution.iter().map(|k| Value::string(*k)).collect()),
            ),
            ("workspaceDiskQuota", Value::Bool(self.workspace_disk_quota)),
            ("sessions", Value::Bool(self.sessions)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list};
    use serde_json::json;

    #[test]
    fn support_lists() {
        let ok = from_json(
            json!({ "backendId": "d", "backendRevision": "1", "network": ["isolated"], "execution": ["until_stopped", "deadline"], "workspaceDiskQuota": false }),
        );
        let support = parse_sandbox_support(&ok).expect("valid support");
        assert_eq!(support.network, vec![NetworkKind::Isolated]);
        let bad = from_json(
            json!({ "backendId": "", "backendRevision": "1", "network": ["outbound", "outbound"], "execution": [], "workspaceDiskQuota": 0 }),
        );
        assert_eq!(
            issue_list(parse_sandbox_support(&bad)),
            vec![
                ("too_small", "backendId".into()),
                ("duplicate", "network[1]".into()),
                ("too_small", "execution".into()),
                ("invalid_type", "workspaceDiskQuota".into()),
            ]
        );
    }
}
