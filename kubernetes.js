// native-sandbox/kubernetes: one hardened pod per sandbox on a Kubernetes cluster.
export { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from './js/kubernetes.js';
