//! The contract's parsers, exported to JS as `{ ok: true, value } | { ok: false, issues }`.
//! `js/parsers.js` freezes the value or throws `SandboxValidationError` with the issues.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::issue_value;
use super::js_value::{capture, JsData};
use crate::input::{Issue, ToValue, Value};
use crate::paths::{self, Anchor};
use crate::{policy, process, recovery, transfer};

fn outcome<T>(
    result: std::result::Result<T, Vec<Issue>>,
    to_value: impl FnOnce(&T) -> Value,
) -> JsData {
    JsData(match result {
        Ok(value) => Value::object([("ok", Value::Bool(true)), ("value", to_value(&value))]),
        Err(issues) => Value::object([
            ("ok", Value::Bool(false)),
            (
                "issues",
                Value::Array(issues.iter().map(issue_value).collect()),
            ),
        ]),
    })
}

/// The options of a workspace archive (`{ archiveLimits, exclude }`), judged only: an
/// adapter checks its own options with it before any sandbox exists.
#[napi(js_name = "checkWorkspaceArchiveOptions")]
pub fn check_workspace_archive_options(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        transfer::workspace_archive::limits::parse_archive_options(&capture(input)?),
        |_| Value::Null,
    ))
}

#[napi(js_name = "parseSandboxRequest")]
pub fn parse_sandbox_request(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        policy::request::parse_sandbox_request(&capture(input)?),
        ToValue::to_value,
    ))
}

#[napi(js_name = "parseSandboxProcessSpec")]
pub fn parse_sandbox_process_spec(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        process::spec::parse_sandbox_process_spec(&capture(input)?),
        ToValue::to_value,
    ))
}

#[napi(js_name = "parseSandboxRelativePath")]
pub fn parse_sandbox_relative_path(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        parse_path(&capture(input)?, Anchor::Relative),
        |s| Value::string(s.as_str()),
    ))
}

#[napi(js_name = "parseSandboxGuestPath")]
pub fn parse_sandbox_guest_path(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(parse_path(&capture(input)?, Anchor::Guest), |s| {
        Value::string(s.as_str())
    }))
}

fn parse_path(input: &Value, anchor: Anchor) -> std::result::Result<String, Vec<Issue>> {
    let mut issues = crate::input::Issues::new();
    let parsed = paths::path(input, &[], anchor, &mut issues);
    issues.finish(parsed)
}

#[napi(js_name = "parseSandboxRecoveryRecord")]
pub fn parse_sandbox_recovery_record(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        recovery::record::parse_sandbox_recovery_record(&capture(input)?),
        ToValue::to_value,
    ))
}

#[napi(js_name = "parseSandboxRecoveryPolicy")]
pub fn parse_sandbox_recovery_policy(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        recovery::policy::parse_sandbox_recovery_policy(&capture(input)?),
        |kind| Value::object([("kind", Value::string(kind.as_str()))]),
    ))
}

#[napi(js_name = "parseSandboxSupport")]
pub fn parse_sandbox_support(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        policy::support::parse_sandbox_support(&capture(input)?),
        ToValue::to_value,
    ))
}

#[napi(js_name = "parseSandboxEffectivePolicy")]
pub fn parse_sandbox_effective_policy(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        policy::effective::parse_sandbox_effective_policy(&capture(input)?),
        ToValue::to_value,
    ))
}

#[napi(js_name = "parseTransferOptions")]
pub fn parse_transfer_options(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        transfer::options::parse_transfer_options(&capture(input)?),
        |o| o.to_value(),
    ))
}

#[napi(js_name = "parseSandboxId")]
pub fn parse_sandbox_id(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        policy::ids::parse_sandbox_id(&capture(input)?),
        |s| Value::string(s.as_str()),
    ))
}

#[napi(js_name = "parseSandboxProcessId")]
pub fn parse_sandbox_process_id(input: Unknown<'_>) -> Result<JsData> {
    Ok(outcome(
        policy::ids::parse_sandbox_process_id(&capture(input)?),
        |s| Value::string(s.as_str()),
    ))
}
