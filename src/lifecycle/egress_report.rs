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
        })
    }
}

impl ToValue for EgressReport {
    fn to_value(&self) -> Value {
        Value::object([
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
        ])
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
