#!/usr/bin/env bash
# The cross toolchain for every platform package (scripts/platforms.mjs), from the package
# registries only: rustup targets, cargo-zigbuild and zig from PyPI, and for running arm64 builds
# here, Debian's qemu-user-static with the arm64 C and C++ runtime libraries. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/apt-install.sh

ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1

rustup target add \
  x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu \
  x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
  x86_64-apple-darwin aarch64-apple-darwin >/dev/null

if ! cargo-zigbuild --version >/dev/null 2>&1 || ! python3 -m ziglang version >/dev/null 2>&1; then
  echo "ensure-cross: installing ziglang ${ZIGLANG_VERSION} and cargo-zigbuild ${CARGO_ZIGBUILD_VERSION} from PyPI"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    "ziglang==${ZIGLANG_VERSION}" "cargo-zigbuild==${CARGO_ZIGBUILD_VERSION}"
  hash -r
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi
# pip may place the command beside python3 rather than on PATH (a pyenv shim does both).
if ! command -v cargo-zigbuild >/dev/null 2>&1; then
  echo "ensure-cross: cargo-zigbuild is installed but not on PATH ($(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'))" >&2
  exit 1
fi

if ! command -v qemu-aarch64-static >/dev/null 2>&1 || [ ! -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] \
   || ! command -v readelf >/dev/null 2>&1; then
  echo "ensure-cross: installing qemu-user-static and the arm64 runtime libraries from Debian"
  apt_install ensure-cross qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross binutils
fi
echo "ensure-cross: $(cargo-zigbuild --version), zig $(python3 -m ziglang version), $(qemu-aarch64-static --version | head -1)"
