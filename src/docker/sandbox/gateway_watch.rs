//! What the egress gateway said, and why it is gone when it is. Its log driver is `none` (the
//! engine keeps nothing), so an attach made before it starts reads its output for the
//! sandbox's life: the last `KEPT_BYTES` of its stderr stay (`LastWords`) for the errors that
//! name why it stopped and for `dockerSandboxEgress`.

use std::sync::Arc;

use bollard::models::ContainerState;
use futures::StreamExt;

use super::abort_on_drop::AbortOnDrop;
use crate::docker::attach::Attached;
use crate::lifecycle::driver::OutputStream;
use crate::lifecycle::egress_report::GatewayStopped;
use crate::process::supervised::LastWords;

/// Reads the gateway's attached output as its own task until the attach ends (the gateway
/// stopped, or was removed), keeping its stderr in `words`. The task ends with the guard.
pub(super) fn listen(attached: Attached, words: Arc<LastWords>) -> AbortOnDrop {
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
pub(super) fn stopped(state: Option<&ContainerState>, words: &LastWords) -> Option<GatewayStopped> {
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
    fn a_stopped_gateway_says_its_status_its_memory_kill_and_its_words() {
        let words = LastWords::default();
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
