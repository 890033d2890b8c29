// createKubernetesSandboxBackend: the Rust Kubernetes driver behind the shared Rust owner.
import { errorFromDescriptor, SandboxUnsupportedError } from './errors.js';
import { settle } from './driver-port.js';
import { deepFreeze } from './freeze.js';
import { GUEST_LAYOUT } from './guest-layout.js';
import { native } from './native.js';
import { reservationFace } from './owner.js';
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
      if (policy.kind !== 'in_process') {
        throw new SandboxUnsupportedError("native-sandbox/kubernetes: only { kind: 'in_process' } recovery is offered in this version (persisted records cannot be reconciled on a cluster yet)");
      }
      const owner = backend.reserve(parsed);
      return reservationFace({ owner, context: { owner: undefined, errors: undefined }, request: parsed, processPort: true });
    },
    async reconcile() {
      throw new SandboxUnsupportedError('native-sandbox/kubernetes: reconciling records is not offered in this version (only in_process sandboxes are reserved)');
    },
  });
}
