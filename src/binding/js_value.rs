//! Captures JS values as core [`Value`]s and turns core values back into JS data.

use napi::bindgen_prelude::*;
use napi::{sys, JsValue, KeyCollectionMode, KeyConversion, KeyFilter, ValueType};

use crate::input::Value;

/// Deeper input than any contract shape; it also stops cycles.
const MAX_DEPTH: usize = 32;
/// Elements and keys captured per array or object; a longer one is over every limit anyway,
/// and the parsers see one element past the bound so they report it as too long.
const MAX_ITEMS: u32 = 4_096;

/// Captures `value` as plain data. Getters run; cycles and depth end as `Value::Foreign`.
pub fn capture(value: Unknown<'_>) -> Result<Value> {
    capture_at(value, 0)
}

fn capture_at(value: Unknown<'_>, depth: usize) -> Result<Value> {
    Ok(match value.get_type()? {
        ValueType::Undefined => Value::Undefined,
        ValueType::Null => Value::Null,
        ValueType::Boolean => Value::Bool(unsafe { value.cast::<bool>()? }),
        ValueType::Number => Value::Number(unsafe { value.cast::<f64>()? }),
        ValueType::String => Value::String(unsafe { value.cast::<String>()? }),
        ValueType::Symbol => Value::Symbol,
        ValueType::Function => Value::Function,
        ValueType::BigInt => {
            let big = unsafe { value.cast::<BigInt>()? };
            let (n, lossless) = big.get_i128();
            Value::BigInt(lossless.then_some(n))
        }
        ValueType::Object if depth >= MAX_DEPTH => Value::Foreign("deeply nested Object".into()),
        ValueType::Object => capture_object(unsafe { value.cast::<Object<'_>>()? }, depth)?,
        _ => Value::Foreign("external".into()),
    })
}

fn capture_object(object: Object<'_>, depth: usize) -> Result<Value> {
    if object.is_array()? {
        let len = object.get_array_length()?.min(MAX_ITEMS + 1);
        let mut items = Vec::with_capacity(len as usize);
        for index in 0..len {
            items.push(capture_at(
                object.get_element::<Unknown<'_>>(index)?,
                depth + 1,
            )?);
        }
        return Ok(Value::Array(items));
    }
    let class = class_name(&object)?;
    if class.as_deref().is_some_and(|c| c != "Object") {
        return Ok(Value::Foreign(class.unwrap_or_default()));
    }
    let keys = object.get_all_property_names(
        KeyCollectionMode::OwnOnly,
        KeyFilter::Enumerable,
        KeyConversion::NumbersToStrings,
    )?;
    let len = keys.get_array_length()?.min(MAX_ITEMS + 1);
    let mut fields = Vec::with_capacity(len as usize);
    for index in 0..len {
        let key = keys.get_element::<Unknown<'_>>(index)?;
        if key.get_type()? != ValueType::String {
            continue;
        }
        let key = unsafe { key.cast::<String>()? };
        let value = object.get_named_property::<Unknown<'_>>(&key)?;
        fields.push((key, capture_at(value, depth + 1)?));
    }
    Ok(Value::Object(fields))
}

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
    Ok(Some(unsafe { name.cast::<String>()? }))
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
                | Value::Foreign(_) => <()>::to_napi_value(env, ()),
            }
        }
    }
}
