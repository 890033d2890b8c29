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
        issues.add(
            IssueCode::InvalidType,
            at,
            format!(
                "expected a plain object of strings, received {}",
                value.type_name()
            ),
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
