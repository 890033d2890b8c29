//! `parseSandboxRecoveryRecord`: the strict v2 envelope that lets a new controller find what an
//! earlier one owned. Data only: parsing grants no permission to touch anything.

use crate::input::read::{array, kind, literal, object, string, token};
use crate::input::{child, Issue, IssueCode, Issues, Seg, ToValue, Value};
use crate::json::json_len;
use crate::limits::*;
use crate::policy::ids::identifier;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRecoveryRecord {
    pub backend_id: String,
    pub backend_revision: String,
    pub namespace: String,
    pub operation_id: String,
    pub sandbox_id: String,
    pub image_digest: String,
    pub policy_digest: String,
    pub configuration_digest: String,
    pub phase: Phase,
    pub authority: Authority,
    pub resources: Vec<Resource>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Reserved,
    Starting,
    Ready,
    Stopping,
    Stopped,
    Destroying,
    Destroyed,
}

const PHASES: &[&str] = &[
    "reserved",
    "starting",
    "ready",
    "stopping",
    "stopped",
    "destroying",
    "destroyed",
];

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Reserved => "reserved",
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Stopping => "stopping",
            Phase::Stopped => "stopped",
            Phase::Destroying => "destroying",
            Phase::Destroyed => "destroyed",
        }
    }

    fn from_literal(s: &str) -> Option<Self> {
        [
            Phase::Reserved,
            Phase::Starting,
            Phase::Ready,
            Phase::Stopping,
            Phase::Stopped,
            Phase::Destroying,
            Phase::Destroyed,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authority {
    Unverified,
    Verified { backend_identity: String },
}

/// What a recorded resource is to its sandbox. The record format's literals are the original's
/// (`compute`, `storage`, `export`, `network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The container that runs the process.
    Compute,
    /// The workspace volume.
    Storage,
    /// The workspace holder container: it holds the volume for transfers, and in an allowlist
    /// sandbox it is the egress gateway. Recorded as `export`, the original's name for the role.
    Holder,
    /// The sandbox's own network.
    Network,
}

const ROLES: &[&str] = &["compute", "storage", "export", "network"];

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Compute => "compute",
            Role::Storage => "storage",
            Role::Holder => "export",
            Role::Network => "network",
        }
    }

    fn from_literal(s: &str) -> Option<Self> {
        [Role::Compute, Role::Storage, Role::Holder, Role::Network]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub role: Role,
    pub name: String,
    pub identity: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    Planned,
    Creating,
    Identified { id: String, fingerprint: String },
}

pub fn parse_sandbox_recovery_record(input: &Value) -> Result<SandboxRecoveryRecord, Vec<Issue>> {
    let mut issues = Issues::new();
    let record = record(input, &mut issues);
    if let Some(record) = &record {
        let bytes = json_len(&record.to_value());
        if bytes > RECOVERY_RECORD_BYTES_MAX {
            issues.add(
                IssueCode::TooLong,
                &[],
                format!("a record must be at most {RECOVERY_RECORD_BYTES_MAX} bytes of UTF-8 JSON, received {bytes}"),
            );
        }
    }
    issues.finish(record)
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn digest(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 71, issues)?;
    if !is_sha256_digest(&s) {
        issues.add(
            IssueCode::InvalidValue,
            at,
            "must be 'sha256:' followed by 64 lowercase hex digits",
        );
        return None;
    }
    Some(s)
}

fn record(value: &Value, issues: &mut Issues) -> Option<SandboxRecoveryRecord> {
    let mut f = object(value, &[], issues)?;
    // The format decides how everything else reads: any other format stops here, before a
    // backend can mistake an older or foreign record for its own.
    let format = f.required("format", issues)?;
    match format {
        Value::String(s) if s == RECOVERY_FORMAT => {}
        Value::String(s) => {
            issues.add(
                IssueCode::UnsupportedFormat,
                &f.at("format"),
                format!("only {RECOVERY_FORMAT} records are accepted, received {s:?}; keep the controller that wrote older records for the resources they own"),
            );
            return None;
        }
        other => {
            issues.mismatch(&f.at("format"), "expected a string", other);
            return None;
        }
    }
    let tok = |f: &mut crate::input::read::Fields<'_>, name: &str, issues: &mut Issues| {
        let at = f.at(name);
        f.required(name, issues)
            .and_then(|v| token(v, &at, IDENTITY_BYTES_MAX, issues))
    };
    let id = |f: &mut crate::input::read::Fields<'_>, name: &str, issues: &mut Issues| {
        let at = f.at(name);
        f.required(name, issues)
            .and_then(|v| identifier(v, &at, issues))
    };
    let dig = |f: &mut crate::input::read::Fields<'_>, name: &str, issues: &mut Issues| {
        let at = f.at(name);
        f.required(name, issues)
            .and_then(|v| digest(v, &at, issues))
    };
    let backend_id = tok(&mut f, "backendId", issues);
    let backend_revision = tok(&mut f, "backendRevision", issues);
    let namespace = id(&mut f, "namespace", issues);
    let operation_id = id(&mut f, "operationId", issues);
    let sandbox_id = id(&mut f, "sandboxId", issues);
    let image_digest = dig(&mut f, "imageDigest", issues);
    let policy_digest = dig(&mut f, "policyDigest", issues);
    let configuration_digest = dig(&mut f, "configurationDigest", issues);
    let phase = f
        .required("phase", issues)
        .and_then(|v| literal(v, &f.at("phase"), PHASES, issues))
        .and_then(Phase::from_literal);
    let authority = f
        .required("authority", issues)
        .and_then(|v| authority(v, &f.at("authority"), issues));
    let resources = f
        .required("resources", issues)
        .and_then(|v| resources(v, &f.at("resources"), issues));
    f.finish(issues);
    Some(SandboxRecoveryRecord {
        backend_id: backend_id?,
        backend_revision: backend_revision?,
        namespace: namespace?,
        operation_id: operation_id?,
        sandbox_id: sandbox_id?,
        image_digest: image_digest?,
        policy_digest: policy_digest?,
        configuration_digest: configuration_digest?,
        phase: phase?,
        authority: authority?,
        resources: resources?,
    })
}

fn authority(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Authority> {
    let mut f = object(value, at, issues)?;
    let result = match kind(&mut f, &["unverified", "verified"], issues) {
        Some("unverified") => Some(Authority::Unverified),
        Some("verified") => f
            .required("backendIdentity", issues)
            .and_then(|v| {
                token(
                    v,
                    &f.at("backendIdentity"),
                    BACKEND_IDENTITY_BYTES_MAX,
                    issues,
                )
            })
            .map(|backend_identity| Authority::Verified { backend_identity }),
        _ => {
            f.optional("backendIdentity");
            None
        }
    };
    f.finish(issues);
    result
}

fn resources(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Vec<Resource>> {
    let items = array(value, at, RECOVERY_RESOURCES_MAX, issues)?;
    let before = issues.len();
    let mut out: Vec<Resource> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        if let Some(resource) = resource(item, &child(at, index), issues) {
            if out.iter().any(|r| r.role == resource.role) {
                issues.add(
                    IssueCode::Duplicate,
                    &child(&child(at, index), "role"),
                    format!("role '{}' appears more than once", resource.role.as_str()),
                );
            } else {
                out.push(resource);
            }
        }
    }
    (issues.len() == before).then_some(out)
}

fn resource(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Resource> {
    let mut f = object(value, at, issues)?;
    let role = f
        .required("role", issues)
        .and_then(|v| literal(v, &f.at("role"), ROLES, issues))
        .and_then(Role::from_literal);
    let name = f
        .required("name", issues)
        .and_then(|v| token(v, &f.at("name"), IDENTITY_BYTES_MAX, issues));
    let identity = f
        .required("identity", issues)
        .and_then(|v| identity(v, &f.at("identity"), issues));
    f.finish(issues);
    Some(Resource {
        role: role?,
        name: name?,
        identity: identity?,
    })
}

fn identity(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Identity> {
    let mut f = object(value, at, issues)?;
    let result = match kind(&mut f, &["planned", "creating", "identified"], issues) {
        Some("planned") => Some(Identity::Planned),
        Some("creating") => Some(Identity::Creating),
        Some("identified") => {
            let id = f
                .required("id", issues)
                .and_then(|v| token(v, &f.at("id"), IDENTITY_BYTES_MAX, issues));
            let fingerprint = f
                .required("fingerprint", issues)
                .and_then(|v| digest(v, &f.at("fingerprint"), issues));
            match (id, fingerprint) {
                (Some(id), Some(fingerprint)) => Some(Identity::Identified { id, fingerprint }),
                _ => None,
            }
        }
        _ => {
            f.optional("id");
            f.optional("fingerprint");
            None
        }
    };
    f.finish(issues);
    result
}

impl ToValue for SandboxRecoveryRecord {
    fn to_value(&self) -> Value {
        let authority = match &self.authority {
            Authority::Unverified => Value::object([("kind", Value::string("unverified"))]),
            Authority::Verified { backend_identity } => Value::object([
                ("kind", Value::string("verified")),
                ("backendIdentity", backend_identity.to_value()),
            ]),
        };
        Value::object([
            ("format", Value::string(RECOVERY_FORMAT)),
            ("backendId", self.backend_id.to_value()),
            ("backendRevision", self.backend_revision.to_value()),
            ("namespace", self.namespace.to_value()),
            ("operationId", self.operation_id.to_value()),
            ("sandboxId", self.sandbox_id.to_value()),
            ("imageDigest", self.image_digest.to_value()),
            ("policyDigest", self.policy_digest.to_value()),
            ("configurationDigest", self.configuration_digest.to_value()),
            ("phase", Value::string(self.phase.as_str())),
            ("authority", authority),
            (
                "resources",
                Value::Array(self.resources.iter().map(ToValue::to_value).collect()),
            ),
        ])
    }
}

impl ToValue for Resource {
    fn to_value(&self) -> Value {
        let identity = match &self.identity {
            Identity::Planned => Value::object([("kind", Value::string("planned"))]),
            Identity::Creating => Value::object([("kind", Value::string("creating"))]),
            Identity::Identified { id, fingerprint } => Value::object([
                ("kind", Value::string("identified")),
                ("id", id.to_value()),
                ("fingerprint", fingerprint.to_value()),
            ]),
        };
        Value::object([
            ("role", Value::string(self.role.as_str())),
            ("name", self.name.to_value()),
            ("identity", identity),
        ])
    }
}

/// Test support: a reserved record with one compute resource in the given identity.
#[cfg(test)]
pub fn test_record(identity: Identity) -> SandboxRecoveryRecord {
    SandboxRecoveryRecord {
        backend_id: "test".into(),
        backend_revision: "1".into(),
        namespace: "ns".into(),
        operation_id: "op".into(),
        sandbox_id: "sbx".into(),
        image_digest: format!("sha256:{}", "a".repeat(64)),
        policy_digest: format!("sha256:{}", "b".repeat(64)),
        configuration_digest: format!("sha256:{}", "c".repeat(64)),
        phase: Phase::Reserved,
        authority: Authority::Unverified,
        resources: vec![Resource {
            role: Role::Compute,
            name: "compute".into(),
            identity,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list, with};
    use serde_json::json;

    fn valid() -> Value {
        let d = |c: &str| format!("sha256:{}", c.repeat(64));
        from_json(json!({
            "format": RECOVERY_FORMAT, "backendId": "docker", "backendRevision": "1", "namespace": "ns",
            "operationId": "op", "sandboxId": "sbx", "imageDigest": d("a"), "policyDigest": d("b"),
            "configurationDigest": d("c"), "phase": "starting", "authority": { "kind": "unverified" },
            "resources": [
                { "role": "compute", "name": "c", "identity": { "kind": "creating" } },
                { "role": "storage", "name": "s", "identity": { "kind": "identified", "id": "v", "fingerprint": d("d") } }
            ]
        }))
    }

    #[test]
    fn round_trips() {
        let record = parse_sandbox_recovery_record(&valid()).expect("valid record");
        assert_eq!(
            parse_sandbox_recovery_record(&record.to_value()).as_ref(),
            Ok(&record)
        );
        assert_eq!(json_len(&record.to_value()), json_len(&valid()));
        assert_eq!(record.phase, Phase::Starting);
    }

    #[test]
    fn other_formats_stop_before_anything_else() {
        let v1 = with(
            valid(),
            "format",
            Value::string("agenai.sandbox-recovery.v1"),
        );
        let v1 = with(v1, "extra", Value::Null);
        assert_eq!(
            issue_list(parse_sandbox_recovery_record(&v1)),
            vec![("unsupported_format", "format".into())]
        );
    }

    #[test]
    fn digests_and_roles() {
        assert!(is_sha256_digest(&format!("sha256:{}", "0".repeat(64))));
        assert!(!is_sha256_digest(&format!("sha256:{}", "G".repeat(64))));
        assert!(!is_sha256_digest(&format!("sha512:{}", "0".repeat(64))));
        let dup = with(
            valid(),
            "resources",
            from_json(json!([
                { "role": "compute", "name": "a", "identity": { "kind": "planned" } },
                { "role": "compute", "name": "b", "identity": { "kind": "planned" } }
            ])),
        );
        assert_eq!(
            issue_list(parse_sandbox_recovery_record(&dup)),
            vec![("duplicate", "resources[1].role".into())]
        );
    }
}
