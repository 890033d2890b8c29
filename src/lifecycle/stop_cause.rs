//! Why a stop ended a process's execution: what `exit`'s `cause` names beside
//! `{ kind: 'unavailable', reason: 'sandbox_stopped' }`, so a host can tell its agent "your
//! command timed out" without a timer of its own.

use super::error::{OperationCode, OwnerError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// A caller's `stop()` or `destroy()` (or a failure that stopped the sandbox).
    Stop,
    /// The execution deadline (`policy.execution`) fired.
    DeadlineExceeded,
    /// The process wrote more than `policy.streams.maxOutputBytes`.
    OutputLimit,
    /// More than `policy.streams.maxStdinBytes` was written to the process's stdin.
    InputLimit,
}

impl StopCause {
    /// The cause an execution's end names (`SandboxOwner::execution_end`).
    pub fn of(end: &OwnerError) -> Self {
        match end {
            OwnerError::Operation { code, .. } => match code {
                OperationCode::DeadlineExceeded => StopCause::DeadlineExceeded,
                OperationCode::OutputLimit => StopCause::OutputLimit,
                OperationCode::InputLimit => StopCause::InputLimit,
                _ => StopCause::Stop,
            },
            _ => StopCause::Stop,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StopCause::Stop => "stop",
            StopCause::DeadlineExceeded => "deadline_exceeded",
            StopCause::OutputLimit => "output_limit",
            StopCause::InputLimit => "input_limit",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_execution_end_names_the_cause() {
        let op = |code| OwnerError::operation(code, "x");
        assert_eq!(
            StopCause::of(&op(OperationCode::DeadlineExceeded)),
            StopCause::DeadlineExceeded
        );
        assert_eq!(
            StopCause::of(&op(OperationCode::OutputLimit)),
            StopCause::OutputLimit
        );
        assert_eq!(
            StopCause::of(&op(OperationCode::InputLimit)),
            StopCause::InputLimit
        );
        assert_eq!(
            StopCause::of(&op(OperationCode::Cancelled)),
            StopCause::Stop
        );
        assert_eq!(StopCause::of(&OwnerError::state("x")), StopCause::Stop);
        assert_eq!(StopCause::OutputLimit.as_str(), "output_limit");
    }
}
