//! What an allowlist sandbox's egress gateway counted: lookups and connections it admitted and
//! refused, and the latest refusals (name or address, port, reason, time).

use crate::input::{ToValue, Value};

/// The latest refusals a report carries, at most.
pub const RECENT_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRefusal {
    /// The name asked for, or the address when no name was given.
    pub host: String,
    pub port: u16,
    pub reason: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressReport {
    pub allowed: u64,
    pub refused: u64,
    /// Oldest first.
    pub recent: Vec<EgressRefusal>,
    /// Set once the gateway is gone (the counts are then those last read from it).
    pub stopped: Option<GatewayStopped>,
}

/// How an egress gateway ended: the sandbox has no egress, and no transfers, from then on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayStopped {
    /// Its exit status, when the engine reported one.
    pub exit_code: Option<i64>,
    /// The engine killed it for exceeding its memory budget.
    pub out_of_memory: bool,
    /// Its last stderr (bounded), trimmed.
    pub stderr: String,
}

impl GatewayStopped {
    /// `the egress gateway stopped (exit status N[, killed for memory])`.
    pub fn summary(&self) -> String {
        let status = self
            .exit_code
            .map_or_else(|| "unknown".to_owned(), |code| code.to_string());
        let memory = if self.out_of_memory {
            ", killed for memory"
        } else {
            ""
        };
        format!("the egress gateway stopped (exit status {status}{memory})")
    }

    /// Its own words, last in any message (they may hold any text).
    pub fn words(&self) -> String {
        if self.stderr.is_empty() {
            "it wrote nothing to stderr".to_owned()
        } else {
            format!("its last stderr: {}", self.stderr)
        }
    }
}

impl std::fmt::Display for GatewayStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.summary(), self.words())
    }
}

impl EgressReport {
    /// Reads the gateway's JSON (`{"allowed":…,"refused":…,"recent":[{target,port,reason,timeMs}]}`).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let count = |field: &str| {
            value
                .get(field)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("{field} is not a count"))
        };
        let recent = value
            .get("recent")
            .and_then(serde_json::Value::as_array)
            .ok_or("recent is not a list")?;
        let mut refusals = Vec::with_capacity(recent.len().min(RECENT_MAX));
        for (index, item) in recent.iter().enumerate().take(RECENT_MAX) {
            let text = |field: &str| {
                item.get(field)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("recent[{index}].{field} is not text"))
            };
            let number = |field: &str| {
                item.get(field)
                    .and_then(serde_json::Value::as_u64)
                    .ok_or_else(|| format!("recent[{index}].{field} is not a number"))
            };
            refusals.push(EgressRefusal {
                host: text("target")?,
                port: u16::try_from(number("port")?)
                    .map_err(|_| format!("recent[{index}].port is not a port"))?,
                reason: text("reason")?,
                at_ms: number("timeMs")?,
            });
        }
        Ok(Self {
            allowed: count("allowed")?,
            refused: count("refused")?,
            recent: refusals,
            stopped: None,
        })
    }
}

impl ToValue for EgressReport {
    fn to_value(&self) -> Value {
        let mut fields = vec![
            ("allowed", Value::BigInt(Some(i128::from(self.allowed)))),
            ("refused", Value::BigInt(Some(i128::from(self.refused)))),
            (
                "recent",
                Value::Array(
                    self.recent
                        .iter()
                        .map(|r| {
                            Value::object([
                                ("host", Value::string(r.host.as_str())),
                                ("port", Value::Number(f64::from(r.port))),
                                ("reason", Value::string(r.reason.as_str())),
                                ("at", Value::Number(r.at_ms as f64)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ];
        if let Some(stopped) = &self.stopped {
            fields.push((
                "stopped",
                Value::object([
                    (
                        "exitCode",
                        stopped
                            .exit_code
                            .map_or(Value::Null, |code| Value::Number(code as f64)),
                    ),
                    ("outOfMemory", Value::Bool(stopped.out_of_memory)),
                    ("stderr", Value::string(stopped.stderr.as_str())),
                ]),
            ));
        }
        Value::object(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gateways_report() {
        let report = EgressReport::from_json(
            br#"{"allowed":3,"refused":1,"recent":[{"target":"x.example","port":53,"reason":"not on the allowlist","timeMs":1700000000000}]}"#,
        )
        .unwrap();
        assert_eq!(report.allowed, 3);
        assert_eq!(report.refused, 1);
        assert_eq!(report.recent[0].host, "x.example");
        assert_eq!(report.recent[0].port, 53);
        for bad in [
            &b"{"[..],
            br#"{"allowed":-1,"refused":0,"recent":[]}"#,
            br#"{"allowed":1,"refused":0}"#,
            br#"{"allowed":1,"refused":0,"recent":[{"target":"a","port":70000,"reason":"r","timeMs":1}]}"#,
        ] {
            assert!(EgressReport::from_json(bad).is_err());
        }
    }
}
