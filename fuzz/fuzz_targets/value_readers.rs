//! Every parser over every shape of captured JavaScript value: no panic, no hang, and a parse
//! that succeeds turns back into plain data.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use native_sandbox::input::ToValue;
use native_sandbox::{policy, process, recovery, transfer};

fuzz_target!(|data: &[u8]| {
    let value = common::Decoder::new(data).value(0);
    if let Ok(request) = policy::request::parse_sandbox_request(&value) {
        let again = policy::request::parse_sandbox_request(&request.to_value());
        assert!(again.is_ok(), "a parsed request parses again");
    }
    let _ = process::spec::parse_sandbox_process_spec(&value);
    let _ = transfer::options::parse_transfer_options(&value);
    let _ = transfer::selection::parse_export_selection(&value);
    let _ = policy::support::parse_sandbox_support(&value);
    let _ = policy::effective::parse_sandbox_effective_policy(&value);
    let _ = policy::ids::parse_sandbox_id(&value);
    let _ = policy::ids::parse_sandbox_process_id(&value);
    let _ = recovery::policy::parse_sandbox_recovery_policy(&value);
    let _ = native_sandbox::docker::options::parse_docker_options(&value);
});
