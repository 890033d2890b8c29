// The engine-fault suite: dockerd restarted (with and without `live-restore`) during a start, a
// running process, an import and an export; the engine killed during a stop and a destroy, then
// brought back and the sandbox reconciled. For each: no silent success with missing bytes, no
// promise left pending past its bound, and after reconcile or destroy nothing of the sandbox is
// left on the engine. Each case reports what the caller saw (`t.diagnostic`).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { fileFromBytes, SandboxCleanupError, SandboxStartError } from 'native-sandbox';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';
import { engineNotControllable, engineWithLiveRestore, restartEngine, restoreEngineConfig, startEngine, stopEngine } from './engine-control.mjs';

const namespace = uniqueNamespace('faults');
const unavailable = engineNotControllable();
/** How long any one operation may stay pending here: past it, the case fails. */
const BOUND_MS = 60_000;
const deadlines = { startupMs: 15_000, cleanupMs: 15_000 };
const faultRequest = () => request((p) => (p.deadlines = deadlines));

after(async () => {
  if (unavailable) return;
  await engineWithLiveRestore(false);
  restoreEngineConfig();
  assert.deepEqual(leftovers(namespace), NOTHING);
});

/** `promise`'s outcome, `{ value }` or `{ error }`; fails the case when it is pending past `BOUND_MS`. */
async function settledWithin(promise, what) {
  let timer;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} was still pending ${BOUND_MS} ms after the fault`)), BOUND_MS);
  });
  try {
    return await Promise.race([promise.then((value) => ({ value }), (error) => ({ error })), bound]);
  } finally {
    clearTimeout(timer);
  }
}

const seen = (outcome) => (outcome.error ? `${outcome.error.name}${outcome.error.code ? ` (${outcome.error.code})` : ''}: ${outcome.error.message}` : `resolved ${JSON.stringify(outcome.value, (_, v) => (typeof v === 'bigint' ? Number(v) : v))}`);

/** Destroys `owner` (retrying once: the first attempt may meet the engine still settling) and checks the census. */
async function destroyAndCount(owner) {
  const first = await settledWithin(owner.destroy(), 'destroy');
  if (first.error) {
    const second = await settledWithin(owner.destroy(), 'the retried destroy');
    assert.equal(second.error, undefined, `destroy after the fault: ${second.error?.message}`);
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
}

for (const liveRestore of [false, true]) {
  describe(`dockerd restarted${liveRestore ? ' with live-restore' : ''}`, { skip: unavailable }, () => {
    before(async () => {
      await engineWithLiveRestore(liveRestore);
    });
    const backend = () => dockerBackend(namespace);

    test('during start: the start fails typed (or succeeds whole), and destroy leaves nothing', async (t) => {
      let checkpoints = 0;
      let fault;
      const recovery = {
        kind: 'persisted',
        persist: async () => {
          checkpoints += 1;
          // The second checkpoint comes before the first container is created.
          if (checkpoints === 2) {
            fault = restartEngine({ liveRestore });
            // Observed below, once the start settled.
            fault.catch(() => {});
          }
          if (fault) await new Promise((resolve) => setTimeout(resolve, 50));
        },
      };
      const owner = backend().reserve(faultRequest(), recovery);
      const started = await settledWithin(owner.start(), 'start');
      await fault;
      t.diagnostic(`start: ${seen(started)}`);
      if (started.error) assert.ok(started.error instanceof SandboxStartError, seen(started));
      await destroyAndCount(started.error?.owner ?? started.value);
    });

    test('during a running process: its output fails (never a clean end with lines missing), exit settles, nothing is left', async (t) => {
      const sandbox = await backend().reserve(faultRequest(), { kind: 'in_process' }).start();
      const lines = 12;
      const streams = await sandbox
        .reserveProcess({ executable: '/bin/sh', args: ['-c', `i=0; while [ $i -lt ${lines} ]; do echo line $i; i=$((i+1)); sleep 0.5; done`], env: {}, cwd: sandbox.workspace })
        .start();
      streams.stdin.end();
      let text = '';
      const output = settledWithin(
        (async () => {
          for await (const chunk of streams.stdout) text += chunk;
        })(),
        'stdout',
      );
      // stderr fails as stdout does: read, with its failure observed.
      streams.stderr.on('error', () => {}).resume();
      const exit = settledWithin(streams.exit, 'exit');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await restartEngine({ liveRestore });
      const read = await output;
      const exited = await exit;
      const received = text.split('\n').filter(Boolean).length;
      t.diagnostic(`stdout: ${read.error ? seen(read) : 'ended'} after ${received} of ${lines} lines; exit: ${seen(exited)}`);
      if (!read.error) {
        // A clean end only with every line, and only for a process that really finished.
        assert.equal(received, lines, 'a clean end carries every line');
        assert.deepEqual(exited.value, { kind: 'exited', code: 0 });
      } else {
        assert.equal(read.error.code, 'stream_failure', seen(read));
      }
      assert.equal(exited.error, undefined, 'exit reports a fate');
      if (liveRestore) assert.deepEqual(exited.value, { kind: 'exited', code: 0 }, 'live-restore: the process ran on to its end');
      else assert.notDeepEqual(exited.value, { kind: 'exited', code: 0 }, 'the restart ended the process: never a clean exit');
      await destroyAndCount(sandbox);
    });

    test('during an import: it fails typed (or succeeds whole), and nothing is left', async (t) => {
      const sandbox = await backend().reserve(faultRequest(), { kind: 'in_process' }).start();
      const body = randomBytes(256 * 1024);
      const files = 400;
      let fault;
      async function* entries() {
        for (let i = 0; i < files; i++) {
          if (i === 40) {
            fault = restartEngine({ liveRestore });
            await fault;
          }
          yield fileFromBytes(`d/f${i}`, body);
        }
      }
      const imported = await settledWithin(sandbox.importTree(entries()), 'the import');
      await fault;
      t.diagnostic(`import: ${seen(imported)}`);
      if (!imported.error) {
        // Success means every file: read back through an export.
        await sandbox.stop();
        let count = 0;
        await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
          if (entry.kind !== 'file') return;
          let bytes = 0;
          for await (const chunk of entry.bytes) bytes += chunk.length;
          assert.equal(bytes, body.length);
          count += 1;
        });
        assert.equal(count, files);
      }
      await destroyAndCount(sandbox);
    });

    test('during an export: it fails typed (or succeeds with every byte), and nothing is left', async (t) => {
      const sandbox = await backend().reserve(faultRequest(), { kind: 'in_process' }).start();
      const body = randomBytes(256 * 1024);
      const files = 400;
      await sandbox.importTree(Array.from({ length: files }, (_, i) => fileFromBytes(`d/f${i}`, body)));
      await sandbox.stop();
      let complete = 0;
      let fault;
      const exported = await settledWithin(
        sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
          if (entry.kind !== 'file') return;
          if (complete === 20 && fault === undefined) {
            fault = restartEngine({ liveRestore });
            await fault;
          }
          let bytes = 0;
          for await (const chunk of entry.bytes) bytes += chunk.length;
          if (bytes === body.length) complete += 1;
        }),
        'the export',
      );
      await fault;
      t.diagnostic(`export: ${seen(exported)} after ${complete} whole files`);
      if (!exported.error) assert.equal(complete, files, 'a resolved export delivered every byte');
      await destroyAndCount(sandbox);
    });
  });
}

describe('the engine killed during cleanup, then brought back and reconciled', { skip: unavailable }, () => {
  before(async () => {
    await engineWithLiveRestore(false);
  });

  for (const operation of ['stop', 'destroy']) {
    test(`during ${operation}: it fails within cleanupMs, and a reconcile after the engine is back removes everything`, async (t) => {
      let record;
      const recovery = { kind: 'persisted', persist: async (next) => void (record = next) };
      const sandbox = await dockerBackend(namespace).reserve(faultRequest(), recovery).start();
      const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace }).start();
      streams.stdin.end();
      for (const output of [streams.stdout, streams.stderr]) output.on('error', () => {}).resume();
      if (operation === 'destroy') await sandbox.stop();
      await stopEngine('SIGKILL');
      let cleaned;
      try {
        cleaned = await settledWithin(sandbox[operation](), operation);
      } finally {
        await startEngine({ liveRestore: false });
      }
      t.diagnostic(`${operation}: ${seen(cleaned)}`);
      assert.ok(cleaned.error instanceof SandboxCleanupError, `${operation} with the engine gone fails typed: ${seen(cleaned)}`);
      assert.equal(cleaned.error.operation, operation);
      const exit = await settledWithin(streams.exit, 'exit');
      t.diagnostic(`exit: ${seen(exit)}`);
      // A new controller finds the sandbox from its record and removes it.
      const reconciled = await dockerBackend(namespace).reconcile(record);
      t.diagnostic(`reconcile: ${reconciled.kind}`);
      assert.ok(reconciled.kind === 'matched' || reconciled.kind === 'uncertain', reconciled.kind);
      await destroyAndCount(reconciled.owner);
    });
  }
});
