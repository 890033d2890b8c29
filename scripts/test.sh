#!/usr/bin/env bash
# The whole test command (`npm test`): engine and guest image, Rust format/lint/unit tests, the
# TypeScript check, then every node:test suite on Node.js 26 (the active LTS). The suites on the
# other tested releases are `npm run test:versions`; CI runs both.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }
fail() { echo "test: $*" >&2; exit 1; }

# The newest LTS runs every suite here; `npm run test:versions` (scripts/test-versions.sh) runs
# them again on the original's floor and the contract, loader and Docker smoke suites on the
# other maintained releases. Each Node.js comes from npm (scripts/ensure-node.sh).
NODE_26_VERSION=26.12.1
node26="$(bash scripts/ensure-node.sh "${NODE_26_VERSION}")" || fail "Node.js ${NODE_26_VERSION} could not be fetched from npm"

step "Docker engine and guest image"
bash scripts/ensure-docker.sh || fail "no Docker engine"
bash scripts/ensure-runsc.sh || fail "the engine offers no runsc (gVisor) runtime"
bash scripts/build-guest-image.sh || fail "guest image build failed"
bash scripts/build-node-guest-image.sh || fail "Node.js guest image build failed"

step "cargo fmt --check"
cargo fmt --check || fail "cargo fmt --check found unformatted code (run cargo fmt)"
cargo fmt --check --manifest-path helper/Cargo.toml || fail "cargo fmt --check found unformatted code in helper/"
cargo fmt --check --manifest-path tar-framing/Cargo.toml || fail "cargo fmt --check found unformatted code in tar-framing/"
cargo fmt --check --manifest-path session-frames/Cargo.toml || fail "cargo fmt --check found unformatted code in session-frames/"
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets --locked -- -D warnings || fail "clippy"
cargo clippy --quiet --all-targets --locked --manifest-path helper/Cargo.toml --target-dir target/helper-clippy -- -D warnings || fail "clippy (helper/)"
cargo clippy --quiet --all-targets --locked --manifest-path tar-framing/Cargo.toml --target-dir target/tar-framing -- -D warnings || fail "clippy (tar-framing/)"
cargo clippy --quiet --all-targets --locked --manifest-path session-frames/Cargo.toml --target-dir target/session-frames -- -D warnings || fail "clippy (session-frames/)"
step "cargo test"
cargo test --quiet --locked || fail "cargo test"
cargo test --quiet --locked --manifest-path helper/Cargo.toml --target-dir target/helper-clippy || fail "cargo test (helper/)"
cargo test --quiet --locked --manifest-path tar-framing/Cargo.toml --target-dir target/tar-framing || fail "cargo test (tar-framing/)"
cargo test --quiet --locked --manifest-path session-frames/Cargo.toml --target-dir target/session-frames || fail "cargo test (session-frames/)"

step "release addon"
node scripts/build-addon.mjs || fail "addon build"

step "TypeScript check of index.d.ts, the subpath declarations and the typed consumer"
node_modules/.bin/tsc -p tsconfig.json || fail "tsc"
node scripts/check-adapter-types.mjs || fail "tsc (the framework adapters against the frameworks' types)"

# Every engine object the suites create carries this run's id in its namespace label.
export NATIVE_SANDBOX_TEST_RUN="${NATIVE_SANDBOX_TEST_RUN:-run$(date +%s)}"
bash scripts/run-suites.sh "${node26}" __test__/*.test.mjs
