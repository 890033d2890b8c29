//! The addon's build: napi's link setup, and the workspace helper (`helper/`), built statically for
//! both engine architectures the package supports and embedded in the addon
//! (`NATIVE_SANDBOX_HELPER_AMD64` and `NATIVE_SANDBOX_HELPER_ARM64` name the files).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The helper's Rust target for each engine architecture, the environment variable that names
/// the built file, and its link flags. x86-64: glibc, statically linked (the host's C
/// toolchain links it). arm64: musl, static by default, linked by Rust's own `rust-lld` with
/// Rust's self-contained musl, so no arm64 C toolchain is needed.
const HELPERS: [(&str, &str, &str); 2] = [
    (
        "x86_64-unknown-linux-gnu",
        "NATIVE_SANDBOX_HELPER_AMD64",
        "-C target-feature=+crt-static",
    ),
    (
        "aarch64-unknown-linux-musl",
        "NATIVE_SANDBOX_HELPER_ARM64",
        "-C target-feature=+crt-static -C linker=rust-lld",
    ),
];

fn main() {
    napi_build::setup();
    for (target, variable, rustflags) in HELPERS {
        if env::var_os("CARGO_FEATURE_GUEST_HELPER").is_some() {
            build_helper(target, variable, rustflags);
        } else {
            no_helper(variable);
        }
    }
}

/// Builds `helper/` for `target` with its own cargo run: its own target directory, static
/// linking, and none of the outer build's wrappers or flags (clippy, sanitizers, a cross
/// build's linker), which are not for it.
fn build_helper(target: &str, variable: &str, rustflags: &str) {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let helper = manifest_dir.join("helper");
    for watched in ["Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={}", helper.join(watched).display());
    }
    // The tar framing the helper shares with the addon (`tar-framing/`, a path dependency).
    let framing = manifest_dir.join("tar-framing");
    for watched in ["Cargo.toml", "src"] {
        println!("cargo:rerun-if-changed={}", framing.join(watched).display());
    }
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
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
    // A cross build of the addon (cargo-zigbuild) points the C compiler and linker of its
    // target at zig through these; the helper's targets are not that target.
    let cross: Vec<String> = env::vars()
        .map(|(name, _)| name)
        .filter(|name| {
            name.starts_with("CARGO_TARGET_")
                || name.starts_with("CC_")
                || name.starts_with("CXX_")
                || name.starts_with("AR_")
                || name.starts_with("CFLAGS_")
                || name.starts_with("BINDGEN_")
        })
        .collect();
    for variable in cross {
        command.env_remove(variable);
    }
    command.env("RUSTFLAGS", rustflags);
    // Cargo reads this script's stdout for its directives: the nested build reports on stderr.
    command.stdout(std::io::stderr());
    let status = command
        .status()
        .expect("running cargo for the workspace helper");
    assert!(
        status.success(),
        "building the workspace helper for {target} failed: {status} (rustup target add {target})"
    );
    let binary = target_dir
        .join(target)
        .join("release")
        .join("native-sandbox-helper");
    println!("cargo:rustc-env={variable}={}", binary.display());
}

/// Without the `guest-helper` feature (the fuzz targets' build): `variable` names an empty
/// file, which `seed::helper_for` refuses as "no helper in this build".
fn no_helper(variable: &str) {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let empty = out_dir.join("no-guest-helper");
    std::fs::write(&empty, []).expect("writing the empty helper stand-in");
    println!("cargo:rustc-env={variable}={}", empty.display());
}
