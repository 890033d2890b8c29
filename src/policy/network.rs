//! The network kind: `isolated` (no interfaces but loopback) or `outbound` (broad egress).

use crate::input::read::bare_kind;
use crate::input::{Issues, Seg, ToValue, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    Isolated,
    Outbound,
}

pub const NETWORK_KINDS: &[&str] = &["isolated", "outbound"];

impl NetworkKind {
    pub fn from_literal(s: &str) -> Option<Self> {
        match s {
            "isolated" => Some(NetworkKind::Isolated),
            "outbound" => Some(NetworkKind::Outbound),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NetworkKind::Isolated => "isolated",
            NetworkKind::Outbound => "outbound",
        }
    }
}

/// Reads `{ kind: 'isolated' | 'outbound' }`.
pub fn network(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<NetworkKind> {
    bare_kind(value, path, NETWORK_KINDS, issues).and_then(NetworkKind::from_literal)
}

impl ToValue for NetworkKind {
    fn to_value(&self) -> Value {
        Value::object([("kind", Value::string(self.as_str()))])
    }
}
