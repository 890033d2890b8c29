// Failure paths of the Docker backend that must neither hang nor leak: a process start aborted
// at any moment, stdin writes pending at stop, cleanup that outlives its observation.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileFromBytes, SandboxCleanupError, SandboxOperationError, SandboxStartError, SandboxStateError, SandboxValidationError } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { exportSandboxDirectory } from 'native-sandbox/node';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerBackend, leftovers, NOTHING, request, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('rely');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the reliability suite leaves no engine objects behind');
});

/** Runs `fn(port)` against a TCP engine address that accepts connections and never answers. */
async function withSilentEngine(fn) {
  const sockets = new Set();
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    return await fn(silent.address().port);
  } finally {
    for (const socket of sockets) socket.destroy();
    silent.close();
  }
}

const shell = (sandbox, script) => sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: sandbox.workspace });

describe('a process start aborted at any moment is owned work', () => {
  for (const delay of [0, 2, 5, 10, 20, 40, 80]) {
    test(`abort after ${delay} ms, then destroy: nothing is left`, async () => {
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      const controller = new AbortController();
      const process = shell(sandbox, 'sleep 30');
      const started = process.start({ signal: controller.signal });
      await sleep(delay);
      controller.abort(new Error('changed my mind'));
      const outcome = await started.then(
        (streams) => {
          streams.stdout.resume();
          streams.stderr.resume();
          return 'started';
        },
        (error) => error,
      );
      assert.ok(outcome === 'started' || outcome instanceof Error);
      await sandbox.destroy();
      assert.equal(sandbox.state.kind, 'destroyed');
      assert.deepEqual(leftovers(namespace), NOTHING);
    });
  }
});

describe('a process start refused at its call', () => {
  test('a signal aborted before the call: no process container is made, the sandbox is fenced and stopped', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const process = shell(sandbox, 'echo never');
      const error = await process.start({ signal: AbortSignal.abort() }).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError, String(error));
      assert.equal(error.code, 'cancelled');
      const compute = execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${sandbox.id}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' });
      assert.equal(compute.trim(), '', 'the engine was never asked to make the process');
      // The stop the failed start began, not one of ours (before, the state stayed `uncertain`).
      for (let i = 0; i < 100 && sandbox.state.kind !== 'stopped'; i++) await sleep(100);
      assert.equal(sandbox.state.kind, 'stopped');
      await assert.rejects(process.start(), SandboxStateError, 'once only');
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('bad options throw at the call and enter nothing', async () => {
    const reservation = backend.reserve(request(), { kind: 'in_process' });
    assert.throws(() => reservation.start({ bogus: 1 }), SandboxValidationError);
    assert.equal(reservation.state.kind, 'reserved');
    const sandbox = await reservation.start();
    try {
      const process = shell(sandbox, 'echo ok');
      assert.throws(() => process.start({ signal: 'now' }), SandboxValidationError);
      assert.equal(sandbox.state.kind, 'ready');
      const streams = await process.start();
      streams.stdin.end();
      streams.stderr.resume();
      const chunks = [];
      for await (const chunk of streams.stdout) chunks.push(chunk);
      assert.equal(Buffer.concat(chunks).toString(), 'ok\n');
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('a stop or destroy entered while a process starts', () => {
  // A start takes about 150–300 ms here: the delays land before it, inside it and after it,
  // including the moment the start's streams arrive while the stop has already begun. The
  // start is entered at its call, so even at 0 ms the stop sees it and cancels it.
  const enter = {
    'sandbox.stop()': (sandbox) => sandbox.stop(),
    'process.stop()': (_sandbox, process) => process.stop(),
    'sandbox.destroy()': (sandbox) => sandbox.destroy(),
  };
  for (const [name, stop] of Object.entries(enter)) {
    for (const delay of [0, 40, 120, 200, 300]) {
      test(`${name} after ${delay} ms: both settle, the start fails as cancelled or its exit is unavailable, nothing is left`, async () => {
        const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
        try {
          // `cat` with stdin open never exits by itself: only the stop can end it.
          const process = shell(sandbox, 'cat');
          const started = process.start().then(
            (streams) => {
              streams.stdout.resume();
              streams.stderr.resume();
              return streams.exit;
            },
            (error) => error,
          );
          await sleep(delay);
          const stopped = stop(sandbox, process);
          const bound = sleep(20_000, 'hung', { ref: false });
          const [outcome, stopOutcome] = await Promise.race([Promise.all([started, stopped]), bound.then((hung) => [hung, hung])]);
          assert.notEqual(outcome, 'hung', 'the start settles');
          assert.equal(stopOutcome, undefined, 'the stop resolves');
          if (outcome instanceof Error) {
            assert.ok(outcome instanceof SandboxOperationError, String(outcome));
            assert.equal(outcome.code, 'cancelled');
          } else {
            assert.deepEqual(outcome, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' });
          }
          assert.equal(sandbox.state.kind, name === 'sandbox.destroy()' ? 'destroyed' : 'stopped');
          await assert.rejects(process.start(), SandboxStateError, 'a process starts once');
        } finally {
          await sandbox.destroy();
        }
        assert.deepEqual(leftovers(namespace), NOTHING);
      });
    }
  }
});

describe('stdin writes pending at stop', () => {
  test('variable-size writes into a process that never reads do not wedge stop or destroy', async () => {
    const sandbox = await backend.reserve(
      request((p) => Object.assign(p.streams, { maxBufferedInputBytes: 64 * 1024 })),
      { kind: 'in_process' },
    ).start();
    const streams = await shell(sandbox, 'sleep 30').start();
    streams.stdout.resume();
    streams.stderr.resume();
    const errors = [];
    streams.stdin.on('error', (error) => errors.push(error));
    // JSON-RPC-like lines of varying size, far more than the guest pipe and the staging hold.
    for (let i = 0; i < 4000; i++) streams.stdin.write(Buffer.alloc(1 + ((i * 7919) % 9000), 0x61));
    await sleep(1000);
    await sandbox.stop();
    assert.equal(sandbox.state.kind, 'stopped');
    await sandbox.destroy();
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

describe('memory: an owner is freed once its handles are gone', () => {
  const lifecycles = (kind) => {
    const child = spawnSync(process.execPath, ['--expose-gc', 'fixtures/owner-lifecycles.mjs', kind, '12', namespace], {
      cwd: new URL('.', import.meta.url),
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env },
    });
    assert.equal(child.status, 0, child.stderr);
    return JSON.parse(child.stdout.trim().split('\n').at(-1));
  };

  test('Docker sandboxes that each ran a process leave no owner alive', () => {
    assert.deepEqual(lifecycles('docker'), { live: 0 });
  });

  test('sandboxes of a JavaScript driver leave no owner alive', () => {
    assert.deepEqual(lifecycles('driver'), { live: 0 });
  });
});

describe('no public call holds the JS thread on the engine', () => {
  test('backend creation and reserve return at once against an engine that never answers; start is cancellable', async () => {
    await withSilentEngine(async (port) => {
      const backend = createDockerSandboxBackend({
        image: 'native-sandbox/busybox:1',
        namespace: uniqueNamespace('silent'),
        spillDirectory: spillDirectory(),
        engine: { url: `tcp://127.0.0.1:${port}` },
      });
      const reservation = backend.reserve(request(), { kind: 'in_process' });
      assert.equal(reservation.recoveryRecord.imageDigest, `sha256:${'0'.repeat(64)}`, 'the reference resolves at start');
      const error = await reservation.start({ signal: AbortSignal.timeout(300) }).catch((e) => e);
      assert.ok(error instanceof SandboxStartError, String(error));
      assert.equal(error.cause.code, 'cancelled');
      await error.owner.destroy();
      assert.equal(error.owner.state.kind, 'destroyed');
      // Its record, kept by a caller, names nothing acquired: absent at once, without the
      // engine (the reference never resolved; any image it resolves to later is no conflict).
      const kept = error.owner.recoveryRecord;
      assert.equal(kept.imageDigest, `sha256:${'0'.repeat(64)}`);
      const reconciled = await backend.reconcile(kept, { signal: AbortSignal.timeout(2_000) });
      assert.equal(reconciled.kind, 'absent');
    });
  });

  test('a reference is resolved at start and recorded as the image ID', async () => {
    const backend = createDockerSandboxBackend({ image: 'native-sandbox/busybox:1', namespace, spillDirectory: spillDirectory() });
    const id = execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', 'native-sandbox/busybox:1'], { encoding: 'utf8' }).trim();
    const records = [];
    const sandbox = await backend.reserve(request(), { kind: 'persisted', persist: async (record) => void records.push(record) }).start();
    try {
      assert.ok(records.length > 0);
      for (const record of records) assert.equal(record.imageDigest, id, 'every persisted record names the image ID');
      assert.equal(sandbox.recoveryRecord.imageDigest, id);
      const later = backend.reserve(request(), { kind: 'in_process' });
      assert.equal(later.recoveryRecord.imageDigest, id, 'once resolved, reservations carry the ID at once');
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('stdout and stderr share one staging budget', () => {
  test('unread stderr holds stdout back; reading stderr lets both flow', async () => {
    const sandbox = await backend.reserve(
      request((p) => Object.assign(p.streams, { maxBufferedOutputBytes: 64 * 1024, highWaterMark: 16 * 1024 })),
      { kind: 'in_process' },
    ).start();
    try {
      const streams = await shell(sandbox, 'head -c 16777216 /dev/zero >&2; echo done').start();
      streams.stdin.end();
      let stdout = '';
      streams.stdout.on('data', (chunk) => (stdout += chunk));
      const ended = new Promise((resolve) => streams.stdout.on('end', resolve));
      await sleep(1500);
      assert.equal(stdout, '', 'stdout waits behind the unread stderr');
      let stderrBytes = 0;
      streams.stderr.on('data', (chunk) => (stderrBytes += chunk.length));
      await ended;
      assert.equal(stdout, 'done\n');
      assert.equal(stderrBytes, 16 * 1024 * 1024);
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('transfers end at their deadline, their signal, a stop or a destroy; what they entered stays owned until it settles', () => {
  /** A body that yields nothing until its signal aborts (a stalled, cooperative caller source). */
  const stalledUntilAborted = ({ signal }) => ({
    [Symbol.asyncIterator]: () => ({
      next: () => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    }),
  });
  const stalledFile = { kind: 'file', path: 'x.bin', byteLength: 1024, executable: false, open: stalledUntilAborted };
  /** A caller's promise that ignores every signal and settles only when the test says so. */
  const heldUntilReleased = () => {
    let release;
    const held = new Promise((resolve) => {
      release = resolve;
    });
    return { held, release };
  };
  const shortCleanup = (p) => (p.deadlines = { startupMs: 30_000, cleanupMs: 1_500 });

  test('an import from a stalled source rejects at its deadline; the sandbox is fenced and stopped', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const error = await sandbox.importTree([stalledFile], { deadlineAt: Date.now() + 1500 }).catch((e) => e);
      assert.equal(error?.code, 'deadline_exceeded', String(error));
      for (let i = 0; i < 100 && sandbox.state.kind !== 'stopped'; i++) await sleep(100);
      assert.equal(sandbox.state.kind, 'stopped', 'an interrupted import stops the sandbox, as the original does');
    } finally {
      await sandbox.destroy();
    }
  });

  test('an import whose entries ignore its signal rejects at once, and owns them until they settle: the slot is held and the stop waits within cleanupMs', async () => {
    const sandbox = await backend.reserve(request(shortCleanup), { kind: 'in_process' }).start();
    const { held, release } = heldUntilReleased();
    const entries = { [Symbol.asyncIterator]: () => ({ next: () => held.then(() => ({ done: true, value: undefined })) }) };
    try {
      const controller = new AbortController();
      const pending = sandbox.importTree(entries, { signal: controller.signal });
      await sleep(200);
      controller.abort();
      const error = await pending.catch((e) => e);
      assert.equal(error?.code, 'cancelled', String(error));
      // The interrupted import stops the sandbox, and the stop waits for the source it still owns.
      const stop = await sandbox.stop().catch((e) => e);
      assert.ok(stop instanceof SandboxCleanupError, `a noncooperative source keeps cleanup pending: ${stop}`);
      release();
      // A retry joins the stop still entered (which may yet meet its own bound and fail), or,
      // once that failed, enters a new one, which the settled source no longer holds.
      for (let attempt = 1; ; attempt += 1) {
        const retried = await sandbox.stop().then(() => undefined, (e) => e);
        if (retried === undefined) break;
        assert.ok(retried instanceof SandboxCleanupError && attempt < 3, String(retried));
      }
      assert.equal(sandbox.state.kind, 'stopped');
    } finally {
      release();
      await sandbox.destroy();
    }
  });

  test('stop() aborts an import in progress; the import settles and the state reads stopped', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const pending = sandbox.importTree([fileFromBytes('a.txt', Buffer.from('a')), stalledFile]).catch((e) => e);
      await sleep(300);
      await sandbox.stop();
      assert.equal(sandbox.state.kind, 'stopped');
      const error = await pending;
      assert.ok(error instanceof SandboxOperationError, String(error));
      assert.equal(error.code, 'cancelled');
    } finally {
      await sandbox.destroy();
    }
  });

  test('an export whose consumer never returns rejects when its signal aborts, and holds the slot until the consumer settles; destroy() waits for it', async () => {
    const sandbox = await backend.reserve(request(shortCleanup), { kind: 'in_process' }).start();
    const first = heldUntilReleased();
    const second = heldUntilReleased();
    try {
      await sandbox.importTree([fileFromBytes('a.txt', Buffer.from('a'))]);
      await sandbox.stop();
      const controller = new AbortController();
      const pending = sandbox.exportTree({ kind: 'workspace' }, () => first.held, { signal: controller.signal });
      await sleep(300);
      controller.abort();
      const error = await pending.catch((e) => e);
      assert.equal(error?.code, 'cancelled', String(error));
      // The consumer is still running: the export still owns it, and no other transfer enters.
      assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, async () => {}), SandboxStateError);
      first.release();
      await sleep(100);
      const files = [];
      await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
        if (entry.kind === 'file') for await (const chunk of entry.bytes) files.push(String(chunk));
      });
      assert.deepEqual(files, ['a']);
      const held = sandbox.exportTree({ kind: 'workspace' }, () => second.held).catch((e) => e);
      await sleep(300);
      const destroying = sandbox.destroy();
      await sleep(300);
      assert.equal(sandbox.state.kind, 'destroying', 'the destroy waits for the consumer it cancelled');
      assert.equal((await held)?.code, 'cancelled', 'the export itself was answered at once');
      second.release();
      await destroying;
      assert.equal(sandbox.state.kind, 'destroyed');
    } finally {
      first.release();
      second.release();
      await sandbox.destroy();
    }
  });
});

describe('reconcile honours its signal against an engine that never answers', () => {
  test('the signal ends the reconciliation at once', async () => {
    await withSilentEngine(async (port) => {
      const id = execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', 'native-sandbox/busybox:1'], { encoding: 'utf8' }).trim();
      const quiet = createDockerSandboxBackend({ image: id, namespace, spillDirectory: spillDirectory(), engine: { url: `tcp://127.0.0.1:${port}` } });
      // A record this backend could own (same image and configuration), written by a live one.
      const live = createDockerSandboxBackend({ image: id, namespace, spillDirectory: spillDirectory() });
      const sandbox = await live.reserve(request(), { kind: 'in_process' }).start();
      try {
        const record = sandbox.recoveryRecord;
        // Without the signal reaching the native work this would wait on the engine.
        const error = await quiet.reconcile(record, { signal: AbortSignal.timeout(300) }).catch((e) => e);
        assert.ok(error instanceof SandboxOperationError, String(error));
        assert.equal(error.code, 'cancelled');
      } finally {
        await sandbox.destroy();
      }
    });
  });
});

describe('a consumer that outlives its export reads nothing of the next one', () => {
  test('reads after the export ended reject, and the next export is byte for byte', async () => {
    const sandbox = await backend.reserve(
      request((p) => (p.transfers.chunkBytes = 4096)),
      { kind: 'in_process' },
    ).start();
    try {
      const bytes = Buffer.alloc(10_000, 3);
      await sandbox.importTree([fileFromBytes('big.bin', bytes, { chunkBytes: 4096 })]);
      await sandbox.stop();
      let stale;
      const first = await sandbox
        .exportTree({ kind: 'files', paths: ['big.bin'] }, async (entry) => {
          stale = entry.bytes[Symbol.asyncIterator]();
          await stale.next();
          // Returns with bytes unread: the export fails.
        })
        .catch((e) => e);
      assert.equal(first?.code, 'stream_failure', String(first));
      const chunks = [];
      const second = sandbox.exportTree({ kind: 'files', paths: ['big.bin'] }, async (entry) => {
        const late = await stale.next().catch((e) => e);
        assert.ok(late instanceof SandboxStateError, `the stale reader is refused: ${late}`);
        for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      });
      assert.equal((await second).files, 1n);
      assert.ok(Buffer.concat(chunks).equals(bytes), 'the second export is whole');
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('a refused directory export never touches the export in progress', () => {
  test('exportSandboxDirectory refused by state or selection leaves a running exportTree whole', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      await sandbox.importTree([fileFromBytes('a.txt', Buffer.from('alpha'))]);
      await sandbox.stop();
      let release;
      const held = new Promise((resolve) => (release = resolve));
      const got = [];
      const running = sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
        if (entry.kind === 'file') for await (const chunk of entry.bytes) got.push(String(chunk));
        await held;
      });
      await sleep(200);
      const destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-refused-')), 'out');
      const refused = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination).catch((e) => e);
      assert.ok(refused instanceof SandboxStateError, String(refused));
      release();
      assert.equal((await running).files, 1n, 'the export in progress completed');
      assert.deepEqual(got, ['alpha']);
    } finally {
      await sandbox.destroy();
    }
  });
});
