//! The contract's constants, read from the core so JS and Rust can never disagree.

use napi_derive::napi;

use super::js_value::JsData;
use crate::input::{ToValue, Value};
use crate::limits::*;
use crate::policy::request::{StreamLimits, TransferBuffers};

#[napi(js_name = "defaultTransferBuffers")]
pub fn default_transfer_buffers() -> JsData {
    JsData(TransferBuffers::DEFAULT.to_value())
}

#[napi(js_name = "defaultStreamLimits")]
pub fn default_stream_limits() -> JsData {
    JsData(StreamLimits::DEFAULT.to_value())
}

#[napi(js_name = "sandboxLimits")]
pub fn sandbox_limits() -> JsData {
    let n = |v: usize| Value::Number(v as f64);
    let u = |v: u64| Value::Number(v as f64);
    JsData(Value::object([
        ("startupMs", u(STARTUP_MS_MAX)),
        ("cleanupMs", u(CLEANUP_MS_MAX)),
        ("pathBytes", n(PATH_BYTES_MAX)),
        ("pathComponents", n(PATH_COMPONENTS_MAX)),
        ("pathComponentBytes", n(PATH_COMPONENT_BYTES_MAX)),
        ("processArguments", n(PROCESS_ARGS_MAX)),
        ("processEnvironmentEntries", n(PROCESS_ENV_ENTRIES_MAX)),
        (
            "processEnvironmentValueBytes",
            n(PROCESS_ENV_VALUE_BYTES_MAX),
        ),
        ("processRecipeBytes", n(PROCESS_RECIPE_BYTES_MAX)),
        ("recoveryRecordBytes", n(RECOVERY_RECORD_BYTES_MAX)),
        ("recoveryResources", n(RECOVERY_RESOURCES_MAX)),
        ("identifierBytes", n(ID_BYTES_MAX)),
        ("chunkBytes", u(CHUNK_BYTES_MAX)),
        ("metadataBatchBytesMin", u(METADATA_BATCH_BYTES_MIN)),
        ("metadataBatchBytes", u(METADATA_BATCH_BYTES_MAX)),
        ("mergeFanInMin", u(MERGE_FAN_IN_MIN)),
        ("mergeFanIn", u(MERGE_FAN_IN_MAX)),
        ("streamBufferBytes", u(STREAM_BUFFER_BYTES_MAX)),
        ("exportFilePaths", n(EXPORT_FILE_PATHS_MAX)),
        ("captureValues", n(CAPTURE_VALUES_MAX)),
        ("captureObjects", n(CAPTURE_OBJECTS_MAX)),
        ("captureStringBytes", n(CAPTURE_STRING_BYTES_MAX)),
        ("captureStringBytesOne", n(CAPTURE_STRING_BYTES_ONE_MAX)),
    ]))
}

/// How long, once compute stops, a piece of output waits for staging space before it is
/// discarded (`process::output_pump::ROOM_WAIT_WHILE_STOPPING`), in milliseconds.
#[napi(js_name = "outputRoomWaitWhileStoppingMs")]
pub fn output_room_wait_while_stopping_ms() -> u32 {
    u32::try_from(crate::process::output_pump::ROOM_WAIT_WHILE_STOPPING.as_millis())
        .unwrap_or(u32::MAX)
}

/// The Linux number of a signal named as exit receipts name it (`SIGKILL` → 9), or null.
#[napi(js_name = "signalNumber")]
pub fn signal_number(name: String) -> Option<i64> {
    crate::process::signal_name::signal_number(&name)
}
