// `backend.reconcile(record, { signal })` for a native backend (Docker, Kubernetes): the record
// parsed, another backend's record a conflict, the signal and the native bound ending the native
// work, and a matched or uncertain record handed back with its cleanup-only owner.
import { errorFromDescriptor, SandboxOperationError, withSignalReason } from './errors.js';
import { settle } from './driver-port.js';
import { traced } from './debug.js';
import { deepFreeze } from './freeze.js';
import { onAbort, parseOperationOptions } from './options.js';
import { recoveredFace } from './owner.js';
import { parseSandboxRecoveryRecord } from './parsers.js';

/** Ids of reconciliations in flight, so a signal can end exactly its own. */
let nextReconciliation = 0;

/**
 * The `reconcile` member of a backend whose native object is `native` (`reconcile`,
 * `cancelReconcile`, `endReconcile`, `recovered`); `adopted(owner, recovered)` learns each
 * recovered owner face and the native owner behind it.
 */
export function nativeReconcile(native, support, adopted = () => {}) {
  const noOwner = { owner: undefined, errors: undefined };
  return async function reconcile(record, operation) {
    const parsed = parseSandboxRecoveryRecord(record);
    const { signal } = parseOperationOptions(operation);
    if (parsed.backendId !== support.backendId || parsed.backendRevision !== support.backendRevision) {
      return Object.freeze({ kind: 'conflict', reason: 'Recovery record belongs to another backend identity or revision.' });
    }
    if (signal?.aborted) throw new SandboxOperationError('cancelled', 'Sandbox reconciliation was cancelled before entry.', { cause: signal.reason });
    // The signal ends the native work too (its calls are dropped), and the native side bounds
    // it by SANDBOX_LIMITS.startupMs, as the original observes reconciliation.
    const id = nextReconciliation;
    nextReconciliation = (nextReconciliation + 1) % 2 ** 32;
    const detach = onAbort(signal, () => native.cancelReconcile(id));
    let result;
    try {
      result = await traced(parsed.sandboxId, 'reconcile', async () => settle(await native.reconcile(parsed, id), noOwner, errorFromDescriptor), (answer) => answer.kind);
    } catch (error) {
      throw withSignalReason(error, signal);
    } finally {
      detach();
      native.endReconcile(id);
    }
    if (result.kind === 'matched' || result.kind === 'uncertain') {
      const recovered = native.recovered(parsed);
      const context = { owner: undefined, errors: undefined };
      const owner = recoveredFace({ recovered, context, sandboxId: parsed.sandboxId, currentRecord: () => recovered.recoveryRecord() });
      adopted(owner, recovered);
      return Object.freeze({ kind: result.kind, owner });
    }
    return deepFreeze(result);
  };
}
