//! The guest helper (`helper/`, a static Linux executable embedded in the addon by `build.rs`):
//! the supervisor and transfer helper every backend runs in its sandboxes.

use crate::lifecycle::error::OwnerError;

/// The workspace helper for one engine architecture: a static Linux executable built by
/// `build.rs` from `helper/`. Every build of the addon carries both, whatever its own platform
/// (an x64 Mac may drive an arm64 engine, and the reverse).
#[derive(Debug, PartialEq, Eq)]
pub struct GuestHelper {
    /// The engine platform it runs on, as `docker` names it.
    pub platform: &'static str,
    pub(crate) bytes: &'static [u8],
}

pub(crate) const AMD64: GuestHelper = GuestHelper {
    platform: "linux/amd64",
    bytes: include_bytes!(env!("NATIVE_SANDBOX_HELPER_AMD64")),
};
pub(crate) const ARM64: GuestHelper = GuestHelper {
    platform: "linux/arm64",
    bytes: include_bytes!(env!("NATIVE_SANDBOX_HELPER_ARM64")),
};

/// The helper for the engine's or node's `architecture` (as `uname -m` gives it, or Go's
/// name), or `Unsupported` for any other: checked before any engine object is created.
pub fn helper_for(architecture: Option<&str>) -> Result<&'static GuestHelper, OwnerError> {
    let helper = match architecture {
        Some("x86_64" | "amd64") => &AMD64,
        Some("aarch64" | "arm64") => &ARM64,
        other => {
            return Err(OwnerError::Unsupported(format!(
                "the engine's or node's architecture is {}; this package's guest helper runs on linux/amd64 and linux/arm64 only",
                other.unwrap_or("not reported")
            )))
        }
    };
    if helper.bytes.is_empty() {
        return Err(OwnerError::Unsupported(
            "this build of the addon carries no workspace helper (it was built without the guest-helper feature)".into(),
        ));
    }
    Ok(helper)
}

impl GuestHelper {
    /// The executable itself.
    pub fn bytes(&self) -> &'static [u8] {
        self.bytes
    }
}
