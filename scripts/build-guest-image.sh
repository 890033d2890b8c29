#!/usr/bin/env bash
# Builds the busybox guest image locally (no registry is reachable): FROM scratch, the static
# busybox from Debian's busybox-static with its applets installed, and the fixed environment the
# Docker backend admits. Idempotent: an existing image under the tag is kept.
set -euo pipefail

tag="${NATIVE_SANDBOX_GUEST_IMAGE:-native-sandbox/busybox:1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "${here}/ensure-docker.sh"

if docker image inspect "${tag}" >/dev/null 2>&1; then
  exit 0
fi

busybox_bin="$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -n 1 || true)"
if [ -z "${busybox_bin}" ] || ! [ -x "${busybox_bin}" ]; then
  echo "build-guest-image: the static busybox of Debian's busybox-static is missing" >&2
  exit 1
fi

context="$(mktemp -d)"
trap 'rm -rf "${context}"' EXIT
mkdir -p "${context}/rootfs/bin" "${context}/rootfs/sandbox/workspace" "${context}/rootfs/sandbox/home" \
  "${context}/rootfs/sandbox/tmp" "${context}/rootfs/tmp" "${context}/rootfs/etc"
cp "${busybox_bin}" "${context}/rootfs/bin/busybox"
# One hard link per applet, so /bin/sh, /bin/cat and the rest exist without a shell at build time.
for applet in $("${busybox_bin}" --list); do
  [ "${applet}" = "busybox" ] || ln -f "${context}/rootfs/bin/busybox" "${context}/rootfs/bin/${applet}"
done
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:65532:65532:sandbox:/sandbox/home:/bin/sh\n' >"${context}/rootfs/etc/passwd"
printf 'root:x:0:\nsandbox:x:65532:\n' >"${context}/rootfs/etc/group"
cat >"${context}/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV HOME=/sandbox/home TMPDIR=/sandbox/tmp PATH=/usr/local/bin:/usr/bin:/bin
DOCKERFILE
if ! docker build --quiet --tag "${tag}" "${context}" >"${context}/build.log" 2>&1; then
  cat "${context}/build.log" >&2
  echo "build-guest-image: docker build of ${tag} failed" >&2
  exit 1
fi
echo "build-guest-image: built ${tag}" >&2
