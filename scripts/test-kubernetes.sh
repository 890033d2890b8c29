#!/usr/bin/env bash
# `npm run test:kubernetes`: the Kubernetes backend's suites (__test__/cluster/) on Node.js 26
# against the single-node test cluster. Starts the cluster when none answers (building it once,
# cached per machine under ~/.cache/native-sandbox/cluster) and, when it started it, stops it again and puts the machine back.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "test:kubernetes: $*" >&2; exit 1; }

NODE_26_VERSION=26.12.1
node26="$(bash scripts/ensure-node.sh "${NODE_26_VERSION}")" || fail "Node.js ${NODE_26_VERSION} could not be fetched from npm"
[ -f native-sandbox.linux-x64-gnu.node ] || node scripts/build-addon.mjs || fail "addon build"

source scripts/cluster/env.sh
# Up already when its API server's recorded process is alive and is this cluster's (as up.sh checks).
started=1
if [ -f "${CLUSTER_RUN}/pids/kube-apiserver.pid" ] &&
  tr '\0' ' ' <"/proc/$(cat "${CLUSTER_RUN}/pids/kube-apiserver.pid")/cmdline" 2>/dev/null | grep -qF "${CLUSTER_BIN}/kube-apiserver"; then
  started=0
fi
kubeconfig="$(bash scripts/cluster/up.sh)" || fail "the test cluster did not start"
if [ "${started}" = 1 ] && [ "${NATIVE_SANDBOX_KEEP_CLUSTER:-0}" != 1 ]; then
  trap 'bash scripts/cluster/down.sh >&2' EXIT
fi

export NATIVE_SANDBOX_KUBECONFIG="${kubeconfig}"
export NATIVE_SANDBOX_KUBECTL="${CLUSTER_BIN}/kubectl"
export NATIVE_SANDBOX_TEST_RUN="${NATIVE_SANDBOX_TEST_RUN:-run$(date +%s)}"
bash scripts/run-suites.sh "${node26}" __test__/cluster/*.test.mjs
