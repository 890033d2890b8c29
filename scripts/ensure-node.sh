#!/usr/bin/env bash
# Prints the path of a Node.js VERSION binary for this machine (linux, x64 or arm64), fetched once
# from npm's node-linux-<arch> package into target/node/VERSION-<arch> (a registry package: no
# other download). The binary is put in place only once whole, so an interrupted fetch is fetched
# again next time.
#   bash scripts/ensure-node.sh 26.12.1
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="${1:?usage: ensure-node.sh VERSION}"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) arch=x64 ;;
  Linux-aarch64 | Linux-arm64) arch=arm64 ;;
  *) echo "ensure-node: no npm Node.js package for $(uname -s)-$(uname -m); put Node.js ${version} on PATH and run the suites with scripts/run-suites.sh" >&2; exit 1 ;;
esac
directory="target/node/${version}-${arch}"
binary="${directory}/bin/node"
if [ ! -x "${binary}" ]; then
  mkdir -p target/node
  staging="$(mktemp -d "target/node/.fetch-XXXXXX")"
  trap 'rm -rf "${staging}"' EXIT
  (cd "${staging}" && npm pack --silent "node-linux-${arch}@${version}" >/dev/null \
    && tar -xzf "node-linux-${arch}-${version}.tgz" package/bin/node) >&2 \
    || { echo "ensure-node: could not fetch node-linux-${arch}@${version} from npm" >&2; exit 1; }
  mkdir -p "${directory}/bin"
  mv "${staging}/package/bin/node" "${binary}.partial"
  mv "${binary}.partial" "${binary}"
fi
actual="$("${binary}" --version)"
[ "${actual}" = "v${version}" ] || { echo "ensure-node: ${binary} is ${actual}, not v${version}" >&2; exit 1; }
echo "$(pwd)/${binary}"
