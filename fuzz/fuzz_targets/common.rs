//! Turns fuzzer bytes into a `Value` the way JavaScript input reaches the parsers: a small
//! byte code over every value kind, with the contract's own field names and boundary numbers in
//! its dictionary so the fuzzer reaches deep into each shape.

use native_sandbox::input::{IssueCode, Refusal, Value};

const KEYS: &[&str] = &[
    "policy",
    "resources",
    "cpus",
    "memoryBytes",
    "pids",
    "temporaryStorage",
    "homeBytes",
    "tempBytes",
    "network",
    "kind",
    "isolated",
    "outbound",
    "deadlines",
    "startupMs",
    "cleanupMs",
    "transfers",
    "chunkBytes",
    "metadataBatchBytes",
    "mergeFanIn",
    "streams",
    "maxBufferedInputBytes",
    "maxBufferedOutputBytes",
    "highWaterMark",
    "maxStdinBytes",
    "maxOutputBytes",
    "execution",
    "deadline",
    "timeoutMs",
    "until_stopped",
    "workspaceDiskQuota",
    "required",
    "bytes",
    "accounting",
    "allocated_blocks",
    "not_requested",
    "executable",
    "args",
    "env",
    "cwd",
    "quotas",
    "maxFiles",
    "maxFileBytes",
    "maxTotalBytes",
    "maxArchiveBytes",
    "maxPaths",
    "signal",
    "deadlineAt",
    "format",
    "backendId",
    "backendRevision",
    "namespace",
    "operationId",
    "sandboxId",
    "imageDigest",
    "policyDigest",
    "configurationDigest",
    "phase",
    "authority",
    "role",
    "name",
    "identity",
    "id",
    "fingerprint",
    "persist",
    "in_process",
    "persisted",
    "workspace",
    "files",
    "subtree",
    "paths",
    "path",
    "image",
    "spillDirectory",
    "engine",
    "socketPath",
    "url",
    "tls",
    "user",
    "runtime",
    "verified",
    "unverified",
    "backendIdentity",
    "planned",
    "creating",
    "identified",
    "compute",
    "storage",
    "export",
    "reserved",
    "starting",
    "ready",
    "stopping",
    "stopped",
    "destroying",
    "destroyed",
    "agenai.sandbox-recovery.v2",
    "agenai.sandbox-recovery.v1",
    "/sandbox/workspace",
    "/bin/sh",
    "a/b",
    "../x",
    "a//b",
    "",
    ".",
    "PATH",
    "HOME",
    "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "execution",
    "network",
    "support",
    "effective",
    "workspaceDiskQuota",
];

const NUMBERS: &[f64] = &[
    0.0,
    1.0,
    -1.0,
    0.5,
    1e-9,
    2.0,
    8.0,
    1024.0,
    4096.0,
    65536.0,
    16_777_216.0,
    30_000.0,
    60_000.0,
    60_001.0,
    9_007_199_254_740_991.0,
    9_007_199_254_740_992.0,
    1e21,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    1_073_741_824.0,
    268_435_456.0,
];

pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn string(&mut self) -> String {
        let b = self.byte();
        if b < 200 {
            return KEYS[usize::from(b) % KEYS.len()].to_owned();
        }
        let len = usize::from(self.byte() % 64);
        let end = (self.pos + len).min(self.data.len());
        let raw = &self.data[self.pos.min(end)..end];
        self.pos = end;
        String::from_utf8_lossy(raw).into_owned()
    }

    pub fn value(&mut self, depth: usize) -> Value {
        if self.exhausted() {
            return Value::Undefined;
        }
        match self.byte() % 13 {
            0 => Value::Undefined,
            1 => Value::Null,
            2 => Value::Bool(self.byte() & 1 == 1),
            3 => Value::Number(NUMBERS[usize::from(self.byte()) % NUMBERS.len()]),
            4 => {
                let mut raw = [0u8; 8];
                for b in &mut raw {
                    *b = self.byte();
                }
                Value::Number(f64::from_le_bytes(raw))
            }
            5 => Value::BigInt(match self.byte() % 4 {
                0 => None,
                1 => Some(-1),
                2 => Some(i128::from(self.byte()) << 60),
                _ => Some(i128::from(self.byte())),
            }),
            6 | 7 => Value::String(self.string()),
            8 if depth < 12 => {
                let n = usize::from(self.byte() % 8);
                Value::Array((0..n).map(|_| self.value(depth + 1)).collect())
            }
            9 | 10 if depth < 12 => {
                let n = usize::from(self.byte() % 10);
                Value::Object(
                    (0..n)
                        .map(|_| (self.string(), self.value(depth + 1)))
                        .collect(),
                )
            }
            11 => match self.byte() % 3 {
                0 => Value::Function,
                1 => Value::Symbol,
                _ => Value::Foreign(
                    if self.byte() & 1 == 0 {
                        "AbortSignal"
                    } else {
                        "Date"
                    }
                    .into(),
                ),
            },
            _ => Value::Refused(Refusal {
                code: IssueCode::TooLong,
                message: "refused by the capture".into(),
            }),
        }
    }
}
