//! `parseSandboxRequest`: the whole requested policy, normalized with its defaults.

use super::network::{network, NetworkPolicy};
use super::resources::{resources, temporary_storage, Resources, TemporaryStorage};
use crate::input::read::{
    integer_in, kind, nonnegative_integer, object, positive_integer, Fields, MAX_SAFE_INTEGER,
};
use crate::input::{Issue, IssueCode, Issues, Seg, ToValue, Value};
use crate::limits::*;

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxRequest {
    pub policy: Policy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub resources: Resources,
    pub temporary_storage: TemporaryStorage,
    pub network: NetworkPolicy,
    pub deadlines: Deadlines,
    pub transfers: TransferBuffers,
    pub streams: StreamLimits,
    pub execution: Execution,
    pub workspace_disk_quota: WorkspaceDiskQuota,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub startup_ms: u64,
    pub cleanup_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferBuffers {
    pub chunk_bytes: u64,
    pub metadata_batch_bytes: u64,
    pub merge_fan_in: u64,
}

impl TransferBuffers {
    pub const DEFAULT: TransferBuffers = TransferBuffers {
        chunk_bytes: DEFAULT_CHUNK_BYTES,
        metadata_batch_bytes: DEFAULT_METADATA_BATCH_BYTES,
        merge_fan_in: DEFAULT_MERGE_FAN_IN,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    pub max_buffered_input_bytes: u64,
    pub max_buffered_output_bytes: u64,
    pub high_water_mark: u64,
    /// Total bytes a caller may write to stdin; `None` imposes no total.
    pub max_stdin_bytes: Option<u64>,
    /// Total stdout plus stderr bytes; `None` imposes no total, `Some(0)` allows none.
    pub max_output_bytes: Option<u64>,
}

impl StreamLimits {
    pub const DEFAULT: StreamLimits = StreamLimits {
        max_buffered_input_bytes: DEFAULT_MAX_BUFFERED_INPUT_BYTES,
        max_buffered_output_bytes: DEFAULT_MAX_BUFFERED_OUTPUT_BYTES,
        high_water_mark: DEFAULT_HIGH_WATER_MARK,
        max_stdin_bytes: None,
        max_output_bytes: None,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Execution {
    UntilStopped,
    Deadline { timeout_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceDiskQuota {
    NotRequested,
    Required { bytes: u64 },
}

const RETIRED_EXECUTION_MS: &str = "bound the process with policy.execution = { kind: 'deadline', timeoutMs } \
(it starts at process start and stops the whole workload), or omit it for { kind: 'until_stopped' }";
const RETIRED_OPERATION_MS: &str =
    "pass deadlineAt (epoch ms) or an AbortSignal in each transfer's options; \
startup and cleanup observations are deadlines.startupMs and deadlines.cleanupMs";

pub fn parse_sandbox_request(input: &Value) -> Result<SandboxRequest, Vec<Issue>> {
    let mut issues = Issues::new();
    let request = request(input, &[], &mut issues);
    issues.finish(request)
}

fn request(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<SandboxRequest> {
    let mut fields = object(value, path, issues)?;
    let policy = fields
        .required("policy", issues)
        .and_then(|v| policy(v, &fields.at("policy"), issues));
    fields.finish(issues);
    Some(SandboxRequest { policy: policy? })
}

fn policy(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<Policy> {
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
    let deadlines = f
        .required("deadlines", issues)
        .and_then(|v| deadlines(v, &f.at("deadlines"), issues));
    let transfers = f
        .required("transfers", issues)
        .and_then(|v| transfers(v, &f.at("transfers"), issues));
    let streams = f
        .required("streams", issues)
        .and_then(|v| streams(v, &f.at("streams"), issues));
    let execution = match f.optional("execution") {
        Some(v) => execution(v, &f.at("execution"), issues),
        None => Some(Execution::UntilStopped),
    };
    let workspace_disk_quota = match f.optional("workspaceDiskQuota") {
        Some(v) => workspace_disk_quota(v, &f.at("workspaceDiskQuota"), issues),
        None => Some(WorkspaceDiskQuota::NotRequested),
    };
    f.finish(issues);
    Some(Policy {
        resources: resources?,
        temporary_storage: temporary_storage?,
        network: network?,
        deadlines: deadlines?,
        transfers: transfers?,
        streams: streams?,
        execution: execution?,
        workspace_disk_quota: workspace_disk_quota?,
    })
}

fn deadlines(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<Deadlines> {
    let mut f = object(value, path, issues)?;
    let startup_ms = f
        .required("startupMs", issues)
        .and_then(|v| integer_in(v, &f.at("startupMs"), 1, STARTUP_MS_MAX, issues));
    let cleanup_ms = f
        .required("cleanupMs", issues)
        .and_then(|v| integer_in(v, &f.at("cleanupMs"), 1, CLEANUP_MS_MAX, issues));
    f.retired("executionMs", RETIRED_EXECUTION_MS, issues);
    f.retired("operationMs", RETIRED_OPERATION_MS, issues);
    f.finish(issues);
    Some(Deadlines {
        startup_ms: startup_ms?,
        cleanup_ms: cleanup_ms?,
    })
}

/// `policy.transfers`, also read on its own by the transfer options of the Node helpers.
pub fn transfers(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<TransferBuffers> {
    let mut f = object(value, path, issues)?;
    let chunk_bytes = f
        .required("chunkBytes", issues)
        .and_then(|v| integer_in(v, &f.at("chunkBytes"), 1, CHUNK_BYTES_MAX, issues));
    let metadata_batch_bytes = f.required("metadataBatchBytes", issues).and_then(|v| {
        integer_in(
            v,
            &f.at("metadataBatchBytes"),
            METADATA_BATCH_BYTES_MIN,
            METADATA_BATCH_BYTES_MAX,
            issues,
        )
    });
    let merge_fan_in = f.required("mergeFanIn", issues).and_then(|v| {
        integer_in(
            v,
            &f.at("mergeFanIn"),
            MERGE_FAN_IN_MIN,
            MERGE_FAN_IN_MAX,
            issues,
        )
    });
    f.finish(issues);
    Some(TransferBuffers {
        chunk_bytes: chunk_bytes?,
        metadata_batch_bytes: metadata_batch_bytes?,
        merge_fan_in: merge_fan_in?,
    })
}

fn streams(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<StreamLimits> {
    let mut f = object(value, path, issues)?;
    let staging = |f: &mut Fields<'_>, name: &str, issues: &mut Issues| {
        let at = f.at(name);
        f.required(name, issues)
            .and_then(|v| integer_in(v, &at, 1, STREAM_BUFFER_BYTES_MAX, issues))
    };
    let max_buffered_input_bytes = staging(&mut f, "maxBufferedInputBytes", issues);
    let max_buffered_output_bytes = staging(&mut f, "maxBufferedOutputBytes", issues);
    let high_water_mark = staging(&mut f, "highWaterMark", issues);
    let total = |f: &mut Fields<'_>, name: &str, issues: &mut Issues| match f.optional(name) {
        Some(v) => nonnegative_integer(v, &f.at(name), issues).map(Some),
        None => Some(None),
    };
    let max_stdin_bytes = total(&mut f, "maxStdinBytes", issues);
    let max_output_bytes = total(&mut f, "maxOutputBytes", issues);
    // A high-water mark above the staging bound could never be reached without overflowing it.
    if let (Some(hwm), Some(input), Some(output)) = (
        high_water_mark,
        max_buffered_input_bytes,
        max_buffered_output_bytes,
    ) {
        let ceiling = input.min(output);
        if hwm > ceiling {
            issues.add(
                IssueCode::TooLarge,
                &f.at("highWaterMark"),
                format!("must be at most the smaller staging bound ({ceiling}), received {hwm}"),
            );
        }
    }
    f.finish(issues);
    Some(StreamLimits {
        max_buffered_input_bytes: max_buffered_input_bytes?,
        max_buffered_output_bytes: max_buffered_output_bytes?,
        high_water_mark: high_water_mark?,
        max_stdin_bytes: max_stdin_bytes?,
        max_output_bytes: max_output_bytes?,
    })
}

fn execution(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<Execution> {
    let mut f = object(value, path, issues)?;
    let result = match kind(&mut f, &["until_stopped", "deadline"], issues) {
        Some("until_stopped") => Some(Execution::UntilStopped),
        Some("deadline") => f
            .required("timeoutMs", issues)
            .and_then(|v| integer_in(v, &f.at("timeoutMs"), 1, MAX_SAFE_INTEGER, issues))
            .map(|timeout_ms| Execution::Deadline { timeout_ms }),
        _ => {
            // Without a valid kind the other fields cannot be judged; do not call them unknown.
            f.optional("timeoutMs");
            None
        }
    };
    f.finish(issues);
    result
}

fn workspace_disk_quota(
    value: &Value,
    path: &[Seg],
    issues: &mut Issues,
) -> Option<WorkspaceDiskQuota> {
    let mut f = object(value, path, issues)?;
    let result = match kind(&mut f, &["not_requested", "required"], issues) {
        Some("not_requested") => Some(WorkspaceDiskQuota::NotRequested),
        Some("required") => {
            let bytes = f
                .required("bytes", issues)
                .and_then(|v| positive_integer(v, &f.at("bytes"), issues));
            let accounting = f.required("accounting", issues).and_then(|v| {
                crate::input::read::literal(v, &f.at("accounting"), &["allocated_blocks"], issues)
            });
            accounting
                .and(bytes)
                .map(|bytes| WorkspaceDiskQuota::Required { bytes })
        }
        _ => {
            f.optional("bytes");
            f.optional("accounting");
            None
        }
    };
    f.finish(issues);
    result
}

impl ToValue for SandboxRequest {
    fn to_value(&self) -> Value {
        Value::object([("policy", self.policy.to_value())])
    }
}

impl ToValue for Policy {
    fn to_value(&self) -> Value {
        Value::object([
            ("resources", self.resources.to_value()),
            ("temporaryStorage", self.temporary_storage.to_value()),
            ("network", self.network.to_value()),
            ("deadlines", self.deadlines.to_value()),
            ("transfers", self.transfers.to_value()),
            ("streams", self.streams.to_value()),
            ("execution", self.execution.to_value()),
            ("workspaceDiskQuota", self.workspace_disk_quota.to_value()),
        ])
    }
}

impl ToValue for Deadlines {
    fn to_value(&self) -> Value {
        Value::object([
            ("startupMs", self.startup_ms.to_value()),
            ("cleanupMs", self.cleanup_ms.to_value()),
        ])
    }
}

impl ToValue for TransferBuffers {
    fn to_value(&self) -> Value {
        Value::object([
            ("chunkBytes", self.chunk_bytes.to_value()),
            ("metadataBatchBytes", self.metadata_batch_bytes.to_value()),
            ("mergeFanIn", self.merge_fan_in.to_value()),
        ])
    }
}

impl ToValue for StreamLimits {
    fn to_value(&self) -> Value {
        let mut fields = vec![
            (
                "maxBufferedInputBytes",
                self.max_buffered_input_bytes.to_value(),
            ),
            (
                "maxBufferedOutputBytes",
                self.max_buffered_output_bytes.to_value(),
            ),
            ("highWaterMark", self.high_water_mark.to_value()),
        ];
        if let Some(n) = self.max_stdin_bytes {
            fields.push(("maxStdinBytes", n.to_value()));
        }
        if let Some(n) = self.max_output_bytes {
            fields.push(("maxOutputBytes", n.to_value()));
        }
        Value::object(fields)
    }
}

impl ToValue for Execution {
    fn to_value(&self) -> Value {
        match self {
            Execution::UntilStopped => Value::object([("kind", Value::string("until_stopped"))]),
            Execution::Deadline { timeout_ms } => Value::object([
                ("kind", Value::string("deadline")),
                ("timeoutMs", timeout_ms.to_value()),
            ]),
        }
    }
}

impl ToValue for WorkspaceDiskQuota {
    fn to_value(&self) -> Value {
        match self {
            WorkspaceDiskQuota::NotRequested => {
                Value::object([("kind", Value::string("not_requested"))])
            }
            WorkspaceDiskQuota::Required { bytes } => Value::object([
                ("kind", Value::string("required")),
                ("bytes", bytes.to_value()),
                ("accounting", Value::string("allocated_blocks")),
            ]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list, with};
    use serde_json::json;

    fn valid() -> Value {
        from_json(json!({ "policy": {
            "resources": { "cpus": 0.5, "memoryBytes": 268435456, "pids": 64 },
            "temporaryStorage": { "homeBytes": 1048576, "tempBytes": 1048576 },
            "network": { "kind": "isolated" },
            "deadlines": { "startupMs": 60000, "cleanupMs": 30000 },
            "transfers": { "chunkBytes": 65536, "metadataBatchBytes": 65536, "mergeFanIn": 8 },
            "streams": { "maxBufferedInputBytes": 1048576, "maxBufferedOutputBytes": 1048576, "highWaterMark": 65536 }
        }}))
    }

    fn issues_of(input: Value) -> Vec<(&'static str, String)> {
        issue_list(parse_sandbox_request(&input))
    }

    #[test]
    fn fills_defaults() {
        let request = parse_sandbox_request(&valid()).expect("valid request");
        assert_eq!(request.policy.execution, Execution::UntilStopped);
        assert_eq!(
            request.policy.workspace_disk_quota,
            WorkspaceDiskQuota::NotRequested
        );
        assert_eq!(request.policy.streams.max_output_bytes, None);
        assert_eq!(request.policy.deadlines.startup_ms, 60_000);
    }

    #[test]
    fn thirty_day_deadline_is_exact() {
        let input = with(
            valid(),
            "policy.execution",
            from_json(json!({ "kind": "deadline", "timeoutMs": 2_592_000_000u64 })),
        );
        let request = parse_sandbox_request(&input).expect("valid request");
        assert_eq!(
            request.policy.execution,
            Execution::Deadline {
                timeout_ms: 2_592_000_000
            }
        );
    }

    #[test]
    fn non_finite_and_non_integer_values() {
        let input = with(valid(), "policy.resources.cpus", Value::Number(f64::NAN));
        assert_eq!(
            issues_of(input),
            vec![("not_finite", "policy.resources.cpus".into())]
        );
        let input = with(
            valid(),
            "policy.resources.cpus",
            Value::Number(f64::NEG_INFINITY),
        );
        assert_eq!(
            issues_of(input),
            vec![("not_finite", "policy.resources.cpus".into())]
        );
        let input = with(valid(), "policy.resources.memoryBytes", Value::Number(1.5));
        assert_eq!(
            issues_of(input),
            vec![("not_integer", "policy.resources.memoryBytes".into())]
        );
        let input = with(
            valid(),
            "policy.resources.pids",
            Value::Number(9_007_199_254_740_992.0),
        );
        assert_eq!(
            issues_of(input),
            vec![("unsafe_integer", "policy.resources.pids".into())]
        );
        let input = with(valid(), "policy.resources.pids", Value::BigInt(Some(5)));
        assert_eq!(
            issues_of(input),
            vec![("invalid_type", "policy.resources.pids".into())]
        );
    }

    #[test]
    fn bounds_at_and_one_past() {
        for (path, at, past, code) in [
            (
                "policy.deadlines.startupMs",
                60_000.0,
                60_001.0,
                "too_large",
            ),
            (
                "policy.deadlines.cleanupMs",
                30_000.0,
                30_001.0,
                "too_large",
            ),
            ("policy.deadlines.cleanupMs", 1.0, 0.0, "too_small"),
            ("policy.transfers.mergeFanIn", 2.0, 1.0, "too_small"),
            (
                "policy.transfers.chunkBytes",
                16_777_216.0,
                16_777_217.0,
                "too_large",
            ),
        ] {
            assert!(
                parse_sandbox_request(&with(valid(), path, Value::Number(at))).is_ok(),
                "{path} at {at}"
            );
            assert_eq!(
                issues_of(with(valid(), path, Value::Number(past))),
                vec![(code, path.to_owned())]
            );
        }
    }

    #[test]
    fn retired_and_unknown_fields() {
        let input = with(valid(), "policy.deadlines.executionMs", Value::Number(1.0));
        let input = with(input, "policy.deadlines.operationMs", Value::Number(1.0));
        let input = with(input, "policy.extra", Value::Null);
        assert_eq!(
            issues_of(input),
            vec![
                ("retired_field", "policy.deadlines.executionMs".into()),
                ("retired_field", "policy.deadlines.operationMs".into()),
                ("unknown_field", "policy.extra".into()),
            ]
        );
    }

    #[test]
    fn collects_every_issue() {
        let input = with(
            valid(),
            "policy.network",
            from_json(json!({ "kind": "lan" })),
        );
        let input = with(
            input,
            "policy.streams.highWaterMark",
            Value::Number(2_000_000.0),
        );
        let input = with(
            input,
            "policy.workspaceDiskQuota",
            from_json(json!({ "kind": "required", "bytes": 0 })),
        );
        assert_eq!(
            issues_of(input),
            vec![
                ("invalid_value", "policy.network.kind".into()),
                ("too_large", "policy.streams.highWaterMark".into()),
                ("too_small", "policy.workspaceDiskQuota.bytes".into()),
                ("required", "policy.workspaceDiskQuota.accounting".into()),
            ]
        );
    }

    #[test]
    fn undefined_counts_as_missing() {
        let input = with(valid(), "policy.resources", Value::Undefined);
        assert_eq!(
            issues_of(input),
            vec![("required", "policy.resources".into())]
        );
        let input = with(valid(), "policy.execution", Value::Undefined);
        assert!(parse_sandbox_request(&input).is_ok());
    }
}
