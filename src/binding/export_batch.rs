//! An export batch as JavaScript receives it: `{ entries, end, failure?, bytes }`, where each
//! entry lists the lengths of its body chunks and `bytes` holds every chunk of the batch back to
//! back (one Buffer per batch, not one per chunk).

use napi::bindgen_prelude::*;
use napi::sys;

use super::errors::describe;
use super::js_value::JsData;
use crate::input::Value;
use crate::transfer::export_batch::ExportBatch;

/// A batch made ready for JavaScript off its thread: the metadata, and the batch's bytes (the
/// JavaScript thread only wraps them in a Buffer, without a copy).
pub struct ExportBatchValue {
    meta: Value,
    bytes: Vec<u8>,
}

impl From<ExportBatch> for ExportBatchValue {
    fn from(batch: ExportBatch) -> Self {
        let ExportBatch {
            entries,
            bytes,
            end,
            failure,
        } = batch;
        let entries = entries
            .into_iter()
            .map(|batched| {
                let entry = batched.entry;
                let chunks = batched
                    .chunks
                    .iter()
                    .map(|len| Value::Number(*len as f64))
                    .collect();
                Value::object([
                    (
                        "kind",
                        Value::string(if entry.directory { "directory" } else { "file" }),
                    ),
                    ("path", Value::string(entry.path)),
                    (
                        "byteLength",
                        Value::BigInt(Some(i128::from(entry.byte_length))),
                    ),
                    ("executable", Value::Bool(entry.executable)),
                    ("chunks", Value::Array(chunks)),
                    ("complete", Value::Bool(batched.complete)),
                ])
            })
            .collect();
        let mut fields = vec![
            ("entries", Value::Array(entries)),
            ("end", Value::Bool(end)),
        ];
        if let Some(failure) = &failure {
            fields.push(("failure", describe(failure)));
        }
        Self {
            meta: Value::object(fields),
            bytes,
        }
    }
}

impl TypeName for ExportBatchValue {
    fn type_name() -> &'static str {
        "ExportBatch"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for ExportBatchValue {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        // SAFETY: called by napi on the JavaScript thread with its live `env`; the object and
        // the Buffer are created in that env.
        unsafe {
            let object = JsData::to_napi_value(env, JsData(value.meta))?;
            let buffer = Buffer::to_napi_value(env, Buffer::from(value.bytes))?;
            check_status!(
                sys::napi_set_named_property(env, object, c"bytes".as_ptr(), buffer),
                "Failed to set the bytes of an export batch"
            )?;
            Ok(object)
        }
    }
}
