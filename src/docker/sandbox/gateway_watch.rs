//! What the egress gateway said, and why it is gone when it is. Its log driver is `none` (the
//! engine keeps nothing), so an attach made before it starts reads its output for the
//! sandbox's life: the last `KEPT_BYTES` of its stderr stay (a bounded ring) for the errors that
//! name why it stopped and for `dockerSandboxEgress`.

use std::sync::{Arc, Mutex, PoisonError};

use bollard::models::ContainerState;
use futures::StreamExt;

use super::abort_on_drop::AbortOnDrop;
use crate::docker::attach::Attached;
use crate::lifecycle::driver::OutputStream;
use crate::lifecycle::egress_report::GatewayStopped;

/// The most of the gateway's stderr kept: its last words, never its traffic (it writes none).
pub(super) const KEPT_BYTES: usize = 4 * 1_024;

/// The gateway's last stderr bytes.
#[derive(Default)]
pub(super) struct GatewayWords {
    tail: Mutex<Vec<u8>>,
}

impl GatewayWords {
    /// Appends `bytes`, keeping only the last `KEPT_BYTES`.
    fn keep(&self, bytes: &[u8]) {
        let mut tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = &bytes[bytes.len().saturating_sub(KEPT_BYTES)..];
        let excess = (tail.len() + bytes.len()).saturating_sub(KEPT_BYTES);
        tail.drain(..excess);
        tail.extend_from_slice(bytes);
    }

    /// What was kept, as text (lossy), trimmed.
    pub(super) fn last(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).trim().to_owned()
    }
}

/// Reads the gateway's attached output as its own task until the attach ends (the gateway
/// stopped, or was removed), keeping its stderr in `words`. The task ends with the guard.
pub(super) fn listen(attached: Attached, words: Arc<GatewayWords>) -> AbortOnDrop {
    let task = tokio::spawn(async move {
        let Attached { mut output, input } = attached;
        // Held while the output is read: the attach stays whole (the gateway reads no stdin).
        let _input = input;
        while let Some(Ok((stream, bytes))) = output.next().await {
            if stream == OutputStream::Stderr {
                words.keep(&bytes);
            }
        }
    });
    AbortOnDrop(task.abort_handle())
}

/// How the gateway ended, from its inspected `state` (`None` while it runs) and its last words.
pub(super) fn stopped(
    state: Option<&ContainerState>,
    words: &GatewayWords,
) -> Option<GatewayStopped> {
    let state = state?;
    if state.running == Some(true) {
        return None;
    }
    Some(GatewayStopped {
        exit_code: state.exit_code,
        out_of_memory: state.oom_killed == Some(true),
        stderr: words.last(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exactly_the_last_bytes() {
        let words = GatewayWords::default();
        words.keep(b"native-sandbox gateway: serving on 10.9.0.2\n");
        assert_eq!(words.last(), "native-sandbox gateway: serving on 10.9.0.2");
        words.keep(&vec![b'a'; KEPT_BYTES - 3]);
        words.keep(b"end");
        let last = words.last();
        assert_eq!(last.len(), KEPT_BYTES);
        assert!(last.ends_with("aaaend") && last.starts_with('a'));
        words.keep(&vec![b'b'; KEPT_BYTES * 2]);
        assert_eq!(words.last(), "b".repeat(KEPT_BYTES));
    }

    #[test]
    fn a_stopped_gateway_says_its_status_its_memory_kill_and_its_words() {
        let words = GatewayWords::default();
        words.keep(b"native-sandbox gateway: --subnet is required\n");
        let running = ContainerState {
            running: Some(true),
            ..Default::default()
        };
        assert_eq!(stopped(Some(&running), &words), None);
        let killed = ContainerState {
            running: Some(false),
            exit_code: Some(137),
            oom_killed: Some(true),
            ..Default::default()
        };
        let gone = stopped(Some(&killed), &words).expect("stopped");
        assert_eq!(gone.exit_code, Some(137));
        assert!(gone.out_of_memory);
        assert_eq!(gone.stderr, "native-sandbox gateway: --subnet is required");
        assert_eq!(
            gone.to_string(),
            "the egress gateway stopped (exit status 137, killed for memory); its last stderr: native-sandbox gateway: --subnet is required"
        );
    }
}
