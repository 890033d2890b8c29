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
            Value::Foreign(class) => format!("{class} instance"),
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
