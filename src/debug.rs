//! Debug lines the Node way, from the Rust side: written to stderr as
//! `NATIVE-SANDBOX <pid>: <message>` when `NODE_DEBUG` names `native-sandbox`, exactly as
//! `util.debuglog('native-sandbox')` writes the JavaScript layer's (`js/debug.js`). Callers pass
//! only the library's own words, identifiers and counts: never a caller's value.

use std::sync::OnceLock;

/// Whether `NODE_DEBUG` (read once) asks for this package's lines.
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED
        .get_or_init(|| std::env::var("NODE_DEBUG").is_ok_and(|value| names_this_package(&value)))
}

/// Writes `message` as one debug line when enabled. A failed write is dropped (never a panic:
/// Node may have made stderr non-blocking, and a full pipe must not end the process).
pub fn line(message: &str) {
    if enabled() {
        use std::io::Write;
        let text = format!("NATIVE-SANDBOX {}: {message}\n", std::process::id());
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// Node's rule: a comma-separated list of section names (no spaces trimmed), case-insensitive,
/// `*` matching any run.
fn names_this_package(node_debug: &str) -> bool {
    node_debug
        .split(',')
        .map(str::to_ascii_lowercase)
        .any(|pattern| glob(pattern.as_bytes(), b"native-sandbox"))
}

fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| glob(rest, &name[skip..])),
        Some((first, rest)) => name
            .split_first()
            .is_some_and(|(n, name_rest)| n == first && glob(rest, name_rest)),
    }
}

#[cfg(test)]
mod tests {
    use super::names_this_package;

    #[test]
    fn node_debug_is_read_as_node_reads_it() {
        for yes in [
            "native-sandbox",
            "NATIVE-SANDBOX",
            "http,native-sandbox",
            "native-*",
            "*",
            "*sandbox",
        ] {
            assert!(names_this_package(yes), "{yes}");
        }
        for no in [
            "",
            "http, native-sandbox",
            "native",
            "native-sandbox-x",
            "http",
            "native-sandbox2,net",
        ] {
            assert!(!names_this_package(no), "{no}");
        }
    }
}
