# Where the test cluster lives and what it is built from (sourced by scripts/cluster/*.sh).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KUBERNETES_VERSION="${NATIVE_SANDBOX_KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${NATIVE_SANDBOX_ETCD_VERSION:-v3.6.16}"
CNI_VERSION="${NATIVE_SANDBOX_CNI_VERSION:-1.1.1+ds1-3+b5}"
GOPROXY_URL="${GOPROXY_URL:-https://proxy.golang.org}"
CLUSTER_HOME="${NATIVE_SANDBOX_CLUSTER_HOME:-${repo}/target/cluster}"
# The built binaries and the Go caches behind them are kept per machine, beside no checkout, so a
# fresh clone on the same machine (CI's) starts the cluster without building it again; a new
# machine builds them once (build.sh, stamped by the versions above).
CLUSTER_CACHE="${NATIVE_SANDBOX_CLUSTER_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/native-sandbox/cluster}"
CLUSTER_BIN="${CLUSTER_CACHE}/bin"
CLUSTER_BUILD="${CLUSTER_CACHE}/build"
# Everything the running cluster writes (certificates, etcd's data, containerd's root and state,
# the kubelet's root, logs, pids); `cluster:down` removes it whole.
CLUSTER_RUN="${CLUSTER_HOME}/run"
# The file up.sh leaves in CLUSTER_RUN: down.sh removes only a directory that holds it.
CLUSTER_MARK=".native-sandbox-test-cluster"
