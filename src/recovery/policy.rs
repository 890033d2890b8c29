//! `parseSandboxRecoveryPolicy`: in-process only, or persisted through the caller's function.

use crate::input::read::{kind, object};
use crate::input::{Issue, Issues, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryPolicyKind {
    InProcess,
    /// The JS layer keeps the `persist` function itself; the core only checks it is one.
    Persisted,
}

pub fn parse_sandbox_recovery_policy(input: &Value) -> Result<RecoveryPolicyKind, Vec<Issue>> {
    let mut issues = Issues::new();
    let policy = (|| {
        let mut f = object(input, &[], &mut issues)?;
        let result = match kind(&mut f, &["in_process", "persisted"], &mut issues) {
            Some("in_process") => Some(RecoveryPolicyKind::InProcess),
            Some("persisted") => match f.required("persist", &mut issues) {
                Some(Value::Function) => Some(RecoveryPolicyKind::Persisted),
                Some(other) => {
                    issues.mismatch(
                        &f.at("persist"),
                        "expected a function returning a promise",
                        other,
                    );
                    None
                }
                None => None,
            },
            _ => {
                f.optional("persist");
                None
            }
        };
        f.finish(&mut issues);
        result
    })();
    issues.finish(policy)
}

impl RecoveryPolicyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryPolicyKind::InProcess => "in_process",
            RecoveryPolicyKind::Persisted => "persisted",
        }
    }
}
