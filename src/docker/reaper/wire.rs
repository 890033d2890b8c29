//! The reaper's wire: what a controller tells its reaper, one JSON object per line on the
//! reaper's stdin. Three messages, each idempotent, so a line replayed to a new reaper is harmless:
//!
//! - `{"engine":{"index":0,"options":{"socketPath":"/var/run/docker.sock"}}}`: the engine that
//!   records naming `index` live on (as the backend options give one, resolved);
//! - `{"sandbox":{"engine":0,"record":{…}}}`: a sandbox's latest recovery record, sent before
//!   the effect it announces, so the reaper always knows every object that may exist;
//! - `{"forget":"sbx-…"}`: the sandbox was destroyed; nothing of it remains to remove.

use crate::input::value::from_json;
use crate::input::{ToValue, Value};
use crate::recovery::record::{parse_sandbox_recovery_record, SandboxRecoveryRecord};

use super::super::options::{engine_value, parse_engine, Engine};

/// The longest line a reaper reads: a record is at most `RECOVERY_RECORD_BYTES_MAX` (16 KiB) and
/// an engine's TLS material three 64 KiB PEM texts.
pub const LINE_BYTES_MAX: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Engine {
        index: u32,
        engine: Engine,
    },
    Sandbox {
        engine: u32,
        record: SandboxRecoveryRecord,
    },
    Forget {
        sandbox_id: String,
    },
}

/// The message as one line of JSON text, without its newline; `None` for the default engine,
/// which a reaper is never told (the controller resolves it first).
pub fn encode(message: &Message) -> Option<String> {
    let value = match message {
        Message::Engine { index, engine } => Value::object([(
            "engine",
            Value::object([
                ("index", Value::Number(f64::from(*index))),
                ("options", engine_value(engine)?),
            ]),
        )]),
        Message::Sandbox { engine, record } => Value::object([(
            "sandbox",
            Value::object([
                ("engine", Value::Number(f64::from(*engine))),
                ("record", record.to_value()),
            ]),
        )]),
        Message::Forget { sandbox_id } => {
            Value::object([("forget", Value::string(sandbox_id.clone()))])
        }
    };
    Some(crate::json::text(&value))
}

/// Reads one line; a line that is not one of the messages says why.
pub fn decode(line: &str) -> Result<Message, String> {
    let json: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let value = from_json(json);
    let Value::Object(fields) = &value else {
        return Err("not a JSON object".into());
    };
    let [(kind, body)] = fields.as_slice() else {
        return Err("a message has exactly one key".into());
    };
    let field = |name: &str| match body {
        Value::Object(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
        _ => None,
    };
    let index = |name: &str| match field(name) {
        Some(Value::Number(n)) if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(n) => {
            Ok(*n as u32)
        }
        _ => Err(format!("{kind}.{name} is not an index")),
    };
    match kind.as_str() {
        "engine" => {
            let options = field("options").ok_or("engine.options is missing")?;
            let engine = parse_engine(options).map_err(|issues| describe(&issues))?;
            Ok(Message::Engine {
                index: index("index")?,
                engine,
            })
        }
        "sandbox" => {
            let record = field("record").ok_or("sandbox.record is missing")?;
            let record =
                parse_sandbox_recovery_record(record).map_err(|issues| describe(&issues))?;
            Ok(Message::Sandbox {
                engine: index("engine")?,
                record,
            })
        }
        "forget" => match body {
            Value::String(id) if !id.is_empty() => Ok(Message::Forget {
                sandbox_id: id.clone(),
            }),
            _ => Err("forget names no sandbox".into()),
        },
        other => Err(format!("unknown message {other}")),
    }
}

fn describe(issues: &[crate::input::Issue]) -> String {
    issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::record::{test_record, Identity};

    #[test]
    fn every_message_reads_back_as_written() {
        let messages = [
            Message::Engine {
                index: 3,
                engine: Engine::Socket("/run/docker.sock".into()),
            },
            Message::Engine {
                index: 0,
                engine: Engine::Url("tcp://127.0.0.1:2375".into()),
            },
            Message::Sandbox {
                engine: 3,
                record: test_record(Identity::Identified {
                    id: "abc".into(),
                    fingerprint: format!("sha256:{}", "d".repeat(64)),
                }),
            },
            Message::Sandbox {
                engine: 0,
                record: test_record(Identity::Creating),
            },
            Message::Forget {
                sandbox_id: "sbx-1".into(),
            },
        ];
        for message in messages {
            let line = encode(&message).expect("an explicit engine encodes");
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(decode(&line), Ok(message));
        }
    }

    #[test]
    fn the_default_engine_is_never_sent() {
        assert_eq!(
            encode(&Message::Engine {
                index: 0,
                engine: Engine::Default
            }),
            None
        );
    }

    #[test]
    fn a_line_that_is_no_message_says_why() {
        for (line, why) in [
            ("{", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"forget":"a","sandbox":{}}"#, "exactly one key"),
            (r#"{"forget":""}"#, "names no sandbox"),
            (r#"{"forget":1}"#, "names no sandbox"),
            (r#"{"reap":"all"}"#, "unknown message reap"),
            (
                r#"{"engine":{"index":-1,"options":{"socketPath":"/s"}}}"#,
                "not an index",
            ),
            (
                r#"{"engine":{"index":0,"options":{"socketPath":"s"}}}"#,
                "socketPath",
            ),
            (
                r#"{"sandbox":{"engine":0,"record":{}}}"#,
                "format is required",
            ),
        ] {
            let error = decode(line).expect_err(line);
            assert!(error.contains(why), "{line}: {error}");
        }
        let valid = encode(&Message::Sandbox {
            engine: 0,
            record: test_record(Identity::Creating),
        })
        .expect("encodes");
        let fractional = valid.replacen("\"engine\":0.0", "\"engine\":0.5", 1);
        assert_ne!(fractional, valid);
        let error = decode(&fractional).expect_err("a fractional index");
        assert!(error.contains("sandbox.engine is not an index"), "{error}");
    }
}
