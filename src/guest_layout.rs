//! The fixed guest layout every backend gives its sandboxes (`DOCKER_SANDBOX_GUEST` and its
//! Kubernetes twin): where the workspace, HOME and TMPDIR are, and the only environment an image
//! may carry.

pub const WORKSPACE: &str = "/sandbox/workspace";
pub const HOME: &str = "/sandbox/home";
pub const TMPDIR: &str = "/sandbox/tmp";
/// Where file calls reach in the guest (`sandbox.files`).
pub const GUEST_ROOTS: crate::process::supervised::GuestRoots =
    crate::process::supervised::GuestRoots {
        workspace: WORKSPACE,
        home: HOME,
        tmp: TMPDIR,
    };
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The only environment an image may carry, with exactly these values.
pub fn fixed_environment() -> [(&'static str, &'static str); 3] {
    [("HOME", HOME), ("TMPDIR", TMPDIR), ("PATH", PATH)]
}

/// `spawn` with the fixed environment (`HOME`, `TMPDIR`, `PATH`) before its own.
pub fn with_fixed_environment(mut spawn: session_frames::Spawn) -> session_frames::Spawn {
    let fixed: Vec<(Vec<u8>, Vec<u8>)> = fixed_environment()
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    spawn.env.splice(0..0, fixed);
    spawn
}
