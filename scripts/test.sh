#!/usr/bin/env bash
# The whole test command (`npm test`): engine and guest image, Rust format/lint/unit tests, the
# TypeScript check, then the node:test suites on Node.js 20 and again on Node.js 22.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }
fail() { echo "test: $*" >&2; exit 1; }

# npm puts node_modules/.bin (where the Node.js 22 dev dependency links `node`) first on PATH.
# Node.js 20 is the machine's own: the first `node` on PATH outside node_modules.
find_system_node() {
  local dir
  IFS=: read -r -a dirs <<<"${PATH}"
  for dir in "${dirs[@]}"; do
    case "${dir}" in *node_modules*) continue ;; esac
    if [ -x "${dir}/node" ]; then echo "${dir}/node"; return 0; fi
  done
  return 1
}

node20="$(find_system_node)" || fail "no Node.js on PATH outside node_modules"
node22="$(pwd)/node_modules/node/bin/node"
[ -x "${node22}" ] || fail "Node.js 22 is missing: run npm install first (it is a dev dependency)"
case "$("${node20}" --version)" in v20.*) ;; *) fail "expected Node.js 20 at ${node20}, found $("${node20}" --version)" ;; esac
case "$("${node22}" --version)" in v22.*) ;; *) fail "expected Node.js 22 at ${node22}, found $("${node22}" --version)" ;; esac

step "Docker engine and guest image"
bash scripts/ensure-docker.sh || fail "no Docker engine"
bash scripts/ensure-runsc.sh || fail "the engine offers no runsc (gVisor) runtime"
bash scripts/build-guest-image.sh || fail "guest image build failed"
bash scripts/build-node-guest-image.sh || fail "Node.js guest image build failed"

step "cargo fmt --check"
cargo fmt --check || fail "cargo fmt --check found unformatted code (run cargo fmt)"
cargo fmt --check --manifest-path helper/Cargo.toml || fail "cargo fmt --check found unformatted code in helper/"
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets --locked -- -D warnings || fail "clippy"
cargo clippy --quiet --all-targets --locked --manifest-path helper/Cargo.toml --target-dir target/helper-clippy -- -D warnings || fail "clippy (helper/)"
step "cargo test"
cargo test --quiet --locked || fail "cargo test"
cargo test --quiet --locked --manifest-path helper/Cargo.toml --target-dir target/helper-clippy || fail "cargo test (helper/)"

step "release addon"
"${node20}" scripts/build-addon.mjs || fail "addon build"

step "TypeScript check of index.d.ts, the subpath declarations and the typed consumer"
node_modules/.bin/tsc -p tsconfig.json || fail "tsc"

status=0
# Every engine object the suites create carries this run's id in its namespace label.
export NATIVE_SANDBOX_TEST_RUN="run$(date +%s)"
# One run takes minutes; a run that hangs (a suite whose process never exits) is killed past
# this bound and fails, so both runs and their reports fit the CI's time.
run_bound=30m
for runtime in "${node20}" "${node22}"; do
  step "node --test on $("${runtime}" --version)"
  timeout --kill-after=30s "${run_bound}" "${runtime}" --test --test-concurrency=1 __test__/*.test.mjs
  rc=$?
  if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then
    echo "test: node --test on $("${runtime}" --version) did not finish within ${run_bound}: killed" >&2
  fi
  [ "${rc}" -eq 0 ] || status=1
done
exit "${status}"
