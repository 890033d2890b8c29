//! The owner's observable state: `reserved → starting → ready → stopping → stopped →
//! destroying → destroyed`, or `failed` / `uncertain` with the operation that left it so.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Start,
    Import,
    Process,
    Export,
    Stop,
    Destroy,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Start => "start",
            Operation::Import => "import",
            Operation::Process => "process",
            Operation::Export => "export",
            Operation::Stop => "stop",
            Operation::Destroy => "destroy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Reserved,
    Starting,
    Ready,
    Stopping,
    Stopped,
    Destroying,
    Destroyed,
    Failed(Operation),
    Uncertain(Operation),
}

impl State {
    pub fn kind(self) -> &'static str {
        match self {
            State::Reserved => "reserved",
            State::Starting => "starting",
            State::Ready => "ready",
            State::Stopping => "stopping",
            State::Stopped => "stopped",
            State::Destroying => "destroying",
            State::Destroyed => "destroyed",
            State::Failed(_) => "failed",
            State::Uncertain(_) => "uncertain",
        }
    }

    pub fn operation(self) -> Option<Operation> {
        match self {
            State::Failed(op) | State::Uncertain(op) => Some(op),
            _ => None,
        }
    }

    /// Cleanup has taken over: later failures elsewhere no longer change the state.
    pub fn in_cleanup(self) -> bool {
        matches!(
            self,
            State::Stopping | State::Stopped | State::Destroying | State::Destroyed
        )
    }
}
