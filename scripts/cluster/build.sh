#!/usr/bin/env bash
# Builds the test cluster's binaries from the registries only, into CLUSTER_BIN (env.sh: kept per
# machine, outside any checkout, so a fresh clone on the same machine reuses them; a new machine
# builds them): kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet and kubectl of Kubernetes ${KUBERNETES_VERSION} and etcd
# ${ETCD_VERSION} from the Go module proxy, and the CNI plugins from Debian's packages (downloaded
# and unpacked, nothing installed). containerd and runc are Debian's, the ones the machine has;
# the pause process is `pause.c`, built static by up.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/env.sh"

mkdir -p "${CLUSTER_BIN}" "${CLUSTER_BUILD}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GOPATH="${CLUSTER_BUILD}/go" GOMODCACHE="${CLUSTER_BUILD}/go/pkg/mod" GOCACHE="${CLUSTER_BUILD}/go-cache"

stamp="${CLUSTER_BIN}/.built-${KUBERNETES_VERSION}-${ETCD_VERSION}-${CNI_VERSION}"
if [ -f "${stamp}" ]; then
  exit 0
fi

# Kubernetes: a scratch module that requires k8s.io/kubernetes and repeats its replace block with
# every staging module at the same release (k8s.io/X => k8s.io/X v0.<minor>.<patch>).
k8s="${CLUSTER_BUILD}/kubernetes"
mkdir -p "${k8s}"
staging_version="v0.${KUBERNETES_VERSION#v1.}"
mod_url="${GOPROXY_URL}/k8s.io/kubernetes/@v/${KUBERNETES_VERSION}.mod"
curl -fsS --max-time 60 "${mod_url}" -o "${k8s}/upstream.mod"
{
  echo "module native-sandbox.test/cluster-build"
  echo
  echo "go $(awk '/^go /{print $2; exit}' "${k8s}/upstream.mod")"
  echo
  echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
  echo
  echo "replace ("
  awk '/^replace \(/{inside=1; next} inside && /^\)/{inside=0} inside && $1 ~ /^k8s.io\// && $2 == "=>" {print $1}' "${k8s}/upstream.mod" |
    while read -r module; do echo "	${module} => ${module} ${staging_version}"; done
  echo ")"
} >"${k8s}/go.mod"
cat >"${k8s}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
(
  cd "${k8s}"
  go mod tidy -e >/dev/null 2>&1 || true
  go mod download k8s.io/kubernetes
  for command in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    echo "cluster build: ${command} ${KUBERNETES_VERSION}" >&2
    go build -mod=mod -tags providerless -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION}" \
      -o "${CLUSTER_BIN}/${command}" "k8s.io/kubernetes/cmd/${command}"
  done
)

# etcd: a main that calls etcdmain.Main, in a module that requires the server at one release.
etcd="${CLUSTER_BUILD}/etcd"
mkdir -p "${etcd}"
cat >"${etcd}/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
cat >"${etcd}/go.mod" <<GOMOD
module native-sandbox.test/etcd-build

go 1.24

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
GOMOD
(
  cd "${etcd}"
  echo "cluster build: etcd ${ETCD_VERSION}" >&2
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "${CLUSTER_BIN}/etcd" .
)

# The CNI plugins come from Debian's package, unpacked here.
debs="${CLUSTER_BUILD}/debs"
rm -rf "${debs}" && mkdir -p "${debs}"
(
  cd "${debs}"
  apt-get download "containernetworking-plugins=${CNI_VERSION}" >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get download "containernetworking-plugins=${CNI_VERSION}" >/dev/null; }
  dpkg-deb -x containernetworking-plugins_*.deb unpacked
)
mkdir -p "${CLUSTER_BIN}/cni"
for plugin in bridge host-local loopback portmap; do
  cp "$(find "${debs}/unpacked" -type f -name "${plugin}" | head -n 1)" "${CLUSTER_BIN}/cni/${plugin}"
done
rm -rf "${debs}"
touch "${stamp}"
echo "cluster build: done in ${CLUSTER_BIN}" >&2
