//! `parseSandboxEffectivePolicy`: what a backend observed the engine apply after startup.

use super::network::{network, NetworkPolicy};
use super::resources::{resources, temporary_storage, Resources, TemporaryStorage};
use crate::input::read::{kind, object, positive_integer};
use crate::input::{Issue, Issues, Seg, ToValue, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxEffectivePolicy {
    pub resources: Resources,
    pub temporary_storage: TemporaryStorage,
    pub network: NetworkPolicy,
    pub workspace_disk_quota: EffectiveDiskQuota,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectiveDiskQuota {
    NotRequested,
    Enforced { bytes: u64 },
}

pub fn parse_sandbox_effective_policy(input: &Value) -> Result<SandboxEffectivePolicy, Vec<Issue>> {
    let mut issues = Issues::new();
    let effective = effective(input, &[], &mut issues);
    issues.finish(effective)
}

fn effective(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<SandboxEffectivePolicy> {
    let mut f = object(value, path, issues)?;
    let resources = f
        .required("resources", issues)
        .and_then(|v| resources(v, &f.at("resources"), issues));
    let temporary_storage = f
        .required("temporaryStorage", issues)
        .and_then(|v| temporary_storage(v, &f.at("temporaryStorage"), issues));
    let network = f
        .required("network", issues)
        .and_then(|v| network(v, &f.at("network"), issues));
    let quota = f
        .required("workspaceDiskQuota", issues)
        .and_then(|v| disk_quota(v, &f.at("workspaceDiskQuota"), issues));
    f.finish(issues);
    Some(SandboxEffectivePolicy {
        resources: resources?,
        temporary_storage: temporary_storage?,
        network: network?,
        workspace_disk_quota: quota?,
    })
}

fn disk_quota(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<EffectiveDiskQuota> {
    let mut f = object(value, path, issues)?;
    let result = match kind(&mut f, &["not_requested", "enforced"], issues) {
        Some("not_requested") => Some(EffectiveDiskQuota::NotRequested),
        Some("enforced") => f
            .required("bytes", issues)
            .and_then(|v| positive_integer(v, &f.at("bytes"), issues))
            .map(|bytes| EffectiveDiskQuota::Enforced { bytes }),
        _ => {
            f.optional("bytes");
            None
        }
    };
    f.finish(issues);
    result
}

impl ToValue for SandboxEffectivePolicy {
    fn to_value(&self) -> Value {
        let quota = match self.workspace_disk_quota {
            EffectiveDiskQuota::NotRequested => {
                Value::object([("kind", Value::string("not_requested"))])
            }
            EffectiveDiskQuota::Enforced { bytes } => Value::object([
                ("kind", Value::string("enforced")),
                ("bytes", bytes.to_value()),
            ]),
        };
        Value::object([
            ("resources", self.resources.to_value()),
            ("temporaryStorage", self.temporary_storage.to_value()),
            ("network", self.network.to_value()),
            ("workspaceDiskQuota", quota),
        ])
    }
}
