// createKubernetesSandboxBackend: the Rust Kubernetes driver behind the shared Rust owner.
import { errorFromDescriptor, SandboxUnsupportedError } from './errors.js';
import { settle } from './driver-port.js';
import { deepFreeze } from './freeze.js';
import { GUEST_LAYOUT } from './guest-layout.js';
import { native } from './native.js';
import { persistPort, reservationFace } from './owner.js';
import { nativeReconcile } from './reconcile.js';
import { admitReservation } from './backend.js';

/** Linux hosts only in this version (the addon for macOS carries no Kubernetes client). */
const built = typeof native.NativeKubernetesBackend === 'function';

/** The fixed guest layout of every Kubernetes sandbox: the same as on Docker. */
export const KUBERNETES_SANDBOX_GUEST = GUEST_LAYOUT;

/** See kubernetes.d.ts. */
export async function createKubernetesSandboxBackend(options) {
  if (!built) {
    throw new SandboxUnsupportedError(`native-sandbox/kubernetes: this version's Kubernetes backend runs on Linux hosts only (this host is ${process.platform})`);
  }
  const noOwner = { owner: undefined, errors: undefined };
  settle(native.parseKubernetesOptions(options), noOwner, errorFromDescriptor);
  const backend = new native.NativeKubernetesBackend(options);
  settle(await backend.connect(), noOwner, errorFromDescriptor);
  const support = deepFreeze(backend.support());
  return Object.freeze({
    support,
    reserve(request, recovery) {
      const { parsed, policy } = admitReservation(request, recovery, support);
      const port = persistPort(policy);
      const owner = backend.reserve(parsed, policy.kind === 'persisted', port.invoke);
      const context = { owner: undefined, errors: port.errors };
      return reservationFace({ owner, context, request: parsed, processPort: true });
    },
    reconcile: nativeReconcile(backend, support),
  });
}
