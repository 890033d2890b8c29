#!/usr/bin/env bash
# `npm run cluster:down`: stops the test cluster (scripts/cluster/up.sh) and puts back what it
# changed on the machine: every daemon and pod process stopped by PID, its mounts undone, its
# network namespaces, bridge and cgroups removed, the sysctls the kubelet set restored, and the
# host paths it made removed. The built binaries stay (target/cluster/bin). Idempotent.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/env.sh"
RUN="${CLUSTER_RUN}"
BRIDGE=nstest0

[ -d "${RUN}" ] || exit 0

stop_pid() {
  local pid="$1"
  kill -TERM "${pid}" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "${pid}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "${pid}" 2>/dev/null || true
}

# The kubelet first (it restarts nothing once gone), then the control plane, then containerd.
for name in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
  [ -f "${RUN}/pids/${name}.pid" ] && stop_pid "$(cat "${RUN}/pids/${name}.pid")"
done
# The pods' processes: every shim of this containerd (its socket is in its command line) and
# what runs below it.
socket="${RUN}/containerd/containerd.sock"
for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address ${socket}" || true); do
  pkill -KILL -P "${pid}" 2>/dev/null || true
  for child in $(pgrep -P "${pid}" || true); do pkill -KILL -P "${child}" 2>/dev/null || true; done
  stop_pid "${pid}"
done
for name in containerd etcd; do
  [ -f "${RUN}/pids/${name}.pid" ] && stop_pid "$(cat "${RUN}/pids/${name}.pid")"
done

# Mounts under the cluster's directory and the kubelet's fixed paths, deepest first.
for root in "${RUN}" /var/lib/kubelet /run/containerd/io.containerd.grpc.v1.cri; do
  awk -v root="${root}" '$5 == root || index($5, root "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r mount; do umount -l "${mount}" 2>/dev/null || true; done
done
# The pods' network namespaces (CNI names them cni-*; Docker makes none under /run/netns).
for netns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
  ip netns delete "${netns}" 2>/dev/null || true
done
ip link delete "${BRIDGE}" 2>/dev/null || true
# The kubelet's cgroups in every v1 hierarchy (or the unified one), leaf first.
for hierarchy in /sys/fs/cgroup/* /sys/fs/cgroup; do
  [ -d "${hierarchy}/kubepods" ] || [ -d "${hierarchy}/kubepods.slice" ] || continue
  find "${hierarchy}"/kubepods* -depth -type d -exec rmdir {} \; 2>/dev/null || true
done

state="${RUN}/machine-before"
if [ -f "${state}" ]; then
  while read -r kind key value; do
    case "${kind}" in
      sysctl) sysctl -q -w "${key}=${value}" >/dev/null 2>&1 || true ;;
      absent) rm -rf "${key}" 2>/dev/null || true ;;
    esac
  done <"${state}"
fi
rm -rf "${RUN}"
echo "cluster:down: stopped, the machine as before" >&2
