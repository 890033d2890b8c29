//! `parseSandboxProcessSpec`: one literal process recipe. No shell, no inherited environment.

use crate::input::read::{array, object, string};
use crate::input::{child, Issue, IssueCode, Issues, Seg, ToValue, Value};
use crate::json::json_len;
use crate::limits::*;
use crate::paths::{path, Anchor};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxProcessSpec {
    pub executable: String,
    pub args: Vec<String>,
    /// Explicit environment in the caller's order; names are unique by construction.
    pub env: Vec<(String, String)>,
    pub cwd: String,
    /// Whether the process's stdin stays open across attachments, so another controller can
    /// attach again after this one is gone (a daemon served by the agentproto provider). Never
    /// read from a recipe: the parser sets `false`, and closing stdin then delivers EOF. A
    /// reattachable process never sees EOF from its controller (ending stdin only closes this
    /// attachment's side); a stop ends it.
    pub reattachable: bool,
}

pub fn parse_sandbox_process_spec(input: &Value) -> Result<SandboxProcessSpec, Vec<Issue>> {
    let mut issues = Issues::new();
    let spec = spec(input, &[], &mut issues);
    if let Some(spec) = &spec {
        let bytes = json_len(&spec.to_value());
        if bytes > PROCESS_RECIPE_BYTES_MAX {
            issues.add(
                IssueCode::TooLong,
                &[],
                format!("the recipe must be at most {PROCESS_RECIPE_BYTES_MAX} bytes as JSON, received {bytes}"),
            );
        }
    }
    issues.finish(spec)
}

fn spec(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<SandboxProcessSpec> {
    let mut f = object(value, at, issues)?;
    let executable = f
        .required("executable", issues)
        .and_then(|v| path(v, &f.at("executable"), Anchor::Guest, issues));
    let args = f
        .required("args", issues)
        .and_then(|v| args(v, &f.at("args"), issues));
    let env = f
        .required("env", issues)
        .and_then(|v| env(v, &f.at("env"), issues));
    let cwd = f
        .required("cwd", issues)
        .and_then(|v| path(v, &f.at("cwd"), Anchor::Guest, issues));
    f.finish(issues);
    Some(SandboxProcessSpec {
        executable: executable?,
        args: args?,
        env: env?,
        cwd: cwd?,
        reattachable: false,
    })
}

fn args(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Vec<String>> {
    let items = array(value, at, PROCESS_ARGS_MAX, issues)?;
    let before = issues.len();
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let at = child(at, index);
        if let Some(arg) = string(item, &at, PROCESS_RECIPE_BYTES_MAX, issues) {
            if arg.contains('\0') {
                issues.add(
                    IssueCode::InvalidValue,
                    &at,
                    "arguments must not contain NUL",
                );
            } else {
                out.push(arg);
            }
        }
    }
    (issues.len() == before).then_some(out)
}

fn env(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Vec<(String, String)>> {
    let Value::Object(entries) = value else {
        issues.mismatch(
            at,
            "expected a plain object of strings (an object literal or a copy such as { ...process.env }: a Map, a class instance or an exotic object is not read)",
            value,
        );
        return None;
    };
    if entries.len() > PROCESS_ENV_ENTRIES_MAX {
        issues.add(
            IssueCode::TooLong,
            at,
            format!(
                "must have at most {PROCESS_ENV_ENTRIES_MAX} entries, received {}",
                entries.len()
            ),
        );
        return None;
    }
    let before = issues.len();
    let mut out = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let at = child(at, name.as_str());
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            issues.add(
                IssueCode::InvalidValue,
                &at,
                "environment names must be non-empty, without '=' or NUL",
            );
            continue;
        }
        if let Some(value) = string(value, &at, PROCESS_ENV_VALUE_BYTES_MAX, issues) {
            if value.contains('\0') {
                issues.add(
                    IssueCode::InvalidValue,
                    &at,
                    "environment values must not contain NUL",
                );
            } else {
                out.push((name.clone(), value));
            }
        }
    }
    (issues.len() == before).then_some(out)
}

impl ToValue for SandboxProcessSpec {
    fn to_value(&self) -> Value {
        Value::object([
            ("executable", self.executable.to_value()),
            ("args", self.args.to_value()),
            (
                "env",
                Value::object(self.env.iter().map(|(k, v)| (k.clone(), v.to_value()))),
            ),
            ("cwd", self.cwd.to_value()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list};
    use serde_json::json;

    fn issues_of(input: serde_json::Value) -> Vec<(&'static str, String)> {
        issue_list(parse_sandbox_process_spec(&from_json(input)))
    }

    #[test]
    fn literal_recipe() {
        let spec = parse_sandbox_process_spec(&from_json(json!({
            "executable": "/bin/sh", "args": ["-c", "true"], "env": { "B": "2", "A": "1" }, "cwd": "/sandbox/workspace"
        })))
        .expect("valid spec");
        let mut env = spec.env.clone();
        env.sort();
        assert_eq!(
            env,
            vec![("A".into(), "1".into()), ("B".into(), "2".into())]
        );
        assert_eq!(parse_sandbox_process_spec(&spec.to_value()), Ok(spec));
    }

    #[test]
    fn every_issue_with_its_path() {
        let args: Vec<String> = (0..129).map(|i| i.to_string()).collect();
        assert_eq!(
            issues_of(
                json!({ "executable": "sh", "args": args, "env": { "A=B": "x", "C": 1 }, "cwd": "/a/", "shell": true })
            ),
            vec![
                ("invalid_path", "executable".into()),
                ("too_long", "args".into()),
                ("invalid_value", "env.A=B".into()),
                ("invalid_type", "env.C".into()),
                ("invalid_path", "cwd".into()),
                ("unknown_field", "shell".into()),
            ]
        );
    }

    #[test]
    fn env_value_bound_and_recipe_size() {
        let at = "x".repeat(PROCESS_ENV_VALUE_BYTES_MAX);
        let ok = json!({ "executable": "/a", "args": [], "env": { "V": at }, "cwd": "/" });
        assert!(parse_sandbox_process_spec(&from_json(ok)).is_ok());
        let past = "x".repeat(PROCESS_ENV_VALUE_BYTES_MAX + 1);
        assert_eq!(
            issues_of(json!({ "executable": "/a", "args": [], "env": { "V": past }, "cwd": "/" })),
            vec![("too_long", "env.V".into())]
        );
        let big: serde_json::Map<String, serde_json::Value> = (0..17)
            .map(|i| (format!("V{i}"), json!("x".repeat(16_000))))
            .collect();
        assert_eq!(
            issues_of(json!({ "executable": "/a", "args": [], "env": big, "cwd": "/" })),
            vec![("too_long", "(input)".into())]
        );
    }
}
