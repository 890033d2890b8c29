//! Sizes of values as UTF-8 JSON, for the contract's serialized-size limits.

use crate::input::Value;

/// The byte length of `JSON.stringify(value)` for the plain data the parsers produce.
pub fn json_len(value: &Value) -> usize {
    match value {
        Value::Undefined
        | Value::Function
        | Value::Symbol
        | Value::Foreign(_)
        | Value::Refused(_) => 0,
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(*n),
        // JSON.stringify refuses bigint; callers convert amounts to decimal strings first.
        Value::BigInt(n) => n.map_or(0, |n| n.to_string().len() + 2),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            2 + items.iter().map(json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(fields) => {
            2 + fields
                .iter()
                .map(|(k, v)| string_len(k) + 1 + json_len(v))
                .sum::<usize>()
                + fields.len().saturating_sub(1)
        }
    }
}

/// JS prints integral numbers below 1e21 without a fraction; the parsers only produce those
/// and short fractions (CPU shares), for which Rust's shortest round-trip form has JS's length.
fn number_len(n: f64) -> usize {
    if !n.is_finite() {
        4
    } else if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i128).len()
    } else {
        format!("{n}").len()
    }
}

/// The byte length of a string once quoted and escaped as JSON.
pub fn string_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(s.len() + 2, |quoted| quoted.len())
}

/// `value` as JSON text, keys in their given order (undefined, functions and foreign values as
/// `null`, a bigint as its decimal string): the digests' canonical form, and the reaper's wire.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null
        | Value::Undefined
        | Value::Function
        | Value::Symbol
        | Value::Foreign(_)
        | Value::Refused(_) => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => serde_json::to_string(n).unwrap_or_else(|_| "null".into()),
        Value::BigInt(n) => format!(
            "\"{}\"",
            n.map_or_else(|| "overflow".into(), |n| n.to_string())
        ),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(text).collect::<Vec<_>>().join(","))
        }
        Value::Object(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!(
                    "{}:{}",
                    serde_json::to_string(k).unwrap_or_default(),
                    text(v)
                ))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_serde_for_plain_data() {
        let v = Value::object([
            (
                "a",
                Value::Array(vec![Value::string("x\"y"), Value::Number(1.0), Value::Null]),
            ),
            ("b", Value::object([("c", Value::Bool(false))])),
        ]);
        assert_eq!(
            json_len(&v),
            r#"{"a":["x\"y",1,null],"b":{"c":false}}"#.len()
        );
    }
}
