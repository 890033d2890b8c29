#!/usr/bin/env bash
# `npm run test:kubernetes`: the Kubernetes backend's suites (__test__/cluster/) on Node.js 26
# against the single-node test cluster (scripts/cluster/with-cluster.sh starts it when none
# answers, and stops it again when it started it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "test:kubernetes: $*" >&2; exit 1; }

NODE_26_VERSION=26.12.1
node26="$(bash scripts/ensure-node.sh "${NODE_26_VERSION}")" || fail "Node.js ${NODE_26_VERSION} could not be fetched from npm"
[ -f native-sandbox.linux-x64-gnu.node ] || node scripts/build-addon.mjs || fail "addon build"

export NATIVE_SANDBOX_TEST_RUN="${NATIVE_SANDBOX_TEST_RUN:-run$(date +%s)}"
bash scripts/cluster/with-cluster.sh bash scripts/run-suites.sh "${node26}" __test__/cluster/*.test.mjs
