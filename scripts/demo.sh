#!/usr/bin/env bash
# The main job (`npm run demo`): builds the release addon, brings the Docker engine and the guest
# image up when needed, then runs the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
node scripts/build-addon.mjs
bash scripts/ensure-docker.sh
bash scripts/build-guest-image.sh
node examples/demo.mjs
