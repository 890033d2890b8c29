#!/usr/bin/env bash
# `npm run test:versions`: the suites on the other tested Node.js releases (`npm test` runs every
# suite on Node.js 26, the active LTS). Every suite again on Node.js 22 (maintenance LTS, the
# original's floor); on Node.js 24 (maintenance LTS) and Node.js 20 (past its end of life in
# April 2026, still the floor of `engines`), the contract suites (parsers, errors, the original's
# messages, the lifecycle, JavaScript drivers and their conformance), the platform loader (entry
# points, the addon under each runtime's environment, the runtime check, the reaper's runtime
# check) and the Docker smoke suites (the conformance suite on the engine, the /node helpers, the
# engine-wide census).
# Expects `npm test`'s build (the release addon) or makes it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }
fail() { echo "test-versions: $*" >&2; exit 1; }

NODE_20_VERSION=20.20.2
NODE_24_VERSION=24.22.3
# Node.js 22 is the `node` dev dependency (npm installs it), as the original's floor.
node22="$(pwd)/node_modules/node/bin/node"
[ -x "${node22}" ] || fail "Node.js 22 is missing: run npm install first (it is a dev dependency)"
case "$("${node22}" --version)" in v22.*) ;; *) fail "expected Node.js 22 at ${node22}, found $("${node22}" --version)" ;; esac
node20="$(bash scripts/ensure-node.sh "${NODE_20_VERSION}")" || fail "Node.js ${NODE_20_VERSION} could not be fetched from npm"
node24="$(bash scripts/ensure-node.sh "${NODE_24_VERSION}")" || fail "Node.js ${NODE_24_VERSION} could not be fetched from npm"

SMOKE=(
  __test__/bench-report.test.mjs
  __test__/conformance-local.test.mjs
  __test__/driver-process.test.mjs
  __test__/driver-transfers.test.mjs
  __test__/engine.test.mjs
  __test__/errors.test.mjs
  __test__/lifecycle.test.mjs
  __test__/original-messages.test.mjs
  __test__/parse-process-and-paths.test.mjs
  __test__/parse-recovery-support.test.mjs
  __test__/parse-request.test.mjs
  __test__/readable-failure.test.mjs
  __test__/entrypoints.test.mjs
  __test__/runtime-env.test.mjs
  __test__/node-version.test.mjs
  __test__/reaper-runtime.test.mjs
  __test__/conformance-docker.test.mjs
  __test__/docker-node.test.mjs
  __test__/zz-leftovers.test.mjs
)

step "Docker engine, guest images and the release addon"
bash scripts/ensure-docker.sh || fail "no Docker engine"
bash scripts/ensure-runsc.sh || fail "the engine offers no runsc (gVisor) runtime"
bash scripts/build-guest-image.sh || fail "guest image build failed"
bash scripts/build-node-guest-image.sh || fail "Node.js guest image build failed"
[ -f native-sandbox.linux-x64-gnu.node ] || node scripts/build-addon.mjs || fail "addon build"

status=0
FAILURE_SUMMARY="$(mktemp)"
export FAILURE_SUMMARY
trap 'rm -f "${FAILURE_SUMMARY}"' EXIT
export NATIVE_SANDBOX_TEST_RUN="${NATIVE_SANDBOX_TEST_RUN:-versions$(date +%s)}"
bash scripts/run-suites.sh "${node22}" __test__/*.test.mjs || status=1
for runtime in "${node24}" "${node20}"; do
  bash scripts/run-suites.sh "${runtime}" "${SMOKE[@]}" || status=1
done
# Every run's failures again, last, so the end of the log says what failed on which release.
cat "${FAILURE_SUMMARY}"
exit "${status}"
