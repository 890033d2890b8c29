//! Identifiers that name engine objects: sandbox, process and operation ids, namespaces.

use crate::input::read::string;
use crate::input::{Issue, IssueCode, Issues, Seg, Value};
use crate::limits::ID_BYTES_MAX;

/// An ASCII identifier: a letter or digit, then letters, digits, `_`, `.` or `-`; at most
/// 128 bytes. The same alphabet the engine allows in object names, so ids can name them.
pub fn identifier(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, path, ID_BYTES_MAX, issues)?;
    let mut chars = s.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !(first_ok && rest_ok) {
        issues.add(
            IssueCode::InvalidValue,
            path,
            "must start with a letter or digit and hold only letters, digits, '_', '.' and '-'",
        );
        return None;
    }
    Some(s)
}

pub fn parse_sandbox_id(input: &Value) -> Result<String, Vec<Issue>> {
    let mut issues = Issues::new();
    let id = identifier(input, &[], &mut issues);
    issues.finish(id)
}

pub fn parse_sandbox_process_id(input: &Value) -> Result<String, Vec<Issue>> {
    parse_sandbox_id(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> bool {
        parse_sandbox_id(&Value::string(s)).is_ok()
    }

    #[test]
    fn identifiers() {
        assert!(ok("sbx-1.a_b"));
        assert!(ok(&"a".repeat(128)));
        assert!(!ok(&"a".repeat(129)));
        assert!(!ok(""));
        assert!(!ok("-a"));
        assert!(!ok("a/b"));
        assert!(!ok("ä"));
        assert!(parse_sandbox_id(&Value::Number(1.0)).is_err());
    }
}
