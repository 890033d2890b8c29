//! Lifecycle errors as JS data: `js/errors.js` turns a descriptor into the contract's class.

use crate::input::{Issue, Seg, Value};
use crate::lifecycle::error::OwnerError;

/// `{ ok: true, value }`: the shape every fallible native call resolves with.
pub fn ok(value: Value) -> Value {
    Value::object([("ok", Value::Bool(true)), ("value", value)])
}

/// `{ ok: false, error }`, where `error` is a descriptor.
pub fn failed(error: &OwnerError) -> Value {
    Value::object([("ok", Value::Bool(false)), ("error", describe(error))])
}

pub fn outcome(result: Result<Value, OwnerError>) -> Value {
    match result {
        Ok(value) => ok(value),
        Err(error) => failed(&error),
    }
}

pub fn issue_value(issue: &Issue) -> Value {
    let path = issue
        .path
        .iter()
        .map(|seg| match seg {
            Seg::Key(key) => Value::string(key.as_str()),
            Seg::Index(index) => Value::Number(*index as f64),
        })
        .collect();
    Value::object([
        ("code", Value::string(issue.code.as_str())),
        ("path", Value::Array(path)),
        ("message", Value::string(issue.message.as_str())),
    ])
}

pub fn describe(error: &OwnerError) -> Value {
    let text = |kind: &str, message: &str| {
        vec![
            ("kind", Value::string(kind)),
            ("message", Value::string(message)),
        ]
    };
    let fields = match error {
        OwnerError::State(message) => text("state", message),
        OwnerError::Unsupported(message) => text("unsupported", message),
        OwnerError::Validation(issues) => {
            let mut fields = text("validation", "invalid input");
            fields.push((
                "issues",
                Value::Array(issues.iter().map(issue_value).collect()),
            ));
            fields
        }
        OwnerError::Operation {
            code,
            message,
            cause,
        } => {
            let mut fields = text("operation", message);
            fields.push(("code", Value::string(code.as_str())));
            if let Some(cause) = cause {
                fields.push(("cause", describe(cause)));
            }
            fields
        }
        OwnerError::Driver(failure) => {
            let mut fields = text("driver", &failure.message);
            if let Some(external) = failure.external {
                fields.push(("ref", Value::Number(f64::from(external))));
            }
            fields
        }
        OwnerError::Start { message, cause } => {
            let mut fields = text("start", message);
            fields.push(("cause", describe(cause)));
            fields
        }
        OwnerError::Cleanup {
            operation,
            message,
            cause,
        } => {
            let mut fields = text("cleanup", message);
            fields.push(("operation", Value::string(operation.as_str())));
            fields.push(("cause", describe(cause)));
            fields
        }
    };
    Value::object(fields)
}
