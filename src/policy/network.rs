//! The network policy: `isolated` (no interfaces but loopback), `outbound` (broad egress), or
//! `allowlist` (egress only to the listed hosts; see `egress.rs` for the entries).

use super::egress::{allow_private_entries, egress_hosts, EgressHost};
use crate::input::read::{kind, object};
use crate::input::{Issues, Seg, ToValue, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    Isolated,
    Outbound,
    Allowlist,
}

pub const NETWORK_KINDS: &[&str] = &["isolated", "outbound", "allowlist"];

impl NetworkKind {
    pub fn from_literal(s: &str) -> Option<Self> {
        match s {
            "isolated" => Some(NetworkKind::Isolated),
            "outbound" => Some(NetworkKind::Outbound),
            "allowlist" => Some(NetworkKind::Allowlist),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NetworkKind::Isolated => "isolated",
            NetworkKind::Outbound => "outbound",
            NetworkKind::Allowlist => "allowlist",
        }
    }
}

impl ToValue for NetworkKind {
    fn to_value(&self) -> Value {
        Value::object([("kind", Value::string(self.as_str()))])
    }
}

/// A request's network: its kind and, for `allowlist`, the hosts (empty for the other kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub kind: NetworkKind,
    pub hosts: Vec<EgressHost>,
}

impl NetworkPolicy {
    pub fn of(kind: NetworkKind) -> Self {
        Self {
            kind,
            hosts: Vec::new(),
        }
    }
}

/// A policy compares with a bare kind by its kind.
impl PartialEq<NetworkKind> for NetworkPolicy {
    fn eq(&self, kind: &NetworkKind) -> bool {
        self.kind == *kind
    }
}

/// Reads `{ kind: 'isolated' | 'outbound' }` or
/// `{ kind: 'allowlist', hosts: [...], allowPrivate?: [...] }`.
pub fn network(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<NetworkPolicy> {
    let mut f = object(value, path, issues)?;
    let found = kind(&mut f, NETWORK_KINDS, issues).and_then(NetworkKind::from_literal);
    let hosts = match found {
        Some(NetworkKind::Allowlist) => {
            let mut hosts = f
                .required("hosts", issues)
                .and_then(|v| egress_hosts(v, &f.at("hosts"), issues));
            // Read whether or not `hosts` parsed, so every bad string is named at once.
            let private_good = match f.optional("allowPrivate") {
                None => true,
                Some(v) => {
                    allow_private_entries(v, &f.at("allowPrivate"), hosts.as_deref_mut(), issues)
                }
            };
            hosts.filter(|_| private_good)
        }
        Some(_) => Some(Vec::new()),
        // An unknown kind is the issue; its other fields are not unknown ones too.
        None => {
            f.optional("hosts");
            f.optional("allowPrivate");
            None
        }
    };
    f.finish(issues);
    Some(NetworkPolicy {
        kind: found?,
        hosts: hosts?,
    })
}

/// An allowlist renders its entries as strings (`hosts`, the contract's `string[]`) and, only
/// when some entry admits private addresses, names those in `allowPrivate`.
impl ToValue for NetworkPolicy {
    fn to_value(&self) -> Value {
        if self.kind != NetworkKind::Allowlist {
            return self.kind.to_value();
        }
        let mut fields = vec![
            ("kind", Value::string(self.kind.as_str())),
            (
                "hosts",
                Value::Array(self.hosts.iter().map(ToValue::to_value).collect()),
            ),
        ];
        let private: Vec<Value> = self
            .hosts
            .iter()
            .filter(|h| h.allow_private)
            .map(ToValue::to_value)
            .collect();
        if !private.is_empty() {
            fields.push(("allowPrivate", Value::Array(private)));
        }
        Value::object(fields)
    }
}
