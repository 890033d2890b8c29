//! The reaper's side: it reads its controller's messages until the link ends, then removes
//! every sandbox still registered, by ID and proof (`objects::remove_all`, as a reconciled
//! sandbox's destroy does), within `REAP_BOUND`.
//!
//! The link ends when the controller's end of the pipe closes: it exited, was killed, or ended
//! by a signal it had no handler for. A controller that destroyed its sandboxes forgot them
//! first, so a clean exit leaves nothing to remove. Persisted sandboxes are never registered.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::future::join_all;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use super::super::engine::connect;
use super::super::objects::remove_all;
use super::super::options::Engine;
use super::link::READY;
use super::wire::{decode, Message, LINE_BYTES_MAX};
use crate::debug;
use crate::recovery::record::SandboxRecoveryRecord;

/// From the link's end until every registered sandbox is gone or given up on: within the
/// 10 s a caller may count on, with room for the reaper's own exit.
pub const REAP_BOUND: Duration = Duration::from_secs(8);

/// Between attempts at a sandbox whose removal failed (a volume still in use while its holder
/// goes away, an engine restarting).
const RETRY_DELAY: Duration = Duration::from_millis(250);

/// What the controller registered and has not forgotten.
#[derive(Debug, Default)]
pub struct Registry {
    engines: HashMap<u32, Engine>,
    live: BTreeMap<String, (u32, SandboxRecoveryRecord)>,
}

impl Registry {
    pub fn apply(&mut self, message: Message) {
        match message {
            Message::Engine { index, engine } => {
                self.engines.insert(index, engine);
            }
            Message::Sandbox { engine, record } => {
                self.live
                    .insert(record.sandbox_id.clone(), (engine, record));
            }
            Message::Forget { sandbox_id } => {
                self.live.remove(&sandbox_id);
            }
        }
    }

    pub fn registered(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(String::as_str)
    }
}

/// What the reaper did once its link ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reaped {
    pub removed: Vec<String>,
    /// Sandboxes it gave up on, with the last reason.
    pub failed: Vec<(String, String)>,
}

/// Says `ready` on `out`, reads `input` until it ends, then reaps what is still registered.
pub async fn serve(
    input: impl AsyncRead + Unpin,
    mut out: impl AsyncWrite + Unpin,
) -> std::io::Result<Reaped> {
    let mut said = READY.to_vec();
    said.push(b'\n');
    out.write_all(&said).await?;
    out.flush().await?;
    let registry = watch(input).await;
    // The controller is gone; its end of our stdout goes with it.
    drop(out);
    Ok(reap(registry).await)
}

/// Applies every message until the input ends (or fails). A line that is not a message, or is
/// longer than `LINE_BYTES_MAX`, is skipped. The controller never sends one (it checks that
/// every engine line reads back, and records are at most 16 KiB), so a skipped line means a
/// foreign writer, and is reported under `NODE_DEBUG`.
pub async fn watch(input: impl AsyncRead + Unpin) -> Registry {
    let mut registry = Registry::default();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return registry,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() <= LINE_BYTES_MAX {
                // The input ended inside a line: the controller died while writing it.
                return registry;
            }
            debug::line("reaper skipped a line longer than its bound");
            if skip_line(&mut reader).await {
                continue;
            }
            return registry;
        }
        line.pop();
        match std::str::from_utf8(&line)
            .map_err(|e| e.to_string())
            .and_then(decode)
        {
            Ok(message) => registry.apply(message),
            Err(why) => debug::line(&format!("reaper skipped a line: {why}")),
        }
    }
}

/// Reads up to the next newline; false when the input ended first.
async fn skip_line(reader: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> bool {
    loop {
        let buffer = match reader.fill_buf().await {
            Ok([]) | Err(_) => return false,
            Ok(buffer) => buffer,
        };
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return true;
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// Removes every registered sandbox at once, each retried until it is gone or `REAP_BOUND`
/// has passed.
pub async fn reap(registry: Registry) -> Reaped {
    let deadline = Instant::now() + REAP_BOUND;
    let mut engines = HashMap::new();
    for (index, engine) in &registry.engines {
        match connect(engine) {
            Ok(connected) => {
                engines.insert(*index, connected.docker);
            }
            // Its address is the caller's: the line says only which engine.
            Err(_) => debug::line(&format!("reaper cannot reach engine {index}")),
        }
    }
    let work = registry.live.into_values().map(|(engine, record)| {
        let docker = engines.get(&engine).cloned();
        async move {
            let id = record.sandbox_id.clone();
            let Some(docker) = docker else {
                return (
                    id,
                    Err("its engine was never named or is unreachable".to_owned()),
                );
            };
            let started = Instant::now();
            loop {
                let attempt =
                    tokio::time::timeout_at(deadline.into(), remove_all(&docker, &record)).await;
                let (why, kind) = match attempt {
                    Ok(Ok(())) => {
                        debug::line(&format!(
                            "reaper removed {id} in {} ms",
                            started.elapsed().as_millis()
                        ));
                        return (id, Ok(()));
                    }
                    // An object whose labels or incarnation differ is left untouched.
                    Ok(Err(e @ crate::lifecycle::error::OwnerError::State(_))) => {
                        (e.to_string(), "an object is not provably its own")
                    }
                    Ok(Err(e)) => (e.to_string(), "an engine error"),
                    Err(_) => (
                        "its removal did not finish in time".to_owned(),
                        "out of time",
                    ),
                };
                if Instant::now() + RETRY_DELAY >= deadline {
                    // Only the kind: the engine's words name objects (and the caller's namespace).
                    debug::line(&format!("reaper gave up on {id} ({kind})"));
                    return (id, Err(why));
                }
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    });
    let mut reaped = Reaped::default();
    for (id, result) in join_all(work).await {
        match result {
            Ok(()) => reaped.removed.push(id),
            Err(why) => reaped.failed.push((id, why)),
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::reaper::wire::encode;
    use crate::recovery::record::{test_record, Identity};

    fn record(id: &str) -> SandboxRecoveryRecord {
        let mut record = test_record(Identity::Creating);
        record.sandbox_id = id.into();
        record
    }

    fn lines(messages: &[Message]) -> String {
        messages
            .iter()
            .map(|m| encode(m).expect("encodes") + "\n")
            .collect()
    }

    #[tokio::test]
    async fn the_registry_is_what_was_registered_and_not_forgotten() {
        let text = lines(&[
            Message::Engine {
                index: 0,
                engine: Engine::Socket("/run/docker.sock".into()),
            },
            Message::Sandbox {
                engine: 0,
                record: record("a"),
            },
            Message::Sandbox {
                engine: 0,
                record: record("b"),
            },
            Message::Forget {
                sandbox_id: "a".into(),
            },
            Message::Sandbox {
                engine: 0,
                record: record("c"),
            },
        ]);
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["b", "c"]);
    }

    #[tokio::test]
    async fn a_line_cut_by_the_controller_s_death_is_not_read() {
        let mut text = lines(&[Message::Sandbox {
            engine: 0,
            record: record("a"),
        }]);
        let cut = lines(&[Message::Forget {
            sandbox_id: "a".into(),
        }]);
        text.push_str(&cut[..cut.len() - 3]);
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn bad_and_overlong_lines_are_skipped_and_reading_goes_on() {
        let mut text = String::from("not json\n");
        text.push_str(&"x".repeat(LINE_BYTES_MAX + 10));
        text.push('\n');
        text.push_str(&lines(&[Message::Sandbox {
            engine: 0,
            record: record("a"),
        }]));
        let registry = watch(text.as_bytes()).await;
        assert_eq!(registry.registered().collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn a_sandbox_on_an_engine_never_named_is_reported_not_dropped() {
        let mut registry = Registry::default();
        registry.apply(Message::Sandbox {
            engine: 7,
            record: record("a"),
        });
        let reaped = reap(registry).await;
        assert!(reaped.removed.is_empty());
        assert_eq!(reaped.failed.len(), 1);
        assert_eq!(reaped.failed[0].0, "a");
    }

    #[tokio::test]
    async fn serve_says_ready_first() {
        let mut out = Vec::new();
        let reaped = serve(&b""[..], &mut out).await.expect("serves");
        assert_eq!(out, b"ready\n");
        assert_eq!(reaped, Reaped::default());
    }
}
