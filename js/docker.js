// createDockerSandboxBackend: the Rust Docker driver behind the shared Rust owner.
import { errorFromDescriptor, SandboxOperationError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { deepFreeze } from './freeze.js';
import { GUEST_LAYOUT } from './guest-layout.js';
import { native } from './native.js';
import { nativeTransfersOf, persistPort, reservationFace } from './owner.js';
import { admitReservation } from './backend.js';
import { nativeReconcile } from './reconcile.js';
import { reaperRuntimeProblem, thisRuntime } from './reaper-runtime.js';

/**
 * How this process's reaper runs (src/docker/reaper/): this Node.js with the package's script.
 * The native side starts it at the first in_process sandbox's first checkpoint; where it cannot
 * run (`reaperUnavailable`, why), that start and every later in_process start fail, naming it.
 */
const runtime = thisRuntime();
const reaperCommand = [process.execPath, runtime.script ?? ''];
const reaperUnavailable = reaperRuntimeProblem(runtime);
/** The native recovered owner behind each reconciled owner face (the agentproto provider's). */
const recoveredNatives = new WeakMap();

/** The native recovered owner behind `owner`, a matched reconciliation's owner of this module. */
export function nativeRecoveredOf(owner) {
  return recoveredNatives.get(owner);
}

/** The fixed guest layout of every Docker sandbox. */
export const DOCKER_SANDBOX_GUEST = GUEST_LAYOUT;

/** See docker.d.ts. */
export function createDockerSandboxBackend(options) {
  const noOwner = { owner: undefined, errors: undefined };
  settle(native.parseDockerOptions(options), noOwner, errorFromDescriptor);
  let backend;
  try {
    backend = new native.NativeDockerBackend(options, reaperCommand, reaperUnavailable ?? null);
  } catch (cause) {
    throw new SandboxOperationError('driver_failure', `native-sandbox/docker: ${cause.message}`, { cause });
  }
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
    reconcile: nativeReconcile(backend, support, (owner, recovered) => recoveredNatives.set(owner, recovered)),
  });
}

/** See docker.d.ts. */
export async function prepareDockerSandboxImage(options) {
  const prepared = settle(await native.prepareDockerImage(options), { owner: undefined, errors: undefined }, errorFromDescriptor);
  return deepFreeze(prepared);
}

/** See docker.d.ts. */
export function dockerSandboxRuntime(sandbox) {
  const native = nativeTransfersOf(sandbox);
  const runtime = native?.owner.appliedRuntime();
  if (typeof runtime !== 'string') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['sandbox'], message: 'expected a started sandbox of a Docker backend' }]);
  }
  return runtime;
}

/** See docker.d.ts. */
export async function dockerSandboxEgress(sandbox) {
  const native = nativeTransfersOf(sandbox);
  if (!native) {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['sandbox'], message: 'expected a sandbox of a Docker backend' }]);
  }
  const report = settle(await native.owner.egressReport(), { owner: undefined, errors: undefined }, errorFromDescriptor);
  return report === null ? null : deepFreeze(report);
}
