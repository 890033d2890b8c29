//! Lifecycle errors as plain data. The JS layer turns each kind into the contract's error class;
//! a failure raised by a JavaScript driver keeps a handle to the original error object.

use std::sync::Arc;

use crate::input::Issue;

/// `SandboxOperationError` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationCode {
    Cancelled,
    DeadlineExceeded,
    OutputLimit,
    InputLimit,
    StreamFailure,
    PersistenceFailure,
    DriverFailure,
}

impl OperationCode {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationCode::Cancelled => "cancelled",
            OperationCode::DeadlineExceeded => "deadline_exceeded",
            OperationCode::OutputLimit => "output_limit",
            OperationCode::InputLimit => "input_limit",
            OperationCode::StreamFailure => "stream_failure",
            OperationCode::PersistenceFailure => "persistence_failure",
            OperationCode::DriverFailure => "driver_failure",
        }
    }
}

/// Which cleanup a `SandboxCleanupError` retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupOperation {
    Stop,
    Destroy,
}

impl CleanupOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupOperation::Stop => "stop",
            CleanupOperation::Destroy => "destroy",
        }
    }
}

/// A failure reported by a driver. `external` identifies an error object the driver's own
/// language holds (a JavaScript error), so the caller sees that very object as the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFailure {
    pub message: String,
    pub external: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OwnerError {
    #[error("{0}")]
    State(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("invalid input: {} issue(s)", .0.len())]
    Validation(Vec<Issue>),
    #[error("{message}")]
    Operation {
        code: OperationCode,
        message: String,
        cause: Option<Arc<OwnerError>>,
    },
    #[error("{}", .0.message)]
    Driver(DriverFailure),
    /// Startup failed; the reservation keeps cleanup ownership.
    #[error("{message}")]
    Start {
        message: String,
        cause: Arc<OwnerError>,
    },
    /// A stop or destroy did not settle successfully; the same owner retries it.
    #[error("{message}")]
    Cleanup {
        operation: CleanupOperation,
        message: String,
        cause: Arc<OwnerError>,
    },
}

impl OwnerError {
    pub fn operation(code: OperationCode, message: impl Into<String>) -> Self {
        OwnerError::Operation {
            code,
            message: message.into(),
            cause: None,
        }
    }

    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::operation(OperationCode::Cancelled, message)
    }

    pub fn state(message: impl Into<String>) -> Self {
        OwnerError::State(message.into())
    }

    pub fn driver(message: impl Into<String>) -> Self {
        OwnerError::Driver(DriverFailure {
            message: message.into(),
            external: None,
        })
    }

    pub fn code(&self) -> Option<OperationCode> {
        match self {
            OwnerError::Operation { code, .. } => Some(*code),
            _ => None,
        }
    }
}
