//! Typed readers over [`Value`]: each records an issue and returns `None` on a bad value, so a
//! parser can keep going and report every problem of one input.

use super::issues::{child, IssueCode, Issues, Path, Seg};
use super::value::Value;

/// `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The fields of one plain object, read one by one; whatever is not read is an unknown field.
pub struct Fields<'a> {
    entries: &'a [(String, Value)],
    read: Vec<bool>,
    path: Path,
}

/// Opens `value` as a plain object, or records `invalid_type`.
pub fn object<'a>(value: &'a Value, path: &[Seg], issues: &mut Issues) -> Option<Fields<'a>> {
    match value {
        Value::Object(entries) => Some(Fields {
            entries,
            read: vec![false; entries.len()],
            path: path.to_vec(),
        }),
        other => {
            issues.mismatch(path, "expected a plain object", other);
            None
        }
    }
}

impl<'a> Fields<'a> {
    pub fn path(&self) -> &[Seg] {
        &self.path
    }

    pub fn at(&self, name: &str) -> Path {
        child(&self.path, name)
    }

    fn take(&mut self, name: &str) -> Option<&'a Value> {
        let entries = self.entries;
        let index = entries.iter().position(|(key, _)| key == name)?;
        self.read[index] = true;
        match &entries[index].1 {
            Value::Undefined => None,
            value => Some(value),
        }
    }

    /// A field that must be present; `undefined` counts as missing.
    pub fn required(&mut self, name: &str, issues: &mut Issues) -> Option<&'a Value> {
        let value = self.take(name);
        if value.is_none() {
            issues.add(
                IssueCode::Required,
                &self.at(name),
                format!("{name} is required"),
            );
        }
        value
    }

    /// A field that may be absent; `undefined` counts as absent.
    pub fn optional(&mut self, name: &str) -> Option<&'a Value> {
        self.take(name)
    }

    /// A field that an earlier contract defined: its presence alone is an issue.
    pub fn retired(&mut self, name: &str, migration: &str, issues: &mut Issues) {
        let present = self.entries.iter().any(|(key, _)| key == name);
        if present {
            self.take(name);
            issues.add(
                IssueCode::RetiredField,
                &self.at(name),
                format!("{name} is retired: {migration}"),
            );
        }
    }

    /// Records every field that no reader asked for.
    pub fn finish(self, issues: &mut Issues) {
        for ((key, _), read) in self.entries.iter().zip(&self.read) {
            if !read {
                issues.add(
                    IssueCode::UnknownField,
                    &child(&self.path, key.as_str()),
                    format!("unknown field {key}"),
                );
            }
        }
    }
}

/// A string of at most `max_bytes` UTF-8 bytes.
pub fn string(
    value: &Value,
    path: &[Seg],
    max_bytes: usize,
    issues: &mut Issues,
) -> Option<String> {
    match value {
        Value::String(s) if s.len() > max_bytes => {
            issues.add(
                IssueCode::TooLong,
                path,
                format!(
                    "must be at most {max_bytes} bytes of UTF-8, received {}",
                    s.len()
                ),
            );
            None
        }
        Value::String(s) => Some(s.clone()),
        other => {
            issues.mismatch(path, "expected a string", other);
            None
        }
    }
}

/// A non-empty bounded string with no control characters: identities, revisions, reasons.
pub fn token(value: &Value, path: &[Seg], max_bytes: usize, issues: &mut Issues) -> Option<String> {
    let s = string(value, path, max_bytes, issues)?;
    if s.is_empty() {
        issues.add(IssueCode::TooSmall, path, "must not be empty");
        return None;
    }
    if s.chars().any(char::is_control) {
        issues.add(
            IssueCode::InvalidValue,
            path,
            "must not contain control characters",
        );
        return None;
    }
    Some(s)
}

/// One of a fixed set of string literals.
pub fn literal(
    value: &Value,
    path: &[Seg],
    allowed: &[&'static str],
    issues: &mut Issues,
) -> Option<&'static str> {
    match value {
        Value::String(s) => match allowed.iter().find(|a| **a == s.as_str()) {
            Some(found) => Some(found),
            None => {
                issues.add(
                    IssueCode::InvalidValue,
                    path,
                    format!("expected one of {}, received {s:?}", quoted(allowed)),
                );
                None
            }
        },
        other => {
            issues.mismatch(path, &format!("expected one of {}", quoted(allowed)), other);
            None
        }
    }
}

fn quoted(allowed: &[&str]) -> String {
    allowed
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A boolean.
pub fn boolean(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        other => {
            issues.mismatch(path, "expected a boolean", other);
            None
        }
    }
}

/// A finite number (not bigint), with no bound yet.
pub fn finite(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<f64> {
    match value {
        Value::Number(n) if n.is_finite() => Some(*n),
        Value::Number(n) => {
            issues.add(
                IssueCode::NotFinite,
                path,
                format!("must be a finite number, received {n}"),
            );
            None
        }
        Value::BigInt(_) => {
            issues.add(
                IssueCode::InvalidType,
                path,
                "expected a number, received bigint (bigint is not accepted here)",
            );
            None
        }
        other => {
            issues.mismatch(path, "expected a number", other);
            None
        }
    }
}

/// A finite number strictly above zero; fractions allowed.
pub fn positive_number(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<f64> {
    let n = finite(value, path, issues)?;
    if n <= 0.0 {
        issues.add(
            IssueCode::TooSmall,
            path,
            format!("must be greater than 0, received {n}"),
        );
        return None;
    }
    Some(n)
}

/// A safe integer in `min..=max` (number only).
pub fn integer_in(
    value: &Value,
    path: &[Seg],
    min: u64,
    max: u64,
    issues: &mut Issues,
) -> Option<u64> {
    let n = finite(value, path, issues)?;
    integer_bounds(n, path, min, max, issues)
}

fn integer_bounds(n: f64, path: &[Seg], min: u64, max: u64, issues: &mut Issues) -> Option<u64> {
    if n.fract() != 0.0 {
        issues.add(
            IssueCode::NotInteger,
            path,
            format!("must be an integer, received {n}"),
        );
        return None;
    }
    if n.abs() > MAX_SAFE_INTEGER as f64 {
        issues.add(
            IssueCode::UnsafeInteger,
            path,
            format!("must be a safe integer (at most {MAX_SAFE_INTEGER}), received {n}"),
        );
        return None;
    }
    if n < min as f64 {
        issues.add(
            IssueCode::TooSmall,
            path,
            format!("must be at least {min}, received {n}"),
        );
        return None;
    }
    if n > max as f64 {
        issues.add(
            IssueCode::TooLarge,
            path,
            format!("must be at most {max}, received {n}"),
        );
        return None;
    }
    Some(n as u64)
}

/// A positive safe integer (number only).
pub fn positive_integer(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<u64> {
    integer_in(value, path, 1, MAX_SAFE_INTEGER, issues)
}

/// A nonnegative safe integer (number only).
pub fn nonnegative_integer(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<u64> {
    integer_in(value, path, 0, MAX_SAFE_INTEGER, issues)
}

/// A nonnegative amount given as a safe-integer number or as a bigint of at most `u64::MAX`.
pub fn amount(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<u64> {
    match value {
        Value::BigInt(Some(n)) if *n < 0 => {
            issues.add(
                IssueCode::TooSmall,
                path,
                format!("must be at least 0, received {n}n"),
            );
            None
        }
        Value::BigInt(Some(n)) => match u64::try_from(*n) {
            Ok(n) => Some(n),
            Err(_) => {
                issues.add(
                    IssueCode::TooLarge,
                    path,
                    format!("must be at most {}n, received {n}n", u64::MAX),
                );
                None
            }
        },
        Value::BigInt(None) => {
            issues.add(
                IssueCode::TooLarge,
                path,
                format!("must be at most {}n", u64::MAX),
            );
            None
        }
        Value::Number(_) => nonnegative_integer(value, path, issues),
        other => {
            issues.mismatch(path, "expected a number or bigint", other);
            None
        }
    }
}

/// An array of at most `max_len` elements.
pub fn array<'a>(
    value: &'a Value,
    path: &[Seg],
    max_len: usize,
    issues: &mut Issues,
) -> Option<&'a [Value]> {
    match value {
        Value::Array(items) if items.len() > max_len => {
            issues.add(
                IssueCode::TooLong,
                path,
                format!(
                    "must have at most {max_len} elements, received {}",
                    items.len()
                ),
            );
            None
        }
        Value::Array(items) => Some(items),
        other => {
            issues.mismatch(path, "expected an array", other);
            None
        }
    }
}

/// Reads the `kind` discriminant of a tagged union, or records why it cannot.
pub fn kind(
    fields: &mut Fields<'_>,
    allowed: &[&'static str],
    issues: &mut Issues,
) -> Option<&'static str> {
    let path = fields.at("kind");
    let value = fields.required("kind", issues)?;
    literal(value, &path, allowed, issues)
}

/// Reads a tagged union whose variants carry no other field: `{ kind }` exactly.
pub fn bare_kind(
    value: &Value,
    path: &[Seg],
    allowed: &[&'static str],
    issues: &mut Issues,
) -> Option<&'static str> {
    let mut fields = object(value, path, issues)?;
    let kind = kind(&mut fields, allowed, issues);
    fields.finish(issues);
    kind
}
