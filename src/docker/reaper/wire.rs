//! The reaper's wire: what a controller tells its reaper, one JSON object per line on the
//! reaper's stdin. Three messages, each idempotent, so a line replayed to a new reaper is harmless:
//!
//! - `{"engine":{"index":0,"socket":"/var/run/docker.sock"}}` (or `"url"`, with `"ca"`, `"cert"`
//!   and `"key"` for TLS): the engine that records naming `index` live on, as the backend
//!   resolved it (taken as it is: what reached the engine once reaches it again);
//! - `{"sandbox":{"engine":0,"record":{…}}}`: a sandbox's latest recovery record, sent before
//!   the effect it announces, so the reaper always knows every object that may exist;
//! - `{"forget":"sbx-…"}`: the sandbox was destroyed; nothing of it remains to remove.

use crate::input::value::from_json;
use crate::input::{ToValue, Value};
use crate::recovery::record::{parse_sandbox_recovery_record, SandboxRecoveryRecord};

use super::super::options::Engine;
use super::super::tls::TlsMaterial;

/// The longest line a reaper reads: a record is at most `RECOVERY_RECORD_BYTES_MAX` (16 KiB); an
/// engine's TLS material from the environment or a context has no bound of its own (a CA bundle
/// can be hundreds of KiB), so a backend whose engine line would be longer is refused a reaper
/// at its creation (`link::ReaperLink::entry`).
pub const LINE_BYTES_MAX: usize = 4 * 1024 * 1024;

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
        Message::Engine { index, engine } => {
            let mut fields = vec![("index".to_owned(), Value::Number(f64::from(*index)))];
            let text = |s: &str| Value::string(s.to_owned());
            match engine {
                Engine::Default => return None,
                Engine::Socket(path) => fields.push(("socket".into(), text(path))),
                Engine::Url(url) => fields.push(("url".into(), text(url))),
                Engine::Tls { url, material } => fields.extend([
                    ("url".into(), text(url)),
                    ("ca".into(), text(&material.ca)),
                    ("cert".into(), text(&material.cert)),
                    ("key".into(), text(&material.key)),
                ]),
            }
            Value::object([("engine", Value::Object(fields))])
        }
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
            let text = |name: &str| match field(name) {
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                _ => None,
            };
            let engine = match (
                text("socket"),
                text("url"),
                text("ca"),
                text("cert"),
                text("key"),
            ) {
                (Some(path), None, None, None, None) => Engine::Socket(path),
                (None, Some(url), None, None, None) => Engine::Url(url),
                (None, Some(url), Some(ca), Some(cert), Some(key)) => Engine::Tls {
                    url,
                    material: TlsMaterial { ca, cert, key },
                },
                _ => return Err("engine names no socket, URL or TLS material".into()),
            };
            let index = index("index")?;
            let known = ["index", "socket", "url", "ca", "cert", "key"];
            match body {
                Value::Object(fields)
                    if fields.iter().all(|(k, _)| known.contains(&k.as_str())) =>
                {
                    Ok(Message::Engine { index, engine })
                }
                _ => Err("engine has a field it does not know".into()),
            }
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
            // Taken as resolved: a relative socket or a PEM of any size reads back as written.
            Message::Engine {
                index: 1,
                engine: Engine::Socket("docker.sock".into()),
            },
            Message::Engine {
                index: 2,
                engine: Engine::Tls {
                    url: "tcp://engine:2376".into(),
                    material: TlsMaterial {
                        ca: "x".repeat(300 * 1024),
                        cert: "c".into(),
                        key: "k".into(),
                    },
                },
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
            (r#"{"engine":{"index":-1,"socket":"/s"}}"#, "not an index"),
            (
                r#"{"engine":{"index":0,"socket":"/s","url":"tcp://h"}}"#,
                "names no socket",
            ),
            (
                r#"{"engine":{"index":0,"socket":"/s","more":1}}"#,
                "does not know",
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
