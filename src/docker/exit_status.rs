//! The leader's exit as the engine reports it. The container's init process exits with the
//! leader's code, or with 128 + N when the leader was killed by signal N; a voluntary exit with
//! such a code therefore reads as that signal (documented).

use crate::lifecycle::driver::ProcessExit;

/// The leader's fate from the container's exit code and whether the engine saw the kernel kill
/// for memory (`OOMKilled`): a leader that reads as SIGKILL in a container whose memory limit
/// killed it is `OutOfMemory`; any other fate stays as its code says (an OOM kill of another
/// process does not change how the leader ended).
pub fn leader_fate(code: i64, oom_killed: bool) -> ProcessExit {
    match leader_exit(code) {
        ProcessExit::Signaled(signal) if oom_killed && signal == "SIGKILL" => {
            ProcessExit::OutOfMemory
        }
        fate => fate,
    }
}

/// The leader's fate from the container's exit code.
pub fn leader_exit(code: i64) -> ProcessExit {
    if (129..=128 + 64).contains(&code) {
        ProcessExit::Signaled(signal_name(code - 128))
    } else {
        ProcessExit::Exited(code)
    }
}

pub use crate::process::signal_name::signal_name;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sigkill_by_the_memory_limit_is_out_of_memory_and_nothing_else_is() {
        assert_eq!(leader_fate(137, true), ProcessExit::OutOfMemory);
        assert_eq!(
            leader_fate(137, false),
            ProcessExit::Signaled("SIGKILL".into())
        );
        // Another process of the sandbox was killed for memory; the leader ended on its own.
        assert_eq!(leader_fate(0, true), ProcessExit::Exited(0));
        assert_eq!(
            leader_fate(143, true),
            ProcessExit::Signaled("SIGTERM".into())
        );
    }

    #[test]
    fn codes_and_signals() {
        assert_eq!(leader_exit(0), ProcessExit::Exited(0));
        assert_eq!(leader_exit(7), ProcessExit::Exited(7));
        assert_eq!(leader_exit(128), ProcessExit::Exited(128));
        assert_eq!(leader_exit(137), ProcessExit::Signaled("SIGKILL".into()));
        assert_eq!(leader_exit(143), ProcessExit::Signaled("SIGTERM".into()));
        assert_eq!(
            leader_exit(128 + 34),
            ProcessExit::Signaled("SIGRTMIN".into())
        );
        assert_eq!(
            leader_exit(128 + 40),
            ProcessExit::Signaled("SIGRTMIN+6".into())
        );
        assert_eq!(
            leader_exit(128 + 64),
            ProcessExit::Signaled("SIGRTMAX".into())
        );
        assert_eq!(leader_exit(128 + 65), ProcessExit::Exited(193));
        assert_eq!(leader_exit(255), ProcessExit::Exited(255));
    }
}
