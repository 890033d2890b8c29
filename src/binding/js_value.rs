//! Captures JS values as core [`Value`]s and turns core values back into JS data.

use napi::bindgen_prelude::*;
use napi::{sys, JsString, JsValue, KeyCollectionMode, KeyConversion, KeyFilter, ValueType};

use crate::input::{IssueCode, Refusal, Value};
use crate::limits::{
    CAPTURE_OBJECTS_MAX, CAPTURE_STRING_BYTES_MAX, CAPTURE_STRING_BYTES_ONE_MAX, CAPTURE_VALUES_MAX,
};

/// Deeper input than any contract shape.
const MAX_DEPTH: usize = 32;

/// What one capture may read: every bound is enforced before the JS value is read, so any input
/// (shared references, huge arrays, long strings) is answered in time proportional to the
/// budget, never to the input. Past a bound the value becomes [`Value::Refused`] and every parser
/// reports it as an issue at its path.
struct Budget {
    values: usize,
    objects: usize,
    string_bytes: usize,
}

impl Budget {
    fn full() -> Self {
        Self {
            values: CAPTURE_VALUES_MAX,
            objects: CAPTURE_OBJECTS_MAX,
            string_bytes: CAPTURE_STRING_BYTES_MAX,
        }
    }
}

/// One capture in progress: the budget left and the objects on the path from the root (an
/// object met again on its own path is a cycle).
struct Capture<'env> {
    budget: Budget,
    ancestors: Vec<Object<'env>>,
}

fn refused(code: IssueCode, message: String) -> Value {
    Value::Refused(Refusal { code, message })
}

fn over_budget(what: &str, key: &str, bound: usize) -> Value {
    refused(
        IssueCode::TooLong,
        format!("the input holds more than {bound} {what} in one call (SANDBOX_LIMITS.{key})"),
    )
}

/// Captures `value` as plain data. Getters run; cycles, depth and the capture budget end as
/// [`Value::Refused`].
pub fn capture(value: Unknown<'_>) -> Result<Value> {
    Capture {
        budget: Budget::full(),
        ancestors: Vec::new(),
    }
    .value(value)
}

impl<'env> Capture<'env> {
    fn value(&mut self, value: Unknown<'env>) -> Result<Value> {
        if self.budget.values == 0 {
            return Ok(over_budget("values", "captureValues", CAPTURE_VALUES_MAX));
        }
        self.budget.values -= 1;
        Ok(match value.get_type()? {
            ValueType::Undefined => Value::Undefined,
            ValueType::Null => Value::Null,
            ValueType::Boolean => Value::Bool(unsafe { value.cast::<bool>()? }),
            ValueType::Number => Value::Number(unsafe { value.cast::<f64>()? }),
            ValueType::String => self.string(unsafe { value.cast::<JsString<'_>>()? })?,
            ValueType::Symbol => Value::Symbol,
            ValueType::Function => Value::Function,
            ValueType::BigInt => {
                let big = unsafe { value.cast::<BigInt>()? };
                let (n, lossless) = big.get_i128();
                Value::BigInt(lossless.then_some(n))
            }
            ValueType::Object if self.ancestors.len() >= MAX_DEPTH => refused(
                IssueCode::InvalidValue,
                format!("the input nests deeper than {MAX_DEPTH} levels"),
            ),
            ValueType::Object => self.object(unsafe { value.cast::<Object<'env>>()? })?,
            _ => Value::Foreign("external".into()),
        })
    }

    /// A string is measured before it is copied: one longer than any contract field or past the
    /// call's total is refused unread. Its UTF-16 length (known at once) is charged to the
    /// budget first, so measuring its UTF-8 length (a scan) is bounded too: UTF-8 takes at least
    /// one byte per UTF-16 unit, and at most three.
    fn string(&mut self, string: JsString<'_>) -> Result<Value> {
        let units = string.utf16_len()?;
        if units > CAPTURE_STRING_BYTES_ONE_MAX {
            return Ok(refused(
                IssueCode::TooLong,
                format!(
                    "a string of {units} UTF-16 units is longer than any field allows \
                     ({CAPTURE_STRING_BYTES_ONE_MAX} bytes, SANDBOX_LIMITS.captureStringBytesOne)"
                ),
            ));
        }
        if units > self.budget.string_bytes {
            return Ok(over_budget(
                "bytes of strings",
                "captureStringBytes",
                CAPTURE_STRING_BYTES_MAX,
            ));
        }
        self.budget.string_bytes -= units;
        let len = string.utf8_len()?;
        if len > CAPTURE_STRING_BYTES_ONE_MAX {
            return Ok(refused(
                IssueCode::TooLong,
                format!(
                    "a string of {len} bytes of UTF-8 is longer than any field allows \
                     ({CAPTURE_STRING_BYTES_ONE_MAX}, SANDBOX_LIMITS.captureStringBytesOne)"
                ),
            ));
        }
        // The UTF-16 units are charged already; the rest of the UTF-8 bytes now.
        let extra = len - units.min(len);
        if extra > self.budget.string_bytes {
            return Ok(over_budget(
                "bytes of strings",
                "captureStringBytes",
                CAPTURE_STRING_BYTES_MAX,
            ));
        }
        self.budget.string_bytes -= extra;
        Ok(Value::String(string.into_utf8()?.into_owned()?))
    }

    fn object(&mut self, object: Object<'env>) -> Result<Value> {
        if self.budget.objects == 0 {
            return Ok(over_budget(
                "objects and arrays",
                "captureObjects",
                CAPTURE_OBJECTS_MAX,
            ));
        }
        self.budget.objects -= 1;
        let env = Env::from_raw(object.value().env);
        for ancestor in &self.ancestors {
            if env.strict_equals(*ancestor, object)? {
                return Ok(refused(
                    IssueCode::InvalidValue,
                    "the input refers to itself (a cycle)".into(),
                ));
            }
        }
        self.ancestors.push(object);
        let captured = self.object_contents(&object);
        self.ancestors.pop();
        captured
    }

    fn object_contents(&mut self, object: &Object<'env>) -> Result<Value> {
        if object.is_array()? {
            let len = object.get_array_length()? as usize;
            if len > self.budget.values {
                return Ok(over_budget("values", "captureValues", CAPTURE_VALUES_MAX));
            }
            let mut items = Vec::with_capacity(len);
            for index in 0..len as u32 {
                items.push(self.value(object.get_element::<Unknown<'_>>(index)?)?);
            }
            return Ok(Value::Array(items));
        }
        let class = class_name(object)?;
        if class.as_deref().is_some_and(|c| c != "Object") {
            return Ok(Value::Foreign(class.unwrap_or_default()));
        }
        let keys = object.get_all_property_names(
            KeyCollectionMode::OwnOnly,
            KeyFilter::Enumerable,
            KeyConversion::NumbersToStrings,
        )?;
        let len = keys.get_array_length()? as usize;
        if len > self.budget.values {
            // The enumeration was work: it is charged, so the same huge object met again (a
            // shared reference) is refused before it is enumerated a second time.
            self.budget.values = 0;
            return Ok(over_budget("values", "captureValues", CAPTURE_VALUES_MAX));
        }
        let mut fields = Vec::with_capacity(len);
        for index in 0..len as u32 {
            let key = keys.get_element::<Unknown<'_>>(index)?;
            if key.get_type()? != ValueType::String {
                // A symbol key is skipped, but it was enumerated: it is charged like a value,
                // so an object of a million symbols shared many times is read once at most.
                self.budget.values = self.budget.values.saturating_sub(1);
                continue;
            }
            let name = match self.string(unsafe { key.cast::<JsString<'_>>()? })? {
                Value::String(name) => name,
                refusal => return Ok(refusal),
            };
            // Read by the key's own value: any key (one holding NUL too) reads as it is.
            let value = object.get_property::<Unknown<'_>, Unknown<'_>>(key)?;
            fields.push((name, self.value(value)?));
        }
        Ok(Value::Object(fields))
    }
}

/// The longest class name copied into a message.
const CLASS_NAME_UNITS_MAX: usize = 128;

/// `None` for a null prototype (a plain dictionary), else the constructor's name.
fn class_name(object: &Object<'_>) -> Result<Option<String>> {
    let proto = object.get_prototype()?;
    if proto.get_type()? != ValueType::Object {
        return Ok(None);
    }
    let proto = unsafe { proto.cast::<Object<'_>>()? };
    let constructor = proto.get_named_property::<Unknown<'_>>("constructor")?;
    if constructor.get_type()? != ValueType::Function {
        return Ok(Some("anonymous".into()));
    }
    let constructor = unsafe { constructor.cast::<Object<'_>>()? };
    let name = constructor.get_named_property::<Unknown<'_>>("name")?;
    if name.get_type()? != ValueType::String {
        return Ok(Some("anonymous".into()));
    }
    // Only a message names the class: a name longer than any class name is not copied.
    let name = unsafe { name.cast::<JsString<'_>>()? };
    if name.utf16_len()? > CLASS_NAME_UNITS_MAX {
        return Ok(Some("a class with an overlong name".into()));
    }
    Ok(Some(name.into_utf8()?.into_owned()?))
}

/// A JS value captured on arrival (a driver's resolved result, a checkpointed record).
pub struct Captured(pub Value);

impl FromNapiValue for Captured {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let unknown = unsafe { Unknown::from_raw_unchecked(env, value) };
        capture(unknown).map(Captured)
    }
}

impl TypeName for Captured {
    fn type_name() -> &'static str {
        "unknown"
    }

    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl ValidateNapiValue for Captured {}

/// Core data on its way to JS: objects, arrays, strings, numbers, bigints.
pub struct JsData(pub Value);

impl ToNapiValue for JsData {
    unsafe fn to_napi_value(env: sys::napi_env, data: Self) -> Result<sys::napi_value> {
        unsafe {
            match data.0 {
                Value::Null => Null::to_napi_value(env, Null),
                Value::Bool(b) => bool::to_napi_value(env, b),
                Value::Number(n) => f64::to_napi_value(env, n),
                Value::BigInt(Some(n)) => i128::to_napi_value(env, n),
                Value::String(s) => String::to_napi_value(env, s),
                Value::Array(items) => {
                    Vec::<JsData>::to_napi_value(env, items.into_iter().map(JsData).collect())
                }
                Value::Object(fields) => {
                    let mut object = Object::new(&Env::from_raw(env))?;
                    for (key, value) in fields {
                        object.set_named_property(&key, JsData(value))?;
                    }
                    Ok(object.raw())
                }
                Value::Undefined
                | Value::BigInt(None)
                | Value::Function
                | Value::Symbol
                | Value::Foreign(_)
                | Value::Refused(_) => <()>::to_napi_value(env, ()),
            }
        }
    }
}
