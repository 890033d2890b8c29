#!/usr/bin/env bash
# Makes sure a Docker engine answers, installing and starting one when none does.
# Idempotent and quiet when an engine is already reachable (DOCKER_HOST or the default socket).
set -euo pipefail
# shellcheck source=apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

log_file="${NATIVE_SANDBOX_DOCKERD_LOG:-/var/log/native-sandbox-dockerd.log}"
wait_seconds="${NATIVE_SANDBOX_DOCKERD_WAIT:-60}"

engine_answers() {
  command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1
}

if engine_answers; then
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST#unix://}" = "${DOCKER_HOST}" ]; then
  echo "ensure-docker: DOCKER_HOST=${DOCKER_HOST} does not answer, and only a local engine can be started here" >&2
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v busybox >/dev/null 2>&1 \
   || ! dpkg -s busybox-static >/dev/null 2>&1; then
  if [ "$(id -u)" != "0" ]; then
    echo "ensure-docker: no Docker engine answers and installing one needs root (apt-get install docker.io busybox-static)" >&2
    exit 1
  fi
  echo "ensure-docker: installing docker.io and busybox-static from Debian" >&2
  apt_install ensure-docker docker.io busybox-static
fi

# A machine restored from a snapshot keeps the pid files of an engine that no longer runs.
# dockerd refuses to start while its pid file names any live process, and after a restore
# that PID may well belong to something else. Called only when no dockerd runs; dockerd's own
# containerd may outlive it, and then its pid file stays so dockerd adopts it.
remove_stale_pid_files() {
  rm -f /var/run/docker.pid
  if ! pgrep -x containerd >/dev/null 2>&1; then
    rm -f /var/run/docker/containerd/containerd.pid
  fi
}

# dockerd started here, up to three times: one that exits before answering (its containerd timed
# out starting, as when a killed engine's containerd is still going away) is started again once
# that containerd is gone.
attempts=3
for attempt in $(seq 1 "${attempts}"); do
  if engine_answers; then
    exit 0
  fi
  dockerd_pid=""
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    remove_stale_pid_files
    echo "ensure-docker: starting dockerd (log: ${log_file})" >&2
    nohup dockerd >"${log_file}" 2>&1 </dev/null &
    dockerd_pid=$!
  fi
  exited=""
  for _ in $(seq 1 "${wait_seconds}"); do
    if engine_answers; then
      exit 0
    fi
    if [ -n "${dockerd_pid}" ] && ! kill -0 "${dockerd_pid}" 2>/dev/null; then
      exited=1
      break
    fi
    sleep 1
  done
  if [ -z "${exited}" ]; then
    echo "ensure-docker: dockerd did not answer within ${wait_seconds}s; see ${log_file}" >&2
    tail -n 20 "${log_file}" >&2 || true
    exit 1
  fi
  echo "ensure-docker: dockerd exited before answering (attempt ${attempt} of ${attempts}); see ${log_file}" >&2
  tail -n 5 "${log_file}" >&2 || true
  # The engine's own containerd (under /var/run/docker) left by the dockerd that exited.
  for _ in $(seq 1 15); do
    pgrep -f '^containerd --config /var/run/docker/containerd/' >/dev/null 2>&1 || break
    sleep 1
  done
done
exit 1
