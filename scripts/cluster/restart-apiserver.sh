#!/usr/bin/env bash
# Restarts the test cluster's API server, as a fault a user meets (__test__/cluster/kubernetes-
# faults.test.mjs): killed (a crash: its graceful stop waits up to a minute for long requests),
# then after the pause asked (seconds, default 0) the same command line again, and waits until it
# answers /readyz. Prints how long it was away, in milliseconds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
fail() { echo "cluster:restart-apiserver: $*" >&2; exit 1; }

pause="${1:-0}"
pidfile="${CLUSTER_RUN}/pids/kube-apiserver.pid"
[ -f "${pidfile}" ] || fail "no API server of the test cluster runs"
pid="$(cat "${pidfile}")"
tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF "${CLUSTER_BIN}/kube-apiserver" || fail "process ${pid} is not the test cluster's API server"
mapfile -d '' command <"/proc/${pid}/cmdline"
began="$(date +%s%3N)"
kill -KILL "${pid}"
for _ in $(seq 1 100); do
  kill -0 "${pid}" 2>/dev/null || break
  sleep 0.1
done
sleep "${pause}"
setsid "${command[@]}" >>"${CLUSTER_RUN}/logs/kube-apiserver.log" 2>&1 </dev/null &
echo $! >"${pidfile}"
for _ in $(seq 1 600); do
  if "${CLUSTER_BIN}/kubectl" --kubeconfig "${CLUSTER_RUN}/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    echo "$(($(date +%s%3N) - began))"
    exit 0
  fi
  sleep 0.2
done
fail "the API server did not answer /readyz within 120 s of its restart"
