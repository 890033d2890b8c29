//! What the gateway admitted and refused: counters and the latest refusals, written as one JSON
//! object to a file on the holder's own temporary storage after every change (the controller
//! reads it with `--egress-report`, an exec in the holder; the guest cannot reach it).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The latest refusals kept.
pub const RECENT_MAX: usize = 16;
/// Where the report lives: the holder's TMPDIR (a tmpfs of its own).
pub const REPORT_PATH: &str = "/sandbox/tmp/egress.json";

struct Refusal {
    target: String,
    port: u16,
    reason: &'static str,
    time_ms: u128,
}

#[derive(Default)]
struct Counts {
    allowed: u64,
    refused: u64,
    recent: VecDeque<Refusal>,
}

#[derive(Default)]
pub struct Report {
    counts: Mutex<Counts>,
}

impl Report {
    pub fn allowed(&self) {
        let mut counts = self.lock();
        counts.allowed += 1;
        publish(&counts);
    }

    /// Counts a refused lookup or connection: `target` is the name asked for, or the address
    /// when no name was given.
    pub fn refused(&self, target: &str, port: u16, reason: &'static str) {
        let mut counts = self.lock();
        counts.refused += 1;
        if counts.recent.len() == RECENT_MAX {
            counts.recent.pop_front();
        }
        counts.recent.push_back(Refusal {
            target: target.chars().take(253).collect(),
            port,
            reason,
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
        });
        publish(&counts);
    }

    pub fn publish(&self) {
        publish(&self.lock());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A poisoned lock still holds whole counts: every update is one step.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn render(counts: &Counts) -> String {
    let recent: Vec<String> = counts
        .recent
        .iter()
        .map(|r| {
            format!(
                "{{\"target\":{},\"port\":{},\"reason\":{},\"timeMs\":{}}}",
                json_string(&r.target),
                r.port,
                json_string(r.reason),
                r.time_ms
            )
        })
        .collect();
    format!(
        "{{\"allowed\":{},\"refused\":{},\"recent\":[{}]}}\n",
        counts.allowed,
        counts.refused,
        recent.join(",")
    )
}

/// Written beside and renamed over, so a reader sees one whole report.
fn publish(counts: &Counts) {
    let staged = format!("{REPORT_PATH}.next");
    let written = std::fs::File::create(&staged)
        .and_then(|mut file| file.write_all(render(counts).as_bytes()))
        .and_then(|()| std::fs::rename(&staged, REPORT_PATH));
    if let Err(e) = written {
        eprintln!("native-sandbox gateway: writing the report: {e}");
    }
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `--egress-report`: prints the report; fails saying `not serving` before the gateway serves
/// (it writes the first report once it listens).
pub fn print() -> Result<(), String> {
    let text = match std::fs::read_to_string(REPORT_PATH) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("the gateway is not serving yet".into())
        }
        Err(e) => return Err(format!("reading {REPORT_PATH}: {e}")),
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| format!("writing the report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_escapes_targets() {
        let mut counts = Counts {
            allowed: 2,
            refused: 1,
            recent: VecDeque::new(),
        };
        counts.recent.push_back(Refusal {
            target: "a\"b".into(),
            port: 53,
            reason: "not on the allowlist",
            time_ms: 7,
        });
        assert_eq!(
            render(&counts),
            "{\"allowed\":2,\"refused\":1,\"recent\":[{\"target\":\"a\\\"b\",\"port\":53,\"reason\":\"not on the allowlist\",\"timeMs\":7}]}\n"
        );
    }
}
