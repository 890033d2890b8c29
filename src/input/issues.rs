//! Validation issues: every problem found in one input, each with a code, a path and a message.

use std::fmt;

/// One step of an issue path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

impl From<&str> for Seg {
    fn from(key: &str) -> Self {
        Seg::Key(key.to_owned())
    }
}

impl From<String> for Seg {
    fn from(key: String) -> Self {
        Seg::Key(key)
    }
}

impl From<usize> for Seg {
    fn from(index: usize) -> Self {
        Seg::Index(index)
    }
}

/// The path of a value inside the parsed input; empty for the input itself.
pub type Path = Vec<Seg>;

/// Extends a path by one step without mutating the parent.
pub fn child(path: &[Seg], seg: impl Into<Seg>) -> Path {
    let mut next = path.to_vec();
    next.push(seg.into());
    next
}

/// The stable, machine-readable kinds of validation issue. Part of the public contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueCode {
    /// A value of the wrong JavaScript type.
    InvalidType,
    /// A required field is missing or `undefined`.
    Required,
    /// A field that the contract does not define.
    UnknownField,
    /// A field that an earlier version defined and this one refuses; the message says how to migrate.
    RetiredField,
    /// `NaN`, `Infinity` or `-Infinity`.
    NotFinite,
    /// A fraction where an integer is required.
    NotInteger,
    /// An integer beyond `Number.MAX_SAFE_INTEGER`.
    UnsafeInteger,
    /// A number below its lower bound (negative, zero where positive is required, ...).
    TooSmall,
    /// A number above its upper bound.
    TooLarge,
    /// A string, array, object or serialization longer than its limit.
    TooLong,
    /// A string that is not one of the allowed literals, or a malformed identifier or digest.
    InvalidValue,
    /// A malformed relative or guest path.
    InvalidPath,
    /// A value that repeats one that must be unique.
    Duplicate,
    /// A recovery record in a format other than `agenai.sandbox-recovery.v2`.
    UnsupportedFormat,
}

impl IssueCode {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueCode::InvalidType => "invalid_type",
            IssueCode::Required => "required",
            IssueCode::UnknownField => "unknown_field",
            IssueCode::RetiredField => "retired_field",
            IssueCode::NotFinite => "not_finite",
            IssueCode::NotInteger => "not_integer",
            IssueCode::UnsafeInteger => "unsafe_integer",
            IssueCode::TooSmall => "too_small",
            IssueCode::TooLarge => "too_large",
            IssueCode::TooLong => "too_long",
            IssueCode::InvalidValue => "invalid_value",
            IssueCode::InvalidPath => "invalid_path",
            IssueCode::Duplicate => "duplicate",
            IssueCode::UnsupportedFormat => "unsupported_format",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub code: IssueCode,
    pub path: Path,
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.code.as_str(),
            render_path(&self.path),
            self.message
        )
    }
}

/// Renders a path as `policy.resources.cpus` or `args[3]`; `(input)` for the root.
pub fn render_path(path: &[Seg]) -> String {
    if path.is_empty() {
        return "(input)".into();
    }
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Seg::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// Collects issues over one parse; a parse succeeds only when it stays empty.
#[derive(Debug, Default)]
pub struct Issues {
    list: Vec<Issue>,
}

impl Issues {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, code: IssueCode, path: &[Seg], message: impl Into<String>) {
        self.list.push(Issue {
            code,
            path: path.to_vec(),
            message: message.into(),
        });
    }

    /// Records a value of the wrong type: `expected` says what was wanted ("expected a string").
    /// A value the capture refused is reported with the capture's own code and reason.
    pub fn mismatch(&mut self, path: &[Seg], expected: &str, received: &super::Value) {
        match received {
            super::Value::Refused(refusal) => self.add(refusal.code, path, refusal.message.clone()),
            other => self.add(
                IssueCode::InvalidType,
                path,
                format!("{expected}, received {}", other.type_name()),
            ),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Turns a parse that produced a value into a result: any issue at all fails it.
    pub fn finish<T>(self, value: Option<T>) -> Result<T, Vec<Issue>> {
        match value {
            Some(value) if self.list.is_empty() => Ok(value),
            Some(_) => Err(self.list),
            None if self.list.is_empty() => Err(vec![Issue {
                code: IssueCode::InvalidValue,
                path: Vec::new(),
                message: "the input could not be parsed".into(),
            }]),
            None => Err(self.list),
        }
    }

    pub fn into_vec(self) -> Vec<Issue> {
        self.list
    }
}
