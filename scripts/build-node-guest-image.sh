#!/usr/bin/env bash
# Builds the Node.js guest image for the ACP and agentproto examples and tests, locally (no
# registry): FROM scratch, the host's node binary and the shared libraries it links, the example
# ACP agent with the Agent Client Protocol SDK it imports (/opt/agent), and the example MCP stdio
# daemon with the MCP SDK and everything it needs at run time (/opt/mcp). Rebuilt only when its
# content changes.
set -euo pipefail

tag="${NATIVE_SANDBOX_NODE_GUEST_IMAGE:-native-sandbox/node-agent:1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
bash "${here}/ensure-docker.sh"

node_bin="$(readlink -f "${NATIVE_SANDBOX_GUEST_NODE:-$(command -v node)}")"
sdk="${root}/node_modules/@agentclientprotocol/sdk"
zod="${root}/node_modules/zod"
agent="${root}/examples/acp/agent.mjs"
daemon="${root}/examples/agentproto/server.mjs"
mcp_packages="$(node "${here}/package-closure.mjs" @modelcontextprotocol/sdk)"
for needed in "${node_bin}" "${sdk}/package.json" "${zod}/package.json" "${agent}" "${daemon}"; do
  [ -e "${needed}" ] || { echo "build-node-guest-image: ${needed} is missing (run npm install)" >&2; exit 1; }
done

content="$( { "${node_bin}" --version; sha256sum "${agent}" "${daemon}"; grep '"version"' "${sdk}/package.json" "${zod}/package.json";
  for package in ${mcp_packages}; do echo "${package}"; grep -m1 '"version"' "${root}/node_modules/${package}/package.json"; done; } | sha256sum | cut -c1-16)"
current="$(docker image inspect --format '{{index .Config.Labels "dev.native-sandbox.content"}}' "${tag}" 2>/dev/null || true)"
if [ "${current}" = "${content}" ]; then
  exit 0
fi

context="$(mktemp -d)"
trap 'rm -rf "${context}"' EXIT
rootfs="${context}/rootfs"
mkdir -p "${rootfs}/usr/local/bin" "${rootfs}/opt/agent/node_modules/@agentclientprotocol" \
  "${rootfs}/sandbox/workspace" "${rootfs}/sandbox/home" "${rootfs}/sandbox/tmp" "${rootfs}/etc"
cp "${node_bin}" "${rootfs}/usr/local/bin/node"
# The dynamic loader and every library node links, at the paths the loader will look for them.
for library in $(ldd "${node_bin}" | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(/{print $1}'); do
  mkdir -p "${rootfs}$(dirname "${library}")"
  cp -L "${library}" "${rootfs}${library}"
done
cp -R "${sdk}" "${rootfs}/opt/agent/node_modules/@agentclientprotocol/sdk"
cp -R "${zod}" "${rootfs}/opt/agent/node_modules/zod"
cp "${agent}" "${rootfs}/opt/agent/agent.mjs"
for package in ${mcp_packages}; do
  mkdir -p "$(dirname "${rootfs}/opt/mcp/node_modules/${package}")"
  cp -R "${root}/node_modules/${package}" "${rootfs}/opt/mcp/node_modules/${package}"
done
cp "${daemon}" "${rootfs}/opt/mcp/server.mjs"
printf 'root:x:0:0:root:/root:/sbin/nologin\nsandbox:x:65532:65532:sandbox:/sandbox/home:/sbin/nologin\n' >"${rootfs}/etc/passwd"
cat >"${context}/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
ENV HOME=/sandbox/home TMPDIR=/sandbox/tmp PATH=/usr/local/bin:/usr/bin:/bin
LABEL dev.native-sandbox.content=${content}
DOCKERFILE
if ! docker build --quiet --tag "${tag}" "${context}" >"${context}/build.log" 2>&1; then
  cat "${context}/build.log" >&2
  echo "build-node-guest-image: docker build of ${tag} failed" >&2
  exit 1
fi
echo "build-node-guest-image: built ${tag}" >&2
