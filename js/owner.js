// The JavaScript faces of a Rust-owned sandbox: the reservation, the started sandbox, and the
// cleanup-only owner of a reconciled one. All state lives in the native owner; these objects
// only translate calls, signals and errors.
import { errorFromDescriptor, SandboxStateError, withSignalReason } from './errors.js';
import { createDriverPort, settle } from './driver-port.js';
import { deepFreeze } from './freeze.js';
import { native } from './native.js';
import { unchangedWhileEqual } from './unchanged.js';
import { shared } from './shared.js';
import { traceExit, traced, transferCounts } from './debug.js';
import { onAbort, parseOperationOptions } from './options.js';
import { reserveProcess } from './process.js';
import { sessionMembers } from './sessions.js';
import { exportTree, importTree } from './transfer.js';
import { exportViaDriver, importViaDriver } from './driver-transfers.js';
import { closeDriverProcess, driverProcessHandlers, reserveDriverProcess } from './driver-process.js';

/**
 * Owns one fresh driver reservation (`reserved`) with a native owner, and returns the
 * contract's `SandboxReservation`.
 */
export function ownDriverReservation({ request, id, record, recovery, reserved }) {
  const startController = new AbortController();
  const context = { owner: undefined, errors: undefined };
  // The ready port, the driver's process reservation, and the process the owner's stop must
  // close (see driver-process.js).
  const ports = { ready: undefined, reservedProcess: undefined, processAborted: undefined, process: undefined };
  // The native owner holds this port's function: nothing the port reaches may hold the owner
  // or its faces (`context.owner` does), or the pair is a cycle through native code that the
  // garbage collector cannot see. The port gets its own context and a weak owner reference.
  const portContext = { owner: undefined, errors: undefined };
  let ownerRef;
  const checkpoint = async (next) => {
    const live = ownerRef.deref();
    if (live === undefined) throw new SandboxStateError('The sandbox owner is gone; nothing can be checkpointed.');
    return settle(await live.checkpoint(next), portContext, errorFromDescriptor);
  };
  const port = createDriverPort({
    async start() {
      const ready = await reserved.start({ signal: startController.signal, checkpoint });
      if (ready === null || typeof ready !== 'object') {
        throw new SandboxStateError('A driver start must resolve its ready port.');
      }
      ports.ready = ready;
      return { effective: ready.effective, workspace: ready.workspace };
    },
    abortStart(reason) {
      startController.abort(errorFromDescriptor(reason, portContext));
    },
    async stop() {
      // As the original's beginStop: the process streams are closed as the driver's stop
      // begins (a stop that never settles holds no reader), and both are awaited, also when
      // the driver's stop failed. A process start in progress was aborted and has settled.
      const closed = closeDriverProcess(ports);
      closed.catch(() => {});
      try {
        await reserved.stop();
      } finally {
        await closed;
      }
    },
    destroy: () => reserved.destroy(),
    persist: (next) => recovery.persist(deepFreeze(next)),
    ...driverProcessHandlers(ports, { remember: (error) => port.remember(error), toError: (reason) => errorFromDescriptor(reason, portContext) }),
  });
  context.errors = port.errors;
  portContext.errors = port.errors;
  const owner = new native.NativeOwner(request, id, record, recovery.kind === 'persisted', port.invoke);
  ownerRef = new WeakRef(owner);
  return reservationFace({ owner, context, request, processPort: false, ports });
}

/** A port that only persists records, for owners whose driver is native. */
export function persistPort(recovery) {
  return createDriverPort({ persist: (next) => recovery.persist(deepFreeze(next)) });
}

/**
 * A cleanup call over a native one: resolves `undefined` (`Promise<void>`, as the contract says;
 * the native outcome's `null` is not handed on) or throws its error.
 */
function settledVoid(call, context) {
  return async () => {
    settle(await call(), context, errorFromDescriptor);
  };
}

/**
 * The contract's `SandboxReservation` over a native owner. `processPort` says whether its
 * sandbox's process and transfers run natively (the Docker backend's); a JavaScript driver's go
 * through its ready port (`reserveProcess`, `importTree`, `exportTree`).
 */
export function reservationFace({ owner, context, request, processPort, ports }) {
  const id = owner.id();
  const stopNow = settledVoid(() => owner.stop(), context);
  const destroyNow = settledVoid(() => owner.destroy(), context);
  const stop = () => traced(id, 'stop', stopNow);
  const destroy = () => traced(id, 'destroy', destroyNow);
  const state = unchangedWhileEqual(() => owner.state());
  const recoveryRecord = unchangedWhileEqual(() => owner.recoveryRecord());
  const lifecycle = {
    get state() {
      return state();
    },
    get recoveryRecord() {
      return recoveryRecord();
    },
    stop,
    destroy,
  };

  // Bad options throw at the call, as the original's; every other failure rejects.
  const start = (options) => {
    const parsed = parseOperationOptions(options);
    return traced(id, 'start', () => begin(parsed));
  };
  async function begin({ signal }) {
    const detach = onAbort(signal, () => owner.cancelStart());
    try {
      const ready = settle(await owner.start(), context, errorFromDescriptor);
      return startedSandbox({ id, ready, lifecycle, owner, context, request, processPort, readyPort: ports?.ready, ports });
    } catch (error) {
      throw withSignalReason(error, signal);
    } finally {
      detach();
    }
  }

  const reservation = Object.freeze({
    id,
    get state() {
      return lifecycle.state;
    },
    get recoveryRecord() {
      return lifecycle.recoveryRecord;
    },
    start,
    stop,
    destroy,
  });
  context.owner = reservation;
  return reservation;
}

/**
 * Sandboxes whose transfers run natively, for the `/node` directory helpers: one map per process
 * (shared.js), so the helpers of either installed copy know a sandbox made through the other.
 */
const nativeSandboxes = shared('nativeSandboxes', () => new WeakMap());

/** The native owner behind `sandbox`, when it is one of ours with native transfers. */
export function nativeTransfersOf(sandbox) {
  return nativeSandboxes.get(sandbox);
}

/** Every started sandbox of ours, with its native owner: a pool's members (js/pool.js), an adapter's workspace archives (js/workspace-archive.js). */
const startedOwners = shared('startedOwners', () => new WeakMap());

/** `{ owner, context }` of a started sandbox of ours (none for another backend's). */
export function startedOwnerOf(sandbox) {
  return startedOwners.get(sandbox);
}

function startedSandbox({ id, ready, lifecycle, owner, context, request, processPort, readyPort, ports }) {
  const driverPort = { owner, context, readyPort, request };
  const sessions = sessionMembers({ owner, context, request, sandboxId: id });
  const sandbox = Object.freeze({
    id,
    effective: deepFreeze(ready.effective),
    workspace: ready.workspace,
    get state() {
      return lifecycle.state;
    },
    get recoveryRecord() {
      return lifecycle.recoveryRecord;
    },
    // Synchronous admission: a wrong state or bad options throw at the call, as in the original.
    importTree: (entries, options) =>
      traced(
        id,
        'import',
        () => {
          if (!processPort) return importViaDriver({ ...driverPort, stop: lifecycle.stop }, entries, options);
          return importTree({ owner, context, stop: lifecycle.stop }, entries, options);
        },
        transferCounts,
      ),
    reserveProcess(spec) {
      const reserved = !processPort
        ? reserveDriverProcess({ ...driverPort, limits: request.policy.streams, stopSandbox: lifecycle.stop, ports }, spec)
        : reserveProcess({ owner, spec, context, limits: request.policy.streams, stopSandbox: lifecycle.stop });
      return Object.freeze({
        ...reserved,
        start: (options) =>
          traced(id, 'process start', () => reserved.start(options)).then((streams) => {
            traceExit(id, streams.exit);
            return streams;
          }),
      });
    },
    exportTree: (selection, consume, options) =>
      traced(
        id,
        'export',
        () => {
          if (!processPort) return exportViaDriver(driverPort, selection, consume, options);
          return exportTree({ owner, context }, selection, consume, options);
        },
        transferCounts,
      ),
    exec: (spec, options) => traced(id, 'exec', () => sessions.exec(spec, options)),
    run: (spec, options) => traced(id, 'run', () => sessions.run(spec, options)),
    files: sessions.files,
    stop: lifecycle.stop,
    destroy: lifecycle.destroy,
  });
  if (processPort) nativeSandboxes.set(sandbox, { owner, context, request });
  startedOwners.set(sandbox, { owner, context });
  return sandbox;
}

/** A cleanup-only owner over a native recovered owner; `currentRecord()` reads the record. */
export function recoveredFace({ recovered, context, sandboxId, currentRecord }) {
  const owner = Object.freeze({
    // As the original's recovered owner: the driver's record read afresh on every read.
    get recoveryRecord() {
      return deepFreeze(currentRecord());
    },
    stop: () => traced(sandboxId, 'recovered stop', settledVoid(() => recovered.stop(), context)),
    destroy: () => traced(sandboxId, 'recovered destroy', settledVoid(() => recovered.destroy(), context)),
  });
  context.owner = owner;
  return owner;
}

/**
 * Runs `driver.reconcile` under the native observation, and wraps a matched or uncertain
 * result in a cleanup-only owner.
 */
export async function reconcileWithDriver({ driver, record, support, signal }) {
  const controller = new AbortController();
  const context = { owner: undefined, errors: undefined };
  // As in ownDriverReservation: the port must not reach the recovered owner's face.
  const portContext = { owner: undefined, errors: undefined };
  let driverOwner;
  const port = createDriverPort({
    async reconcile() {
      const result = await driver.reconcile(record, { signal: controller.signal });
      if (result !== null && typeof result === 'object' && (result.kind === 'matched' || result.kind === 'uncertain')) {
        const candidate = result.owner;
        if (candidate === null || typeof candidate !== 'object' || typeof candidate.stop !== 'function' || typeof candidate.destroy !== 'function') {
          throw new SandboxStateError('A matched or uncertain reconciliation must carry a cleanup owner with stop() and destroy().');
        }
        driverOwner = candidate;
        return { kind: result.kind };
      }
      return result;
    },
    abortReconcile(reason) {
      controller.abort(errorFromDescriptor(reason, portContext));
    },
    recoveredRecord: () => driverOwner.recoveryRecord,
    recoveredStop: () => driverOwner.stop(),
    recoveredDestroy: () => driverOwner.destroy(),
  });
  context.errors = port.errors;
  portContext.errors = port.errors;
  const reconciliation = new native.NativeReconciliation(record, support, port.invoke);
  const detach = onAbort(signal, () => reconciliation.cancel());
  let result;
  try {
    result = settle(await reconciliation.run(), context, errorFromDescriptor);
  } catch (error) {
    throw withSignalReason(error, signal);
  } finally {
    detach();
  }
  if (result.kind === 'matched' || result.kind === 'uncertain') {
    const recovered = new native.NativeRecoveredOwner(record, port.invoke);
    const owner = recoveredFace({
      recovered,
      context,
      sandboxId: record.sandboxId,
      currentRecord: () => settle(recovered.observeRecord(driverOwner.recoveryRecord), context, errorFromDescriptor),
    });
    // The driver's owner must describe the reconciled identity before anyone relies on it.
    void owner.recoveryRecord;
    return Object.freeze({ kind: result.kind, owner });
  }
  return deepFreeze(result);
}
