//! The recovery-record parser, on JSON text and on any captured value: no panic, and every
//! record it accepts renders back to data it accepts again, unchanged.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use native_sandbox::input::ToValue;
use native_sandbox::recovery::record::parse_sandbox_recovery_record;

fuzz_target!(|data: &[u8]| {
    let value = match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(json) => native_sandbox::input::value::from_json(json),
        Err(_) => common::Decoder::new(data).value(0),
    };
    if let Ok(record) = parse_sandbox_recovery_record(&value) {
        let again = parse_sandbox_recovery_record(&record.to_value());
        assert_eq!(again.as_ref().ok(), Some(&record), "a record round-trips");
    }
});
