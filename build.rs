//! The addon's build: napi's link setup, and the workspace helper (`helper/`), built statically for
//! the engine's Linux and embedded in the addon (`NATIVE_SANDBOX_HELPER` names the file).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    napi_build::setup();
    build_helper();
}

/// Builds `helper/` with its own cargo run: its own target directory, static linking, and none
/// of the outer build's wrappers or flags (clippy, sanitizers), which are not for it.
fn build_helper() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let helper = manifest_dir.join("helper");
    for watched in ["Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={}", helper.join(watched).display());
    }
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The helper runs in the engine's Linux containers, which this package supports on x86-64.
    let target = "x86_64-unknown-linux-gnu";
    let target_dir = out_dir.join("helper");
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            target,
            "--manifest-path",
        ])
        .arg(helper.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for variable in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "RUSTDOCFLAGS",
    ] {
        command.env_remove(variable);
    }
    command.env("RUSTFLAGS", "-C target-feature=+crt-static");
    // Cargo reads this script's stdout for its directives: the nested build reports on stderr.
    command.stdout(std::io::stderr());
    let status = command
        .status()
        .expect("running cargo for the workspace helper");
    assert!(
        status.success(),
        "building the workspace helper failed: {status}"
    );
    let binary = target_dir
        .join(target)
        .join("release")
        .join("native-sandbox-helper");
    println!("cargo:rustc-env=NATIVE_SANDBOX_HELPER={}", binary.display());
}
