#!/usr/bin/env bash
# Makes sure a Docker engine answers, installing and starting one when none does.
# Idempotent and quiet when an engine is already reachable (DOCKER_HOST or the default socket).
set -euo pipefail

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
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
  apt-get update -qq >/dev/null
  apt-get install -y -qq docker.io busybox-static >/dev/null
fi

if ! engine_answers; then
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "ensure-docker: starting dockerd (log: ${log_file})" >&2
    nohup dockerd >"${log_file}" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 "${wait_seconds}"); do
    if engine_answers; then
      exit 0
    fi
    sleep 1
  done
  echo "ensure-docker: dockerd did not answer within ${wait_seconds}s; see ${log_file}" >&2
  tail -n 20 "${log_file}" >&2 || true
  exit 1
fi
