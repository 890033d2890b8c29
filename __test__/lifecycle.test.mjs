import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SandboxCleanupError,
  SandboxOperationError,
  SandboxRunError,
  SandboxStartError,
  SandboxStateError,
  SandboxUnsupportedError,
  SandboxValidationError,
  withSandbox,
} from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { DIGEST, initialRecord, policy, scriptedDriver, SUPPORT } from './scripted-driver.mjs';

const IN_PROCESS = { kind: 'in_process' };

/** The driver's abort arrives through the event loop, independently of the rejection. */
async function eventually(predicate, what) {
  for (let i = 0; i < 100 && !predicate(); i++) await sleep(5);
  assert.ok(predicate(), what);
}

function setup(script, deadlines) {
  const scripted = scriptedDriver(script);
  return { ...scripted, backend: createSandboxBackend(scripted.driver), request: policy(deadlines) };
}

describe('createSandboxBackend: reserve', () => {
  test('support is parsed and frozen; reserve is synchronous and inert', () => {
    const { backend, request, log } = setup();
    assert.ok(Object.isFrozen(backend) && Object.isFrozen(backend.support));
    const reservation = backend.reserve(request, IN_PROCESS);
    assert.equal(typeof reservation.then, 'undefined');
    assert.equal(reservation.id, 'sbx-1');
    assert.deepEqual(reservation.state, { kind: 'reserved' });
    assert.ok(Object.isFrozen(reservation.state));
    assert.equal(reservation.recoveryRecord.phase, 'reserved');
    assert.ok(Object.isFrozen(reservation.recoveryRecord));
    assert.deepEqual(log, ['reserve sbx-1']);
  });

  test('state and recoveryRecord are the same frozen object on every read until they change, as in the original', async () => {
    const { backend, request } = setup();
    const reservation = backend.reserve(request, IN_PROCESS);
    const reserved = reservation.state;
    const record = reservation.recoveryRecord;
    assert.equal(reservation.state, reserved);
    assert.equal(reservation.recoveryRecord, record);
    const sandbox = await reservation.start();
    const ready = sandbox.state;
    assert.notEqual(ready, reserved);
    assert.deepEqual(reserved, { kind: 'reserved' }, 'an earlier state object is left as it was');
    assert.equal(sandbox.state, ready);
    assert.equal(reservation.state, ready, 'the reservation and its sandbox read one state');
    // This driver's start leaves the record as it was: still the same object.
    assert.equal(sandbox.recoveryRecord, record);
    assert.equal(reservation.recoveryRecord, record);
    assert.ok(Object.isFrozen(ready) && Object.isFrozen(record));
    await sandbox.destroy();
    assert.equal(sandbox.state.kind, 'destroyed');
    assert.equal(sandbox.state, reservation.state);
    // As the original: stop and destroy never checkpoint, so the record is the start's own.
    assert.equal(sandbox.recoveryRecord, record);
    assert.equal(reservation.recoveryRecord, record);
    assert.equal(record.phase, 'reserved');
  });

  test('an invalid request never reaches the driver', () => {
    const { backend, log } = setup();
    assert.throws(() => backend.reserve({ policy: {} }, IN_PROCESS), SandboxValidationError);
    assert.throws(() => backend.reserve(policy(), { kind: 'later' }), SandboxValidationError);
    assert.deepEqual(log, []);
  });

  test('a request the support cannot enforce throws SandboxUnsupportedError before the driver', () => {
    const { backend, log } = setup({ support: { ...SUPPORT, network: ['isolated'], execution: ['until_stopped'] } });
    const outbound = policy();
    outbound.policy.network = { kind: 'outbound' };
    assert.throws(() => backend.reserve(outbound, IN_PROCESS), SandboxUnsupportedError);
    const deadline = policy();
    deadline.policy.execution = { kind: 'deadline', timeoutMs: 1000 };
    assert.throws(() => backend.reserve(deadline, IN_PROCESS), SandboxUnsupportedError);
    const quota = policy();
    quota.policy.workspaceDiskQuota = { kind: 'required', bytes: 1024, accounting: 'allocated_blocks' };
    assert.throws(() => backend.reserve(quota, IN_PROCESS), /workspaceDiskQuota/);
    assert.deepEqual(log, []);
  });

  test('a driver must return a fresh inert reservation whose record describes it', () => {
    const reused = { id: 'x', recoveryRecord: initialRecord('x'), start() {}, stop() {}, destroy() {} };
    const backend = createSandboxBackend({ support: SUPPORT, reserve: () => reused, reconcile: async () => ({}) });
    backend.reserve(policy(), IN_PROCESS);
    assert.throws(() => backend.reserve(policy(), IN_PROCESS), SandboxStateError);
    const thenable = createSandboxBackend({ support: SUPPORT, reserve: () => Promise.resolve(reused), reconcile: async () => ({}) });
    assert.throws(() => thenable.reserve(policy(), IN_PROCESS), SandboxStateError);
    const started = { ...reused, recoveryRecord: { ...initialRecord('y'), phase: 'starting' }, id: 'y' };
    const mismatched = createSandboxBackend({ support: SUPPORT, reserve: () => started, reconcile: async () => ({}) });
    assert.throws(() => mismatched.reserve(policy(), IN_PROCESS), SandboxStateError);
  });

  test('a driver without reserve or reconcile is refused with the field named', () => {
    const error = assert.throws(() => createSandboxBackend({ support: SUPPORT }), SandboxValidationError) ?? null;
    void error;
    try {
      createSandboxBackend({ support: SUPPORT });
    } catch (thrown) {
      assert.deepEqual(thrown.issues.map((i) => i.path[0]), ['reserve', 'reconcile']);
    }
  });
});

describe('the owner lifecycle', () => {
  test('every transition of a clean life', async () => {
    const { backend, request, log } = setup();
    const reservation = backend.reserve(request, IN_PROCESS);
    const started = reservation.start();
    assert.equal(reservation.state.kind, 'starting');
    const sandbox = await started;
    assert.deepEqual(sandbox.state, { kind: 'ready' });
    assert.equal(sandbox.workspace, '/sandbox/workspace');
    assert.deepEqual(sandbox.effective.resources, request.policy.resources);
    assert.ok(Object.isFrozen(sandbox) && Object.isFrozen(sandbox.effective));
    const stopping = sandbox.stop();
    assert.equal(sandbox.state.kind, 'stopping');
    await stopping;
    assert.equal(sandbox.state.kind, 'stopped');
    const destroying = sandbox.destroy();
    assert.equal(reservation.state.kind, 'destroying');
    await destroying;
    assert.equal(reservation.state.kind, 'destroyed');
    await sandbox.destroy();
    await sandbox.stop();
    assert.deepEqual(log, ['reserve sbx-1', 'start sbx-1', 'stop sbx-1', 'destroy sbx-1']);
  });

  test('stop and destroy resolve to undefined (Promise<void>), entered or repeated, and so do retries', async () => {
    const unstarted = setup();
    const inert = unstarted.backend.reserve(unstarted.request, IN_PROCESS);
    assert.equal(await inert.stop(), undefined);
    assert.equal(await inert.destroy(), undefined);
    const { backend, request } = setup({ stop: [{ fail: new Error('kill refused') }] });
    const reservation = backend.reserve(request, IN_PROCESS);
    const sandbox = await reservation.start();
    const failed = await sandbox.stop().catch((e) => e);
    assert.ok(failed instanceof SandboxCleanupError);
    assert.equal(await failed.retryCleanup(), undefined);
    assert.equal(await sandbox.stop(), undefined, 'stopped already');
    assert.deepEqual(await Promise.all([sandbox.destroy(), reservation.destroy()]), [undefined, undefined]);
    assert.equal(await sandbox.destroy(), undefined, 'destroyed already');
  });

  test('start is once-only, also after cleanup', async () => {
    const { backend, request } = setup();
    const reservation = backend.reserve(request, IN_PROCESS);
    await reservation.start();
    await assert.rejects(reservation.start(), SandboxStateError);
    const other = backend.reserve(request, IN_PROCESS);
    await other.destroy();
    await assert.rejects(other.start(), SandboxStateError);
  });

  test('a failed start rejects with SandboxStartError whose owner still cleans up', async () => {
    const thrown = new Error('image missing');
    const { backend, request, log } = setup({ start: [{ fail: thrown }] });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.equal(error.name, 'SandboxStartError');
    assert.equal(error.cause, thrown, 'the driver error object itself is the cause');
    assert.equal(error.owner, reservation);
    assert.deepEqual(reservation.state, { kind: 'uncertain', operation: 'start' });
    await error.owner.destroy();
    assert.equal(reservation.state.kind, 'destroyed');
    assert.deepEqual(log.slice(-2), ['stop sbx-1', 'destroy sbx-1']);
  });

  test('cancellation before entry never reaches the driver and never authorizes a replay', async () => {
    const { backend, request, log } = setup();
    const reservation = backend.reserve(request, IN_PROCESS);
    const controller = new AbortController();
    controller.abort();
    const error = await reservation.start({ signal: controller.signal }).catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.ok(error.cause instanceof SandboxOperationError);
    assert.equal(error.cause.code, 'cancelled');
    assert.equal(log.includes('start sbx-1'), false);
    await assert.rejects(reservation.start(), SandboxStateError);
    await reservation.destroy();
  });

  test('cancellation after entry aborts the driver signal and stops compute', async () => {
    const { backend, request, log, signals } = setup({ start: ['hang'] });
    const reservation = backend.reserve(request, IN_PROCESS);
    const controller = new AbortController();
    const starting = reservation.start({ signal: controller.signal });
    await sleep(50);
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    const error = await starting.catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.equal(error.cause.code, 'cancelled');
    assert.equal(error.cause.cause, reason, "the signal's reason stays reachable");
    await eventually(() => signals[0].aborted, 'the driver saw its signal abort');
    await reservation.stop();
    assert.equal(reservation.state.kind, 'stopped');
    assert.ok(log.includes('stop sbx-1'));
    await reservation.destroy();
  });

  test('startup observation expiry leaves a live cleanup owner', async () => {
    const { backend, request, signals } = setup({ start: ['hang'] }, { startupMs: 100, cleanupMs: 1000 });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.equal(error.cause.code, 'deadline_exceeded');
    await eventually(() => signals[0].aborted, 'the driver saw its signal abort');
    await error.owner.destroy();
    assert.equal(reservation.state.kind, 'destroyed');
  });

  test('concurrent stop and destroy join one physical stop', async () => {
    const { backend, request, log } = setup({ stop: [{ delay: 100 }] });
    const sandbox = await backend.reserve(request, IN_PROCESS).start();
    await Promise.all([sandbox.stop(), sandbox.stop(), sandbox.destroy(), sandbox.destroy()]);
    assert.deepEqual(log, ['reserve sbx-1', 'start sbx-1', 'stop sbx-1', 'destroy sbx-1']);
    assert.equal(sandbox.state.kind, 'destroyed');
  });

  test('a failed cleanup keeps the same owner for retryCleanup, and the original error stays', async () => {
    const kill = new Error('kill refused');
    const busy = new Error('volume busy');
    const { backend, request, log } = setup({ stop: [{ fail: kill }], destroy: [{ fail: busy }] });
    const reservation = backend.reserve(request, IN_PROCESS);
    const sandbox = await reservation.start();
    const stopError = await sandbox.stop().catch((e) => e);
    assert.ok(stopError instanceof SandboxCleanupError);
    assert.equal(stopError.operation, 'stop');
    assert.equal(stopError.cause, kill);
    assert.equal(stopError.owner, reservation);
    assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'stop' });
    await stopError.retryCleanup();
    assert.equal(sandbox.state.kind, 'stopped');
    const destroyError = await sandbox.destroy().catch((e) => e);
    assert.equal(destroyError.operation, 'destroy');
    assert.equal(destroyError.cause, busy);
    assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'destroy' });
    await destroyError.retryCleanup();
    assert.equal(sandbox.state.kind, 'destroyed');
    assert.equal(stopError.cause, kill, 'a later success never erases the original failure');
    assert.deepEqual(log.slice(2), ['stop sbx-1', 'stop sbx-1', 'destroy sbx-1', 'destroy sbx-1']);
  });

  test('cleanup observation expiry is a SandboxCleanupError that does not claim the stop ended', async () => {
    const { backend, request } = setup({ stop: [{ delay: 300 }] }, { startupMs: 1000, cleanupMs: 100 });
    const sandbox = await backend.reserve(request, IN_PROCESS).start();
    const error = await sandbox.stop().catch((e) => e);
    assert.ok(error instanceof SandboxCleanupError);
    assert.equal(error.cause.code, 'deadline_exceeded');
    assert.equal(sandbox.state.kind, 'stopping');
    await sleep(300);
    assert.equal(sandbox.state.kind, 'stopped');
    await sandbox.destroy();
  });

  test('a looser effective policy fails startup closed and the owner still cleans up', async () => {
    const { backend, request, log } = setup({
      effective: (req) => ({
        resources: { ...req.policy.resources, memoryBytes: req.policy.resources.memoryBytes * 2 },
        temporaryStorage: req.policy.temporaryStorage,
        network: { kind: 'outbound' },
        workspaceDiskQuota: { kind: 'not_requested' },
      }),
    });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.ok(error.cause instanceof SandboxUnsupportedError);
    assert.match(error.cause.message, /memoryBytes/);
    await reservation.destroy();
    assert.deepEqual(log.slice(-2), ['stop sbx-1', 'destroy sbx-1']);
  });

  test('a malformed ready port fails startup with the issue named', async () => {
    const { backend, request } = setup({ effective: () => ({ resources: {} }) });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error.cause instanceof SandboxValidationError);
    assert.deepEqual(error.cause.issues[0].path.slice(0, 2), ['effective', 'resources']);
    await reservation.destroy();
  });

  test('a driver without transfer ports is told so; the process port is not available yet', async () => {
    const { backend, request } = setup();
    const sandbox = await backend.reserve(request, IN_PROCESS).start();
    assert.throws(() => sandbox.importTree([]), /no import port/);
    await sandbox.stop();
    assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), /no export port/);
    assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/' }), SandboxUnsupportedError);
    await sandbox.destroy();
  });
});

describe('the recovery journal', () => {
  test('persisted: the initial record and every checkpoint finish persisting before the next effect', async () => {
    const persisted = [];
    const { backend, request, log } = setup({
      checkpoints: (record) => [
        { ...record, phase: 'starting', resources: [{ ...record.resources[0], identity: { kind: 'creating' } }] },
        { ...record, phase: 'ready', resources: [{ ...record.resources[0], identity: { kind: 'identified', id: 'c1', fingerprint: DIGEST('d') } }] },
      ],
    });
    const recovery = {
      kind: 'persisted',
      persist: async (record) => {
        assert.ok(Object.isFrozen(record));
        await sleep(10);
        persisted.push(`${record.phase}:${record.resources[0].identity.kind}`);
        log.push(`persisted ${record.phase}`);
      },
    };
    const reservation = backend.reserve(request, recovery);
    const sandbox = await reservation.start();
    assert.deepEqual(persisted, ['reserved:planned', 'starting:creating', 'ready:identified']);
    assert.deepEqual(log.slice(0, 3), ['reserve sbx-1', 'persisted reserved', 'start sbx-1']);
    assert.equal(sandbox.recoveryRecord.resources[0].identity.id, 'c1');
    await sandbox.destroy();
  });

  test('a persistence failure fences progress; stop and destroy still work', async () => {
    const full = new Error('disk full');
    const { backend, request, log } = setup();
    const reservation = backend.reserve(request, { kind: 'persisted', persist: async () => { throw full; } });
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.equal(error.cause.code, 'persistence_failure');
    assert.equal(error.cause.cause, full);
    assert.equal(log.includes('start sbx-1'), false, 'no effect without a persisted record');
    await reservation.destroy();
    assert.equal(reservation.state.kind, 'destroyed');
  });

  test('a checkpoint that changes the record identity is refused and fences startup', async () => {
    const { backend, request } = setup({ checkpoints: (record) => [{ ...record, namespace: 'elsewhere' }] });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.ok(error.cause instanceof SandboxStateError);
    assert.equal(reservation.recoveryRecord.namespace, 'tests');
    await reservation.destroy();
  });

  test('a checkpoint that skips planned to identified is refused', async () => {
    const { backend, request } = setup({
      checkpoints: (record) => [{ ...record, resources: [{ ...record.resources[0], identity: { kind: 'identified', id: 'x', fingerprint: DIGEST('e') } }] }],
    });
    const reservation = backend.reserve(request, IN_PROCESS);
    const error = await reservation.start().catch((e) => e);
    assert.ok(error.cause instanceof SandboxStateError);
    await reservation.destroy();
  });
});

describe('reconcile', () => {
  const record = () => ({ ...initialRecord('sbx-9'), phase: 'ready', resources: [{ role: 'compute', name: 'c', identity: { kind: 'identified', id: 'c9', fingerprint: DIGEST('f') } }] });

  test('matched and uncertain return cleanup-only owners', async () => {
    for (const kind of ['matched', 'uncertain']) {
      const calls = [];
      const driverOwner = {
        get recoveryRecord() {
          return record();
        },
        stop: async () => void calls.push('stop'),
        destroy: async () => void calls.push('destroy'),
      };
      const { backend } = setup({ reconcile: async () => ({ kind, owner: driverOwner }) });
      const result = await backend.reconcile(record());
      assert.equal(result.kind, kind);
      assert.ok(Object.isFrozen(result) && Object.isFrozen(result.owner));
      assert.deepEqual(Object.keys(result.owner).sort(), ['destroy', 'recoveryRecord', 'stop']);
      assert.equal(result.owner.recoveryRecord.sandboxId, 'sbx-9');
      assert.equal(await result.owner.stop(), undefined);
      assert.equal(await result.owner.destroy(), undefined);
      assert.deepEqual(calls, ['stop', 'destroy']);
    }
  });

  test('a recovered owner whose record changes identity is refused', async () => {
    let namespace = 'tests';
    const driverOwner = {
      get recoveryRecord() {
        return { ...record(), namespace };
      },
      stop: async () => {},
      destroy: async () => {},
    };
    const { backend } = setup({ reconcile: async () => ({ kind: 'matched', owner: driverOwner }) });
    const result = await backend.reconcile(record());
    namespace = 'other';
    assert.throws(() => result.owner.recoveryRecord, SandboxStateError);
    const error = await result.owner.destroy().catch((e) => e);
    assert.ok(error instanceof SandboxCleanupError);
  });

  test('conflict from the driver, and for another backend without asking the driver', async () => {
    const { backend, log } = setup({ reconcile: async () => ({ kind: 'conflict', reason: 'labels differ' }) });
    assert.deepEqual(await backend.reconcile(record()), { kind: 'conflict', reason: 'labels differ' });
    const foreign = await backend.reconcile({ ...record(), backendRevision: '2' });
    assert.equal(foreign.kind, 'conflict');
    assert.deepEqual(log, ['reconcile sbx-9']);
  });

  test('absent, and never absent while a resource is creating', async () => {
    const { backend } = setup({ reconcile: async (r) => ({ kind: 'absent', record: r }) });
    const absent = await backend.reconcile(record());
    assert.equal(absent.kind, 'absent');
    assert.equal(absent.record.sandboxId, 'sbx-9');
    const creating = { ...record(), resources: [{ role: 'compute', name: 'c', identity: { kind: 'creating' } }] };
    await assert.rejects(backend.reconcile(creating), SandboxStateError);
  });

  test('v1 records are rejected before the backend sees them; invalid results are refused', async () => {
    const { backend, log } = setup({ reconcile: async () => ({ kind: 'found' }) });
    await assert.rejects(backend.reconcile({ ...record(), format: 'agenai.sandbox-recovery.v1' }), SandboxValidationError);
    assert.deepEqual(log, []);
    await assert.rejects(backend.reconcile(record()), SandboxStateError);
  });

  test('a driver failure is the driver error itself; cancellation aborts the driver signal', async () => {
    const thrown = new Error('engine unreachable');
    const { backend } = setup({ reconcile: async () => { throw thrown; } });
    assert.equal(await backend.reconcile(record()).catch((e) => e), thrown);
    let seen;
    const hanging = setup({
      reconcile: (_r, { signal }) => new Promise((_, reject) => { seen = signal; signal.addEventListener('abort', () => reject(signal.reason)); }),
    });
    const controller = new AbortController();
    const pending = hanging.backend.reconcile(record(), { signal: controller.signal });
    await sleep(20);
    controller.abort();
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof SandboxOperationError);
    assert.equal(error.code, 'cancelled');
    await eventually(() => seen.aborted, 'the driver saw its signal abort');
  });
});

describe('withSandbox', () => {
  test('returns the callback result and destroys', async () => {
    const { backend, request, log } = setup();
    const result = await withSandbox(backend, request, async (sandbox) => {
      assert.equal(sandbox.state.kind, 'ready');
      return 42;
    }, { recovery: IN_PROCESS });
    assert.equal(result, 42);
    assert.deepEqual(log, ['reserve sbx-1', 'start sbx-1', 'stop sbx-1', 'destroy sbx-1']);
  });

  test('a callback failure is rethrown after destruction', async () => {
    const { backend, request, log } = setup();
    const failure = new Error('agent crashed');
    assert.equal(await withSandbox(backend, request, async () => { throw failure; }, { recovery: IN_PROCESS }).catch((e) => e), failure);
    assert.equal(log.at(-1), 'destroy sbx-1');
  });

  test('a cleanup failure alone is the SandboxCleanupError', async () => {
    const { backend, request } = setup({ destroy: ['fail'] });
    const error = await withSandbox(backend, request, async () => 1, { recovery: IN_PROCESS }).catch((e) => e);
    assert.ok(error instanceof SandboxCleanupError);
    assert.equal(error.operation, 'destroy');
    await error.retryCleanup();
  });

  test('both failing raise SandboxRunError with primary, cleanup and a retrying owner', async () => {
    const { backend, request, log } = setup({ destroy: ['fail'] });
    const failure = new Error('agent crashed');
    const error = await withSandbox(backend, request, async () => { throw failure; }, { recovery: IN_PROCESS }).catch((e) => e);
    assert.ok(error instanceof SandboxRunError);
    assert.equal(error.primaryError, failure);
    assert.ok(error.cleanupError instanceof SandboxCleanupError);
    assert.equal(error.owner.state.kind, 'uncertain');
    await error.retryCleanup();
    assert.equal(error.owner.state.kind, 'destroyed');
    assert.equal(error.primaryError, failure);
    assert.equal(log.filter((l) => l.startsWith('destroy')).length, 2);
  });

  test('a startup failure is the primary error, and destruction is still attempted', async () => {
    const { backend, request, log } = setup({ start: ['fail'] });
    const error = await withSandbox(backend, request, async () => 1, { recovery: IN_PROCESS }).catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.equal(log.at(-1), 'destroy sbx-1');
  });

  test('a callback past its budget fails with deadline_exceeded and the sandbox is destroyed', async () => {
    const { backend, request, log } = setup();
    let seen;
    const error = await withSandbox(backend, request, async (sandbox) => {
      seen = sandbox;
      await new Promise(() => {});
    }, { recovery: IN_PROCESS, budgetMs: 300 }).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'deadline_exceeded');
    assert.match(error.message, /budget of 300 ms/);
    assert.equal(seen.state.kind, 'destroyed');
    assert.equal(log.at(-1), 'destroy sbx-1');
  });

  test('past its budget with a failing cleanup, both errors are kept', async () => {
    const { backend, request } = setup({ destroy: ['fail'] });
    const error = await withSandbox(backend, request, () => new Promise(() => {}), { recovery: IN_PROCESS, budgetMs: 200 }).catch((e) => e);
    assert.ok(error instanceof SandboxRunError, String(error));
    assert.equal(error.primaryError.code, 'deadline_exceeded');
    assert.ok(error.cleanupError instanceof SandboxCleanupError);
    await error.retryCleanup();
  });

  test('a budget must be a positive safe integer; the default is one hour', async () => {
    const { backend, request } = setup();
    for (const budgetMs of [0, -1, 1.5, Number.NaN, '100', 2 ** 53]) {
      const error = await withSandbox(backend, request, async () => 1, { recovery: IN_PROCESS, budgetMs }).catch((e) => e);
      assert.ok(error instanceof SandboxValidationError, `${budgetMs}: ${error}`);
      assert.deepEqual(error.issues[0].path, ['options', 'budgetMs']);
    }
    assert.equal(await withSandbox(backend, request, async () => 7, { recovery: IN_PROCESS }), 7);
  });

  test("options need a recovery policy, and a problem with it names withSandbox's options, not reserve's argument", async () => {
    const { backend, request, log } = setup();
    const missing = await withSandbox(backend, request, async () => 1).catch((e) => e);
    assert.ok(missing instanceof SandboxValidationError, String(missing));
    assert.deepEqual(missing.issues.map((i) => i.path), [['options']]);
    assert.match(missing.issues[0].message, /withSandbox's fourth argument/);
    for (const [options, path] of [
      [{}, ['options', 'recovery']],
      [{ recovery: 'in_process' }, ['options', 'recovery']],
      [{ recovery: { kind: 'nope' } }, ['options', 'recovery', 'kind']],
    ]) {
      const error = await withSandbox(backend, request, async () => 1, options).catch((e) => e);
      assert.ok(error instanceof SandboxValidationError, String(error));
      assert.deepEqual(error.issues.map((i) => i.path), [path], JSON.stringify(options));
      assert.doesNotMatch(error.issues[0].message, /argument of reserve/);
    }
    assert.deepEqual(log, [], 'nothing was reserved');
  });

  test('unknown options and a signal that is not an AbortSignal are refused, each named, before anything starts', async () => {
    const { backend, request, log } = setup();
    const error = await withSandbox(backend, request, async () => 1, { recovery: IN_PROCESS, bogus: true, signal: 'soon' }).catch((e) => e);
    assert.ok(error instanceof SandboxValidationError, String(error));
    assert.deepEqual(
      error.issues.map((i) => [i.code, i.path.join('.')]),
      [
        ['unknown_field', 'options.bogus'],
        ['invalid_type', 'options.signal'],
      ],
    );
    assert.deepEqual(log, []);
  });

  test('its signal also covers the callback: an abort fails the run with cancelled and destroys the sandbox', { timeout: 10_000 }, async () => {
    const { backend, request, log } = setup();
    const controller = new AbortController();
    const reason = new Error('the user left');
    let seen;
    const run = withSandbox(
      backend,
      request,
      async (sandbox) => {
        seen = sandbox;
        setTimeout(() => controller.abort(reason), 20);
        await new Promise(() => {});
      },
      { recovery: IN_PROCESS, signal: controller.signal },
    );
    const error = await run.catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.equal(error.cause, reason);
    assert.equal(seen.state.kind, 'destroyed');
    assert.equal(log.at(-1), 'destroy sbx-1');
  });

  test('a signal that never aborts leaves the result alone, and no listener stays on it', async () => {
    const { backend, request } = setup({ start: [{ fail: new Error('no engine') }] });
    const controller = new AbortController();
    const failed = await withSandbox(backend, request, async () => 'never', { recovery: IN_PROCESS, signal: controller.signal }).catch((e) => e);
    assert.ok(failed instanceof SandboxStartError, String(failed));
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0, 'after a failed start');
    assert.equal(await withSandbox(backend, request, async () => 'done', { recovery: IN_PROCESS, signal: controller.signal }), 'done');
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0, 'after the run');
    controller.abort();
  });
});
