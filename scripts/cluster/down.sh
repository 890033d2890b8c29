#!/usr/bin/env bash
# `npm run cluster:down`: stops the test cluster (scripts/cluster/up.sh) and puts back what it
# changed on the machine: its daemons and pod processes stopped (only processes that are its own:
# a recorded PID is checked against its command line first), its mounts undone, the network
# namespaces, bridge and kubelet cgroups it made removed, the sysctls the kubelet set restored,
# and the host paths it made removed. The built binaries stay (~/.cache/native-sandbox/cluster/bin). Idempotent.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/env.sh"
RUN="${CLUSTER_RUN}"
BRIDGE=nstest0

# Only a directory up.sh made (it holds the mark) is this cluster's.
[ -f "${RUN}/${CLUSTER_MARK}" ] || exit 0
state="${RUN}/machine-before"
recorded() { [ -f "${state}" ] && grep -qxF "$1" "${state}"; }

# Whether `pid` runs one of this cluster's programs (its binaries, or anything told of its run
# directory): a PID recorded before a reboot may name another process now.
ours() {
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  case "${cmdline}" in
    *"${CLUSTER_BIN}/"* | *"${RUN}/"*) return 0 ;;
    *) return 1 ;;
  esac
}

stop_pid() {
  local pid="$1"
  ours "${pid}" || return 0
  kill -TERM "${pid}" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "${pid}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "${pid}" 2>/dev/null || true
}

stop_named() {
  [ -f "${RUN}/pids/$1.pid" ] && stop_pid "$(cat "${RUN}/pids/$1.pid")"
}

# The kubelet first (it restarts nothing once gone), then the control plane, then containerd.
for name in kubelet kube-scheduler kube-controller-manager kube-apiserver; do stop_named "${name}"; done
# The pods' processes: every shim of this containerd (its socket is in its command line) and
# what runs below it.
socket="${RUN}/containerd/containerd.sock"
for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address ${socket}" || true); do
  for child in $(pgrep -P "${pid}" || true); do
    pkill -KILL -P "${child}" 2>/dev/null || true
    kill -KILL "${child}" 2>/dev/null || true
  done
  stop_pid "${pid}"
done
for name in containerd etcd; do stop_named "${name}"; done

# Mounts under the cluster's directory, deepest first.
awk -v root="${RUN}" '$5 == root || index($5, root "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
  while read -r mount; do umount -l "${mount}" 2>/dev/null || true; done
# The pods' network namespaces (CNI names them cni-*), those made since up.
for netns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
  recorded "netns ${netns}" || ip netns delete "${netns}" 2>/dev/null || true
done
ip link delete "${BRIDGE}" 2>/dev/null || true
# The kubelet's cgroups in every v1 hierarchy (or the unified one), leaf first, those made since up.
for hierarchy in /sys/fs/cgroup/* /sys/fs/cgroup; do
  for cgroup in "${hierarchy}"/kubepods*; do
    [ -d "${cgroup}" ] || continue
    recorded "cgroup ${cgroup}" && continue
    find "${cgroup}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
done

if [ -f "${state}" ]; then
  while read -r kind key value; do
    case "${kind}" in
      sysctl) sysctl -q -w "${key}=${value}" >/dev/null 2>&1 || true ;;
      absent) rm -rf --one-file-system "${key}" 2>/dev/null || true ;;
    esac
  done <"${state}"
fi
rm -rf --one-file-system "${RUN}"
echo "cluster:down: stopped, the machine as before" >&2
