// One behaviour on both backends: the same stdin and exit scenarios against the Docker backend
// and against a JavaScript driver whose process is a local child. A stdin the guest can no
// longer take fails every write and end through its callback, never as an 'error' event; a
// receipt a driver lost reads `unavailable` once the sandbox stopped; a driver's stop that
// never settles holds no reader.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { after, describe, test } from 'node:test';
import { SandboxCleanupError, SandboxOperationError } from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';
import { initialRecord, policy, SUPPORT } from './scripted-driver.mjs';

const unhandled = [];
const onUnhandled = (reason) => unhandled.push(reason);
process.on('unhandledRejection', onUnhandled);
after(() => process.off('unhandledRejection', onUnhandled));

/**
 * A driver whose process is a local child (`exit` from the child unless `exit` is given: a
 * function of the child returning what the driver reports) and whose stop kills it, or runs
 * `stop` when given.
 */
function childDriver({ exit, stop } = {}) {
  const children = [];
  const driver = {
    support: SUPPORT,
    reserve(req) {
      return {
        id: 'child-sandbox',
        recoveryRecord: initialRecord('child-sandbox'),
        async start() {
          return {
            effective: { resources: req.policy.resources, temporaryStorage: req.policy.temporaryStorage, network: req.policy.network, workspaceDiskQuota: { kind: 'not_requested' } },
            workspace: '/tmp',
            reserveProcess: (spec) => ({
              id: 'child-1',
              async start() {
                const child = spawn(spec.executable, spec.args, { env: spec.env, cwd: spec.cwd, stdio: 'pipe', detached: true });
                children.push(child);
                const reported = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ? { kind: 'signaled', signal } : { kind: 'exited', code })));
                return { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exit: exit ? exit(reported) : reported };
              },
            }),
          };
        },
        async stop() {
          for (const child of children) {
            try {
              process.kill(-child.pid, 'SIGKILL');
            } catch {
              // Already gone.
            }
          }
          if (stop) await stop();
        },
        async destroy() {},
      };
    },
    async reconcile() {
      return { kind: 'conflict', reason: 'not used' };
    },
  };
  return driver;
}

const namespace = uniqueNamespace('parity');
const backends = {
  docker: () => dockerBackend(namespace).reserve(request(), { kind: 'in_process' }).start(),
  driver: () => createSandboxBackend(childDriver()).reserve(policy(), { kind: 'in_process' }).start(),
};

async function started(sandbox, script) {
  const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: '/tmp' }).start();
  for (const stream of [streams.stdout, streams.stderr]) stream.on('error', () => {}).resume();
  const events = [];
  streams.stdin.on('error', (error) => events.push(error));
  return { streams, events };
}

const callbackOf = (call) => new Promise((resolve) => call(resolve));
const tick = () => new Promise((resolve) => setImmediate(resolve));

function assertCancelled(error, pattern, what) {
  assert.ok(error instanceof SandboxOperationError, `${what}: ${error}`);
  assert.equal(error.code, 'cancelled', what);
  assert.match(error.message, pattern, what);
}

for (const [name, open] of Object.entries(backends)) {
  describe(`stdin the guest no longer takes (${name})`, () => {
    test('after the process exited: write and end fail through their callbacks, no error event', async () => {
      const sandbox = await open();
      const { streams, events } = await started(sandbox, 'exit 3');
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 3 });
      // Node closes a child's stdin at its exit, a moment after it reports the exit.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const written = await callbackOf((done) => streams.stdin.write(Buffer.alloc(100_000), done));
      assertCancelled(written, /stdin/, 'write');
      assertCancelled(await callbackOf((done) => streams.stdin.end(done)), /stdin/, 'end');
      assertCancelled(await callbackOf((done) => streams.stdin.end('more', done)), /stdin/, 'end with a chunk');
      assert.equal(streams.stdin.destroyed, true);
      await tick();
      assert.deepEqual(events, [], "no 'error' event");
      await sandbox.destroy();
    });

    test('after a stop: write and end fail through their callbacks, no error event', async () => {
      const sandbox = await open();
      const { streams, events } = await started(sandbox, 'sleep 60');
      await sandbox.stop();
      assertCancelled(await callbackOf((done) => streams.stdin.write('late', done)), /stopped|stdin/, 'write');
      assertCancelled(await callbackOf((done) => streams.stdin.end(done)), /stopped|stdin/, 'end');
      await tick();
      assert.deepEqual(events, [], "no 'error' event");
      assert.ok(['exited', 'signaled', 'unavailable'].includes((await streams.exit).kind));
      await sandbox.destroy();
    });
  });
}

describe("a driver's exit receipt", () => {
  const cases = [
    ['rejects', (reported) => reported.then(() => Promise.reject(new Error('the receipt was lost')))],
    ['is missing', () => undefined],
    ['never settles', () => new Promise(() => {})],
    ['is no fate', () => Promise.resolve({ kind: 'exited', code: 'zero' })],
  ];
  for (const [what, exit] of cases) {
    test(`that ${what} reads unavailable once the sandbox stopped, with no unhandled rejection`, async () => {
      const before = unhandled.length;
      const sandbox = await createSandboxBackend(childDriver({ exit })).reserve(policy(), { kind: 'in_process' }).start();
      const { streams } = await started(sandbox, 'sleep 60');
      let settled = false;
      streams.exit.then(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(settled, false, 'no fate is fabricated while the sandbox runs');
      await sandbox.stop();
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' });
      await sandbox.destroy();
      await tick();
      assert.equal(unhandled.length, before, String(unhandled.at(-1)));
    });
  }

  test('a fate the driver reports is handed on as a frozen copy of its own fields', async () => {
    const sandbox = await createSandboxBackend(childDriver({ exit: () => Promise.resolve({ kind: 'exited', code: 7, extra: 'dropped' }) })).reserve(policy(), { kind: 'in_process' }).start();
    const { streams } = await started(sandbox, 'exit 7');
    const fate = await streams.exit;
    assert.deepEqual(fate, { kind: 'exited', code: 7 });
    assert.ok(Object.isFrozen(fate));
    await sandbox.destroy();
  });
});

describe("exit's cause: why a stop made a process unavailable", () => {
  // The driver loses its receipt, so its exit reads unavailable as the Docker backend's does.
  const lost = () => new Promise(() => {});
  const backends = [
    ['the Docker backend', (edit) => dockerBackend(namespace).reserve(request(edit), { kind: 'in_process' }).start()],
    ['a JavaScript driver', (edit) => {
      const req = policy();
      edit(req.policy);
      return createSandboxBackend(childDriver({ exit: lost })).reserve(req, { kind: 'in_process' }).start();
    }],
  ];
  for (const [name, open] of backends) {
    test(`${name}: deadline_exceeded, output_limit, input_limit and stop`, async () => {
      const cases = [
        ['deadline_exceeded', (p) => (p.execution = { kind: 'deadline', timeoutMs: 300 }), async () => {}],
        ['output_limit', (p) => (p.streams = { ...p.streams, maxOutputBytes: 3 }), async () => {}],
        ['input_limit', (p) => (p.streams = { ...p.streams, maxStdinBytes: 3 }), async (_sandbox, streams) => streams.stdin.write('too long', () => {})],
        ['stop', () => {}, async (sandbox) => sandbox.stop()],
      ];
      for (const [cause, edit, act] of cases) {
        const sandbox = await open(edit);
        const { streams } = await started(sandbox, cause === 'output_limit' ? 'echo too-long; sleep 60' : 'sleep 60');
        await act(sandbox, streams);
        assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause }, `${name}: ${cause}`);
        await sandbox.destroy();
      }
    });
  }
});

describe("a driver's stop that never settles", () => {
  test('closes the streams when the stop begins; exit and the stop settle within the cleanup bound', async () => {
    // The driver's own streams: it never ends them, and its stop never settles.
    const raw = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() };
    const driver = childDriver({ stop: () => new Promise(() => {}) });
    const reserve = driver.reserve;
    driver.reserve = (req) => {
      const reserved = reserve(req);
      const start = reserved.start;
      reserved.start = async (...args) => ({ ...(await start(...args)), reserveProcess: () => ({ id: 'never', start: async () => ({ ...raw, exit: new Promise(() => {}) }) }) });
      return reserved;
    };
    const sandbox = await createSandboxBackend(driver).reserve(policy({ startupMs: 2_000, cleanupMs: 1_500 }), { kind: 'in_process' }).start();
    const streams = await sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start();
    raw.stdout.write('before the stop\n');
    const out = [];
    const outcome = new Promise((resolve) => {
      streams.stdout.on('data', (chunk) => out.push(chunk));
      streams.stdout.on('end', () => resolve('end'));
      streams.stdout.on('error', (error) => resolve(error));
    });
    const began = Date.now();
    const stopped = sandbox.stop().then(
      () => 'resolved',
      (error) => error,
    );
    const read = await outcome;
    const readIn = Date.now() - began;
    assertCancelled(read, /stdout/, 'the unended stdout');
    assert.equal(Buffer.concat(out).toString(), 'before the stop\n', 'what came before the stop is delivered');
    assert.ok(readIn < 1_500, `the reader was released by the stop's beginning, in ${readIn} ms, not by its end`);
    assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' });
    const stop = await stopped;
    assert.ok(stop instanceof SandboxCleanupError, String(stop));
    assert.equal(raw.stdin.writableEnded || raw.stdin.destroyed, true, "the driver's stdin was ended");
  });
});

test('the Docker backend left nothing behind', () => {
  assert.deepEqual(leftovers(namespace), NOTHING);
});
