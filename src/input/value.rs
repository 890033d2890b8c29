//! A JavaScript value as plain Rust data, so validation never touches the JS engine.

/// One JavaScript value, captured by the binding before any parsing happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    /// `None` when the bigint does not fit in an i128 (it is out of every bound anyway).
    BigInt(Option<i128>),
    String(String),
    Array(Vec<Value>),
    /// A plain object (prototype `Object.prototype` or `null`), own enumerable string keys in order.
    Object(Vec<(String, Value)>),
    Function,
    Symbol,
    /// Any other object (class instance, typed array, Date, AbortSignal, ...), by constructor name.
    Foreign(String),
    /// A value the capture refused to read (past its budget, a cycle, too deep): every reader
    /// reports it as an issue with this code and message.
    Refused(Refusal),
}

/// Why a value was not captured.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: super::IssueCode,
    pub message: String,
}

impl Value {
    /// The name used in "expected X, received Y" messages.
    pub fn type_name(&self) -> String {
        match self {
            Value::Undefined => "undefined".into(),
            Value::Null => "null".into(),
            Value::Bool(_) => "boolean".into(),
            Value::Number(n) if n.is_nan() => "NaN".into(),
            Value::Number(_) => "number".into(),
            Value::BigInt(_) => "bigint".into(),
            Value::String(_) => "string".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
            Value::Function => "function".into(),
            Value::Symbol => "symbol".into(),
            Value::Foreign(class) if class.is_empty() => {
                "an object of an unnamed class (process.env is one)".into()
            }
            Value::Foreign(class) => format!("{class} instance"),
            Value::Refused(refusal) => refusal.message.clone(),
        }
    }

    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn number(n: impl Into<f64>) -> Value {
        Value::Number(n.into())
    }

    /// Builds a plain object from `(key, value)` pairs, keeping their order.
    pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// Looks a key up in a plain object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Normalized values turn back into plain data for the JavaScript side.
pub trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToValue for u64 {
    fn to_value(&self) -> Value {
        // Every u64 that reaches here passed a safe-integer check, so f64 holds it exactly.
        Value::Number(*self as f64)
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn to_value(&self) -> Value {
        Value::Array(self.iter().map(ToValue::to_value).collect())
    }
}

/// Builds a [`Value`] from JSON as the binding would capture it (numbers as f64, as JavaScript
/// has them): core tests read like the JS ones, and the fuzz targets feed JSON text through it.
pub fn from_json(json: serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::Array(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, from_json(v))).collect())
        }
    }
}

/// Test support: the `(code, dotted path)` pairs of a failed parse.
#[cfg(test)]
pub fn issue_list<T: std::fmt::Debug>(
    result: Result<T, Vec<super::Issue>>,
) -> Vec<(&'static str, String)> {
    match result {
        Ok(value) => panic!("expected issues, parsed {value:?}"),
        Err(issues) => issues
            .iter()
            .map(|i| (i.code.as_str(), super::render_path(&i.path)))
            .collect(),
    }
}

/// Test support: replaces the value at a dotted path (`policy.resources.cpus`), adding the key if absent.
#[cfg(test)]
pub fn with(mut root: Value, path: &str, value: Value) -> Value {
    fn set(node: &mut Value, keys: &[&str], value: Value) {
        if let Value::Object(fields) = node {
            match keys {
                [last] => match fields.iter_mut().find(|(k, _)| k == last) {
                    Some(slot) => slot.1 = value,
                    None => fields.push(((*last).to_owned(), value)),
                },
                [first, rest @ ..] => {
                    if let Some(slot) = fields.iter_mut().find(|(k, _)| k == first) {
                        set(&mut slot.1, rest, value);
                    }
                }
                [] => {}
            }
        }
    }
    let keys: Vec<&str> = path.split('.').collect();
    set(&mut root, &keys, value);
    root
}
