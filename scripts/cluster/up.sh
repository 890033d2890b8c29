#!/usr/bin/env bash
# `npm run cluster:up`: builds (scripts/cluster/build.sh, cached) and starts a single-node
# Kubernetes cluster on this machine, every daemon its own (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, a containerd instance with its own config, root,
# state and socket, and the kubelet), bound to 127.0.0.1, with the pause image and the guest
# image imported (no registry). Prints the kubeconfig's path last. `npm run cluster:down` stops
# it and puts back everything it changed on the machine. Never touches the Docker engine's
# containerd.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/env.sh"

fail() { echo "cluster:up: $*" >&2; exit 1; }
say() { echo "cluster:up: $*" >&2; }

[ "$(id -u)" = 0 ] || fail "the kubelet and containerd need root"
if [ -f "${CLUSTER_RUN}/pids/kube-apiserver.pid" ] &&
  tr '\0' ' ' <"/proc/$(cat "${CLUSTER_RUN}/pids/kube-apiserver.pid")/cmdline" 2>/dev/null | grep -qF "${CLUSTER_BIN}/kube-apiserver"; then
  say "already up"
  echo "${CLUSTER_RUN}/admin.kubeconfig"
  exit 0
fi
bash "${here}/down.sh" >/dev/null 2>&1 || true

bash "${here}/build.sh" || fail "building the cluster's binaries failed"
bash "${repo}/scripts/ensure-docker.sh" >/dev/null || fail "no Docker engine (the guest image comes from it)"
bash "${repo}/scripts/build-guest-image.sh" || fail "the guest image could not be built"

# A start that fails partway leaves nothing running and puts the machine back.
completed=0
trap '[ "${completed}" = 1 ] || bash "${here}/down.sh" >/dev/null 2>&1' EXIT

NODE=127.0.0.1
BRIDGE=nstest0
POD_SUBNET=10.244.77.0/24
API_PORT=16443
mkdir -p "${CLUSTER_RUN}"/{pki,pids,logs,etcd,cni/net.d,cni/ipam,containerd,kubelet}
touch "${CLUSTER_RUN}/${CLUSTER_MARK}"
RUN="${CLUSTER_RUN}"
PKI="${RUN}/pki"
BIN="${CLUSTER_BIN}"
export PATH="${BIN}:${PATH}"

# What this run changes outside its own directory, recorded first so `down` puts it back.
state="${RUN}/machine-before"
{
  # What the kubelet's kernel tunables set (kernel.panic, panic_on_oops, vm.overcommit_memory,
  # vm.panic_on_oom, the root keyring's quotas).
  for key in kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
    echo "sysctl ${key} $(sysctl -n "${key}")"
  done
  for path in /var/log/pods /var/log/containers /var/lib/kubelet /var/lib/cni /usr/libexec/kubernetes /run/netns; do
    [ -e "${path}" ] || echo "absent ${path}"
  done
  # Network namespaces and kubelet cgroups that were there before are someone else's.
  for netns in $(ip netns list 2>/dev/null | awk '{print $1}'); do echo "netns ${netns}"; done
  for hierarchy in /sys/fs/cgroup/* /sys/fs/cgroup; do
    for cgroup in "${hierarchy}"/kubepods*; do [ -d "${cgroup}" ] && echo "cgroup ${cgroup}"; done
  done
} >"${state}"

# Certificates: one CA; the API server's serving certificate; a client per component.
cert() {
  local name="$1" subject="$2" extensions="$3"
  openssl req -new -newkey rsa:2048 -nodes -keyout "${PKI}/${name}.key" -subj "${subject}" -out "${PKI}/${name}.csr" 2>/dev/null
  printf '%s\n' "${extensions}" >"${PKI}/${name}.ext"
  openssl x509 -req -in "${PKI}/${name}.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "${PKI}/${name}.ext" -out "${PKI}/${name}.crt" 2>/dev/null
}
openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "${PKI}/ca.key" -subj "/CN=native-sandbox-test-ca" -days 30 -out "${PKI}/ca.crt" 2>/dev/null
client_ext="basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
cert kubelet-serving "/CN=${NODE}" "basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:${NODE}"
cert admin "/O=system:masters/CN=native-sandbox-test-admin" "${client_ext}"
cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "${client_ext}"
cert kubelet "/O=system:nodes/CN=system:node:${NODE}" "${client_ext}"
cert controller-manager "/CN=system:kube-controller-manager" "${client_ext}"
cert scheduler "/CN=system:kube-scheduler" "${client_ext}"
openssl genrsa -out "${PKI}/sa.key" 2048 2>/dev/null
openssl rsa -in "${PKI}/sa.key" -pubout -out "${PKI}/sa.pub" 2>/dev/null

kubeconfig() {
  local name="$1" user="$2"
  cat >"${RUN}/${name}.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: native-sandbox-test
  cluster:
    server: https://127.0.0.1:${API_PORT}
    certificate-authority: ${PKI}/ca.crt
users:
- name: ${user}
  user:
    client-certificate: ${PKI}/${user}.crt
    client-key: ${PKI}/${user}.key
contexts:
- name: native-sandbox-test
  context:
    cluster: native-sandbox-test
    user: ${user}
current-context: native-sandbox-test
KUBECONFIG
}
kubeconfig admin admin
kubeconfig kubelet kubelet
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler

start() {
  local name="$1"
  shift
  setsid "$@" >"${RUN}/logs/${name}.log" 2>&1 </dev/null &
  echo $! >"${RUN}/pids/${name}.pid"
}

# Waits up to $2 seconds for the command in $3... to succeed, else shows the log of $1.
await() {
  local name="$1" seconds="$2"
  shift 2
  local until=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "${SECONDS}" -ge "${until}" ] || ! kill -0 "$(cat "${RUN}/pids/${name}.pid")" 2>/dev/null; then
      tail -n 30 "${RUN}/logs/${name}.log" >&2
      fail "${name} did not come up within ${seconds} s"
    fi
    sleep 0.3
  done
}

say "etcd"
start etcd "${BIN}/etcd" --name native-sandbox-test --data-dir "${RUN}/etcd" \
  --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
  --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
  --initial-cluster native-sandbox-test=http://127.0.0.1:12380 --listen-metrics-urls http://127.0.0.1:12381
await etcd 60 curl -fsS http://127.0.0.1:12379/health

say "kube-apiserver"
start kube-apiserver "${BIN}/kube-apiserver" --etcd-servers=http://127.0.0.1:12379 \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="${API_PORT}" \
  --tls-cert-file="${PKI}/apiserver.crt" --tls-private-key-file="${PKI}/apiserver.key" \
  --client-ca-file="${PKI}/ca.crt" \
  --service-account-key-file="${PKI}/sa.pub" --service-account-signing-key-file="${PKI}/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.96.0.0/16 \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --kubelet-client-certificate="${PKI}/apiserver-kubelet.crt" --kubelet-client-key="${PKI}/apiserver-kubelet.key" \
  --kubelet-certificate-authority="${PKI}/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
  --endpoint-reconciler-type=none --allow-privileged=false --profiling=false
admin=(--kubeconfig "${RUN}/admin.kubeconfig")
await kube-apiserver 120 kubectl "${admin[@]}" get --raw /readyz

say "kube-controller-manager and kube-scheduler"
start kube-controller-manager "${BIN}/kube-controller-manager" --kubeconfig="${RUN}/controller-manager.kubeconfig" \
  --authentication-kubeconfig="${RUN}/controller-manager.kubeconfig" --authorization-kubeconfig="${RUN}/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=20257 --leader-elect=false \
  --service-account-private-key-file="${PKI}/sa.key" --root-ca-file="${PKI}/ca.crt" --use-service-account-credentials=true
start kube-scheduler "${BIN}/kube-scheduler" --kubeconfig="${RUN}/scheduler.kubeconfig" \
  --authentication-kubeconfig="${RUN}/scheduler.kubeconfig" --authorization-kubeconfig="${RUN}/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=20259 --leader-elect=false

say "containerd (its own instance)"
cat >"${RUN}/cni/net.d/10-native-sandbox-test.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "native-sandbox-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": false,
      "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "${POD_SUBNET}" }]], "dataDir": "${RUN}/cni/ipam" }
    }
  ]
}
CNI
CONTAINERD_SOCKET="${RUN}/containerd/containerd.sock"
cat >"${RUN}/containerd/config.toml" <<TOML
version = 2
root = "${RUN}/containerd/root"
state = "${RUN}/containerd/state"
[grpc]
  address = "${CONTAINERD_SOCKET}"
[ttrpc]
  address = "${CONTAINERD_SOCKET}.ttrpc"
[debug]
  address = "${RUN}/containerd/debug.sock"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${RUN}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "native-sandbox.test/pause:1"
  enable_selinux = false
  # This machine's root may not lower an OOM score (no CAP_SYS_RESOURCE here): the kubelet's
  # negative scores are kept at containerd's own instead of failing every pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${BIN}/cni"
    conf_dir = "${RUN}/cni/net.d"
TOML
start containerd /usr/bin/containerd --config "${RUN}/containerd/config.toml"
ctr=(ctr --address "${CONTAINERD_SOCKET}" --namespace k8s.io)
await containerd 30 "${ctr[@]}" version

say "images: pause and the guest image"
images="${RUN}/images"
mkdir -p "${images}/pause"
gcc -static -O2 -o "${images}/pause/pause" "${here}/pause.c"
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"${images}/pause/Dockerfile"
docker build --quiet --tag native-sandbox.test/pause:1 "${images}/pause" >"${RUN}/logs/pause-image.log" 2>&1 ||
  { cat "${RUN}/logs/pause-image.log" >&2; fail "the pause image could not be built"; }
docker save native-sandbox.test/pause:1 -o "${images}/pause.tar"
docker save native-sandbox/busybox:1 -o "${images}/busybox.tar"
"${ctr[@]}" images import "${images}/pause.tar" >/dev/null
"${ctr[@]}" images import "${images}/busybox.tar" >/dev/null
rm -f "${images}/pause.tar" "${images}/busybox.tar"

say "kubelet"
cat >"${RUN}/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 20250
healthzBindAddress: 127.0.0.1
healthzPort: 20248
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${PKI}/ca.crt
authorization:
  mode: Webhook
tlsCertFile: ${PKI}/kubelet-serving.crt
tlsPrivateKeyFile: ${PKI}/kubelet-serving.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${CONTAINERD_SOCKET}
makeIPTablesUtilChains: false
failSwapOn: false
failCgroupV1: false
# Every pod's PID limit: the Kubernetes backend's tests report it as the effective resources.pids.
podPidsLimit: 256
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
YAML
start kubelet "${BIN}/kubelet" --config="${RUN}/kubelet/config.yaml" --kubeconfig="${RUN}/kubelet.kubeconfig" \
  --hostname-override="${NODE}" --root-dir="${RUN}/kubelet/root"
await kubelet 120 kubectl "${admin[@]}" wait --for=condition=Ready "node/${NODE}" --timeout=1s
await kube-controller-manager 60 kubectl "${admin[@]}" get serviceaccount default --namespace default

completed=1
say "up: node ${NODE} Ready"
echo "${RUN}/admin.kubeconfig"
