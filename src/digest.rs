//! SHA-256 digests in the record's `sha256:<hex>` form, and fresh identifiers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::input::Value;

pub fn sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The digest of plain data, over a canonical JSON rendering (keys in their given order).
pub fn sha256_of(value: &Value) -> String {
    sha256(crate::json::text(value).as_bytes())
}

/// A fresh identifier such as `sbx-3f9a…`: unique per process and across processes and time.
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{nanos}:{}:{count}:{:p}", std::process::id(), &COUNTER);
    let digest = sha256(seed.as_bytes());
    format!("{prefix}-{}", &digest[7..23])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_ids() {
        assert_eq!(
            sha256(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let a = fresh_id("sbx");
        let b = fresh_id("sbx");
        assert_ne!(a, b);
        assert_eq!(a.len(), 20);
        assert!(crate::policy::ids::parse_sandbox_id(&Value::string(a)).is_ok());
    }
}
