// The original's message texts (`../shared/reference/agen-ai-sandbox-0.4.4/dist`): where the
// seed shows the text of a validation, lifecycle, recovery or ACP error, this package uses the
// same text; the details stay in `issues`, `code` and `cause`. Each case below drives the very
// situation the seed's line guards, through a JavaScript driver (the same Rust owner serves the
// Docker backend).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  fileFromBytes,
  SandboxCleanupError,
  SandboxOperationError,
  SandboxStartError,
  SandboxStateError,
  SandboxValidationError,
} from 'native-sandbox';
import { createSandboxAcpIntegration } from 'native-sandbox/acp';
import { createSandboxBackend } from 'native-sandbox/backend';
import { createSandboxSpillStore } from 'native-sandbox/node';
import { DIGEST, initialRecord, policy, SUPPORT } from './scripted-driver.mjs';

/** Sync throws and rejections alike, as the error they carry. */
async function failure(fn) {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  assert.fail('expected a failure');
}

function expect(error, Class, message, code) {
  assert.ok(error instanceof Class, `${error?.name}: ${error?.message}`);
  assert.equal(error.message, message);
  if (code !== undefined) assert.equal(error.code, code);
}

/**
 * A driver whose ready port imports until told to stop (it honours the signal), exports nothing,
 * and runs one process that ends when the sandbox stops. `script` overrides any step.
 */
function driver(script = {}) {
  let count = 0;
  return {
    support: SUPPORT,
    reserve(request) {
      count += 1;
      const id = `msg-${count}`;
      const reserved = {
        id,
        recoveryRecord: initialRecord(id),
        async start({ signal }) {
          if (script.start) return script.start(signal);
          return {
            effective: { resources: request.policy.resources, temporaryStorage: request.policy.temporaryStorage, network: request.policy.network, workspaceDiskQuota: { kind: 'not_requested' } },
            workspace: '/workspace',
            openSpill: () => createSandboxSpillStore(mkdtempSync(join(tmpdir(), 'native-sandbox-messages-'))),
            async importTree(entries, { signal: importSignal } = {}) {
              for await (const entry of entries) if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
              if (script.importHangs) {
                await new Promise((_, reject) => importSignal?.addEventListener('abort', () => reject(importSignal.reason), { once: true }));
              }
              return { directories: 0n, files: 1n, fileBytes: 1n, archiveBytes: 1024n };
            },
            async exportTree(_selection, consume, { signal: exportSignal } = {}) {
              if (script.exportHangs) {
                await consume({ kind: 'directory', path: 'd' });
                await new Promise((_, reject) => exportSignal?.addEventListener('abort', () => reject(exportSignal.reason), { once: true }));
              }
              return { directories: 0n, files: 0n, fileBytes: 0n, archiveBytes: 0n };
            },
            reserveProcess: () => ({
              id: 'p1',
              async start({ signal: startSignal } = {}) {
                if (script.processStartHangs) {
                  const waiting = setInterval(() => {}, 1_000);
                  await new Promise((_, reject) => startSignal.addEventListener('abort', () => reject(startSignal.reason), { once: true })).finally(() => clearInterval(waiting));
                }
                const { PassThrough } = await import('node:stream');
                const stdin = new PassThrough();
                const stdout = new PassThrough();
                const stderr = new PassThrough();
                let exited;
                const exit = new Promise((resolve) => {
                  exited = resolve;
                });
                // A running process keeps the host's event loop alive, as a child process does.
                const running = setInterval(() => {}, 1_000);
                reserved.endProcess = () => {
                  clearInterval(running);
                  stdout.end();
                  stderr.end();
                  exited({ kind: 'signaled', signal: 'SIGKILL' });
                };
                return { stdin, stdout, stderr, exit };
              },
            }),
          };
        },
        async stop() {
          reserved.endProcess?.();
          if (script.stop) await script.stop();
        },
        async destroy() {
          if (script.destroy) await script.destroy();
        },
      };
      return script.reserve ? script.reserve(reserved) : reserved;
    },
    async reconcile(record) {
      if (script.reconcile) return script.reconcile(record);
      return { kind: 'conflict', reason: 'not used' };
    },
  };
}

const recovery = { kind: 'in_process' };
const fast = () => policy({ startupMs: 2_000, cleanupMs: 500 });

test('validation: "Invalid sandbox input", the details in issues', async () => {
  const backend = createSandboxBackend(driver());
  const error = await failure(() => backend.reserve({ policy: { resources: { cpus: -1 } } }, recovery));
  expect(error, SandboxValidationError, 'Invalid sandbox input');
  assert.ok(error.issues.length > 0);
  assert.ok(error.issues.some((issue) => issue.path.join('.').startsWith('policy')));
});

test('backend seam: a reservation that is not fresh, synchronous and inert; an initial record of another ownership', async () => {
  const thenable = createSandboxBackend(driver({ reserve: (reserved) => Promise.resolve(reserved) }));
  expect(await failure(() => thenable.reserve(policy(), recovery)), SandboxStateError, 'A backend must return a fresh synchronous inert reservation with cleanup ownership.');
  const wrongPhase = createSandboxBackend(driver({ reserve: (reserved) => ({ ...reserved, recoveryRecord: { ...reserved.recoveryRecord, phase: 'starting' } }) }));
  expect(
    await failure(() => wrongPhase.reserve(policy(), recovery)),
    SandboxStateError,
    'The initial recovery record must describe this reserved backend ownership before resource effects.',
  );
});

test('reconcile: cancelled before entry; an absent result with an entered acquisition; an invalid result; another backend', async () => {
  const record = { ...initialRecord('rec-1'), phase: 'starting', resources: [{ role: 'compute', name: 'rec-1-compute', identity: { kind: 'creating' } }] };
  const aborted = AbortSignal.abort();
  const plain = createSandboxBackend(driver({ reconcile: () => ({ kind: 'absent', record }) }));
  expect(await failure(() => plain.reconcile(record, { signal: aborted })), SandboxOperationError, 'Sandbox reconciliation was cancelled before entry.', 'cancelled');
  expect(await failure(() => plain.reconcile(record)), SandboxStateError, 'An entered acquisition with unresolved identity cannot be conclusively absent.');
  const invalid = createSandboxBackend(driver({ reconcile: () => ({ kind: 'perhaps' }) }));
  expect(await failure(() => invalid.reconcile(record)), SandboxStateError, 'Backend returned an invalid reconciliation result.');
  const other = await plain.reconcile({ ...record, backendRevision: 'other' });
  assert.deepEqual({ ...other }, { kind: 'conflict', reason: 'Recovery record belongs to another backend identity or revision.' });
});

test('start: cancelled before entry, failed, once only', async () => {
  const backend = createSandboxBackend(driver());
  const owner = backend.reserve(fast(), recovery);
  const error = await failure(() => owner.start({ signal: AbortSignal.abort() }));
  expect(error, SandboxStartError, 'Sandbox startup failed; its reservation retains cleanup ownership.');
  expect(error.cause, SandboxOperationError, 'Sandbox startup was cancelled before entry.', 'cancelled');
  expect(await failure(() => owner.start()), SandboxStateError, 'Sandbox startup is once-only and cannot follow cleanup.');
  await owner.destroy();

  const failing = createSandboxBackend(driver({ start: async () => { throw new Error('no room'); } }));
  const failed = await failure(() => failing.reserve(fast(), recovery).start());
  expect(failed, SandboxStartError, 'Sandbox startup failed; its reservation retains cleanup ownership.');
  assert.equal(failed.cause?.message, 'no room');
  await failed.owner.destroy();
});

test('cleanup: stop and destroy that fail', async () => {
  const backend = createSandboxBackend(driver({ stop: async () => { throw new Error('stuck'); }, destroy: async () => { throw new Error('busy'); } }));
  const sandbox = await backend.reserve(fast(), recovery).start();
  const stopped = await failure(() => sandbox.stop());
  expect(stopped, SandboxCleanupError, 'Sandbox compute cleanup did not settle successfully.');
  assert.equal(stopped.operation, 'stop');
  const destroyed = await failure(() => sandbox.destroy());
  expect(destroyed, SandboxCleanupError, 'Sandbox destruction did not settle successfully.');
  assert.equal(destroyed.operation, 'destroy');
});

test('transfers: refused states, cancelled and past-deadline entries, interrupted by stop and destroy', async () => {
  const backend = createSandboxBackend(driver({ importHangs: true, exportHangs: true }));
  const sandbox = await backend.reserve(fast(), recovery).start();
  const file = () => [fileFromBytes('a', Buffer.from('x'))];
  expect(await failure(() => sandbox.exportTree({ kind: 'workspace' }, async () => {})), SandboxStateError, 'File export requires stopped compute and no other entered transfer.');
  const reason = new Error('the caller gave up');
  const early = await failure(() => sandbox.importTree(file(), { signal: AbortSignal.abort(reason) }));
  expect(early, SandboxOperationError, 'Sandbox file transfer was cancelled before entry.', 'cancelled');
  assert.equal(early.cause, reason, "the signal's reason stays reachable as the cause");
  expect(await failure(() => sandbox.importTree(file(), { deadlineAt: Date.now() - 1 })), SandboxOperationError, 'Sandbox file transfer deadline elapsed before entry.', 'deadline_exceeded');
  const importing = sandbox.importTree(file()).catch((e) => e);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(await failure(() => sandbox.importTree(file())), SandboxStateError, 'File import requires ready compute, no entered import, and no process reservation.');
  expect(await failure(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' })), SandboxStateError, 'A sandbox admits one process reservation, after its imports settle.');
  await sandbox.stop();
  expect(await importing, SandboxOperationError, 'Sandbox compute is stopping.', 'cancelled');
  const exporting = sandbox.exportTree({ kind: 'workspace' }, async () => {}).catch((e) => e);
  await new Promise((resolve) => setTimeout(resolve, 50));
  await sandbox.destroy();
  expect(await exporting, SandboxOperationError, 'Sandbox storage is being destroyed.', 'cancelled');
});

test('processes: once only, cancelled before entry, execution deadline, stop', async () => {
  const backend = createSandboxBackend(driver());
  const sandbox = await backend.reserve(fast(), recovery).start();
  const reserved = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' });
  const reason = new Error('the caller gave up');
  const cancelled = await failure(() => reserved.start({ signal: AbortSignal.abort(reason) }));
  expect(cancelled, SandboxOperationError, 'Process startup was cancelled before entry.', 'cancelled');
  assert.equal(cancelled.cause, reason, "the signal's reason stays reachable as the cause");
  expect(await failure(() => reserved.start()), SandboxStateError, 'Process startup is once-only and requires ready compute.');
  await sandbox.destroy();

  // The execution deadline fires while the process is still starting: its start fails with it.
  const slow = createSandboxBackend(driver({ processStartHangs: true }));
  const timed = await slow.reserve({ policy: { ...fast().policy, execution: { kind: 'deadline', timeoutMs: 100 } } }, recovery).start();
  const late = await failure(() => timed.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start());
  expect(late, SandboxOperationError, 'Sandbox execution exceeded its deadline.', 'deadline_exceeded');
  await timed.destroy();
});

test('ACP: one native connection', async () => {
  const backend = createSandboxBackend(driver());
  const sandbox = await backend.reserve(fast(), recovery).start();
  const integration = createSandboxAcpIntegration(sandbox);
  const input = { executable: '/bin/true', args: [], env: {}, cwd: '/tmp' };
  integration.executionBoundary.reserve(input);
  expect(await failure(() => integration.executionBoundary.reserve(input)), SandboxStateError, 'Sandbox ACP integration admits one native connection.');
  await sandbox.destroy();
});

test('recovered owners: cleanup that fails', async () => {
  const record = { ...initialRecord('rec-2'), phase: 'ready', authority: { kind: 'verified', backendIdentity: 'engine' }, resources: [{ role: 'compute', name: 'rec-2-compute', identity: { kind: 'identified', id: 'c1', fingerprint: DIGEST('d') } }] };
  const owner = { recoveryRecord: record, stop: async () => { throw new Error('stuck'); }, destroy: async () => { throw new Error('busy'); } };
  const backend = createSandboxBackend(driver({ reconcile: () => ({ kind: 'matched', owner }) }));
  const matched = await backend.reconcile(record);
  const stopped = await failure(() => matched.owner.stop());
  expect(stopped, SandboxCleanupError, 'Recovered sandbox compute cleanup failed.');
  const destroyed = await failure(() => matched.owner.destroy());
  expect(destroyed, SandboxCleanupError, 'Recovered sandbox destruction failed.');
});
