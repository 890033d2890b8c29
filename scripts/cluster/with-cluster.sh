#!/usr/bin/env bash
# Runs a command against the test cluster: starts it when none answers (building it once, cached
# per machine under ~/.cache/native-sandbox/cluster) and, when it started it, stops it again
# afterwards and puts the machine back (unless NATIVE_SANDBOX_KEEP_CLUSTER=1). The command finds
# the cluster in NATIVE_SANDBOX_KUBECONFIG and kubectl in NATIVE_SANDBOX_KUBECTL.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

fail() { echo "with-cluster: $*" >&2; exit 1; }

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
"$@"
