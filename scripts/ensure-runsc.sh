#!/usr/bin/env bash
# Makes sure the local Docker engine offers gVisor as the runtime `runsc`: installs Debian's
# runsc when absent, registers it in /etc/docker/daemon.json with the runtime argument
# `--network=none` (bridge networking under it does not work on this kind of machine), and has
# the running dockerd reload its configuration. Idempotent and quiet when the engine already
# lists the runtime. Run after scripts/ensure-docker.sh.
set -euo pipefail
# shellcheck source=apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

config="${NATIVE_SANDBOX_DOCKERD_CONFIG:-/etc/docker/daemon.json}"
wait_seconds="${NATIVE_SANDBOX_DOCKERD_WAIT:-60}"

engine_has_runsc() {
  timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

if engine_has_runsc; then
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST#unix://}" = "${DOCKER_HOST}" ]; then
  echo "ensure-runsc: the engine at DOCKER_HOST=${DOCKER_HOST} has no runsc runtime, and only a local engine can be given one here" >&2
  exit 1
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-runsc: the engine has no runsc runtime, and registering one needs root" >&2
  exit 1
fi

if ! command -v runsc >/dev/null 2>&1; then
  echo "ensure-runsc: installing runsc (gVisor) from Debian" >&2
  apt_install ensure-runsc runsc
fi

# Merge the runtime into the engine's configuration, keeping whatever else it holds.
mkdir -p "$(dirname "${config}")"
RUNSC_PATH="$(command -v runsc)" CONFIG="${config}" node --input-type=module -e '
  import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
  const file = process.env.CONFIG;
  const current = existsSync(file) && readFileSync(file, "utf8").trim() !== "" ? JSON.parse(readFileSync(file, "utf8")) : {};
  current.runtimes = { ...(current.runtimes ?? {}), runsc: { path: process.env.RUNSC_PATH, runtimeArgs: ["--network=none"] } };
  writeFileSync(`${file}.tmp`, `${JSON.stringify(current, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
'

# dockerd reloads its runtimes on SIGHUP.
if ! pkill -HUP -x dockerd; then
  echo "ensure-runsc: no dockerd runs here to reload ${config}; start it with scripts/ensure-docker.sh" >&2
  exit 1
fi
for _ in $(seq 1 "${wait_seconds}"); do
  if engine_has_runsc; then
    echo "ensure-runsc: the engine offers runsc" >&2
    exit 0
  fi
  sleep 1
done
echo "ensure-runsc: the engine did not list runsc within ${wait_seconds}s after reloading ${config}" >&2
exit 1
