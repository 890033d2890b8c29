//! The path grammar, relative and guest: no panic on any string, and an accepted relative path
//! never escapes (no empty, `.` or `..` component, no leading `/`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use native_sandbox::paths::{check, Anchor};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if check(text, Anchor::Relative).is_ok() {
        assert!(!text.starts_with('/'));
        assert!(text
            .split('/')
            .all(|component| !component.is_empty() && component != "." && component != ".."));
    }
    if check(text, Anchor::Guest).is_ok() {
        assert!(text.starts_with('/'));
        assert!(!text.split('/').any(|component| component == ".."));
    }
});
