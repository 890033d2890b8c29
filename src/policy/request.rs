//! `parseSandboxRequest`: the whole requested policy, normalized with its defaults.

use super::network::{network, NetworkKind};
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
    pub network: NetworkKind,
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
