// The process port through createSandboxBackend: a JavaScript driver that runs its one process
// as a local child. The Rust owner admits it, owns the execution deadline, and runs its streams
// as the Docker backend's (staging, limits, failures); the driver's raw streams only feed them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { PassThrough, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { describe, test } from 'node:test';
import { SandboxCleanupError, SandboxOperationError, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { initialRecord, policy, SUPPORT } from './scripted-driver.mjs';

function localDriver({ withProcess = true, startProcess, onStop } = {}) {
  const children = [];
  let count = 0;
  const driver = {
    support: SUPPORT,
    reserve(request) {
      count += 1;
      const id = `local-${count}`;
      return {
        id,
        recoveryRecord: initialRecord(id),
        async start() {
          const ready = {
            effective: { resources: request.policy.resources, temporaryStorage: request.policy.temporaryStorage, network: request.policy.network, workspaceDiskQuota: { kind: 'not_requested' } },
            workspace: '/tmp',
          };
          if (withProcess) {
            ready.reserveProcess = (spec) => ({
              id: 'child-1',
              async start(options) {
                if (startProcess) return startProcess(options);
                // A process group of its own, so stop can end the complete workload.
                const child = spawn(spec.executable, spec.args, { env: spec.env, cwd: spec.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
                children.push(child);
                const exit = new Promise((resolve) =>
                  child.on('exit', (code, signal) => resolve(signal ? { kind: 'signaled', signal } : { kind: 'exited', code })),
                );
                return { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exit };
              },
            });
          }
          return ready;
        },
        async stop() {
          if (onStop) return onStop();
          for (const child of children) {
            try {
              process.kill(-child.pid, 'SIGKILL');
            } catch {
              // The group is already gone.
            }
          }
        },
        async destroy() {},
      };
    },
    async reconcile() {
      return { kind: 'conflict', reason: 'not used' };
    },
  };
  return { driver, children };
}

async function started(setup, edit = () => {}) {
  const request = policy();
  edit(request.policy);
  return createSandboxBackend(setup.driver).reserve(request, { kind: 'in_process' }).start();
}

/**
 * A started sandbox whose driver's process is three streams the test writes and ends (`raw`:
 * PassThroughs, unless `stdin` or `stdout` is given); `onStop`, when given, is the driver's stop,
 * and `cleanupMs` the sandbox's cleanup bound.
 */
async function rawProcess(onStop, { stdin = new PassThrough(), stdout = new PassThrough(), cleanupMs } = {}) {
  const raw = { stdin, stdout, stderr: new PassThrough() };
  const setup = localDriver({ startProcess: async () => ({ ...raw, exit: new Promise(() => {}) }), onStop: onStop && (() => onStop(raw)) });
  const sandbox = await started(setup, cleanupMs === undefined ? undefined : (p) => (p.deadlines = { startupMs: 2_000, cleanupMs }));
  const streams = await sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start();
  return { raw, sandbox, streams };
}

/** Reads both outputs, keeping their failures quiet; returns the 'error' events stdin emits. */
function watched(streams) {
  for (const stream of [streams.stdout, streams.stderr]) stream.on('error', () => {}).resume();
  const events = [];
  streams.stdin.on('error', (error) => events.push(error));
  return events;
}

function collect(stream) {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  return new Promise((resolve, reject) => {
    stream.on('end', () => resolve(Buffer.concat(chunks).toString()));
    stream.on('error', reject);
  });
}

describe('the process port of a JavaScript driver', () => {
  test('stdin to stdout, stderr apart, exit code, once only', async () => {
    const setup = localDriver();
    const sandbox = await started(setup);
    const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'cat; echo err >&2; exit 4'], env: {}, cwd: '/tmp' });
    assert.equal(process.id, 'child-1');
    assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/' }), SandboxStateError);
    const streams = await process.start();
    await assert.rejects(process.start(), SandboxStateError);
    const out = collect(streams.stdout);
    const err = collect(streams.stderr);
    streams.stdin.end('through the driver\n');
    assert.equal(await out, 'through the driver\n');
    assert.equal(await err, 'err\n');
    assert.deepEqual(await streams.exit, { kind: 'exited', code: 4 });
    await sandbox.destroy();
  });

  test('maxOutputBytes fails the streams and stops the sandbox, killing the process', async () => {
    const setup = localDriver();
    const sandbox = await started(setup, (p) => (p.streams.maxOutputBytes = 3));
    const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo too-long; sleep 30'], env: {}, cwd: '/tmp' }).start();
    const stderr = collect(streams.stderr).catch((e) => e);
    const error = await collect(streams.stdout).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError);
    assert.equal(error.code, 'output_limit');
    assert.equal((await stderr).code, 'output_limit');
    assert.deepEqual(await streams.exit, { kind: 'signaled', signal: 'SIGKILL' });
    await sandbox.destroy();
  });

  test('the execution deadline, owned by the Rust owner, stops the workload', async () => {
    const setup = localDriver();
    const sandbox = await started(setup, (p) => (p.execution = { kind: 'deadline', timeoutMs: 300 }));
    const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 30'], env: {}, cwd: '/tmp' }).start();
    streams.stdout.resume();
    streams.stderr.resume();
    assert.deepEqual(await streams.exit, { kind: 'signaled', signal: 'SIGKILL' });
    await sandbox.stop();
    assert.equal(sandbox.state.kind, 'stopped');
    await sandbox.destroy();
  });

  test('maxStdinBytes rejects the crossing write with input_limit', async () => {
    const setup = localDriver();
    const sandbox = await started(setup, (p) => (p.streams.maxStdinBytes = 4));
    const streams = await sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: '/tmp' }).start();
    streams.stdout.resume();
    streams.stderr.resume();
    const failed = new Promise((resolve) => streams.stdin.once('error', resolve));
    streams.stdin.write('12345');
    assert.equal((await failed).code, 'input_limit');
    await sandbox.destroy();
  });

  test('a write past maxBufferedInputBytes gets input_limit through its callback too', async () => {
    const setup = localDriver();
    const sandbox = await started(setup);
    const streams = await sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: '/tmp' }).start();
    streams.stdout.resume();
    streams.stderr.resume();
    const event = new Promise((resolve) => streams.stdin.once('error', resolve));
    // One write more than the staging (64 KiB) holds.
    const refused = await callbackOf((done) => streams.stdin.write(Buffer.alloc(65_537), done));
    assert.ok(refused instanceof SandboxOperationError, String(refused));
    assert.equal(refused.code, 'input_limit');
    assert.equal(await event, refused);
    await sandbox.destroy();
  });

  test('a driver without a process port says so', async () => {
    const sandbox = await started(localDriver({ withProcess: false }));
    assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/' }), SandboxUnsupportedError);
    await sandbox.destroy();
  });
});

describe('the JavaScript driver process port, as the original owner runs it', () => {
  const hanging = (seen) => ({ signal }) =>
    new Promise((_, reject) => {
      seen.signal = signal;
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });

  test('startup is observed within startupMs: the driver signal aborts, the sandbox is fenced and stopped', async () => {
    const seen = {};
    const setup = localDriver({ startProcess: hanging(seen) });
    const sandbox = await started(setup, (p) => (p.deadlines = { startupMs: 400, cleanupMs: 1000 }));
    const child = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' });
    const error = await child.start().catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'deadline_exceeded');
    // The stop the failed start began aborts the driver's signal (a notice from the owner's
    // thread, which may arrive just after the start's failure).
    for (let i = 0; i < 50 && !seen.signal.aborted; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(seen.signal.aborted, true, 'the driver saw its owner signal abort');
    for (let i = 0; i < 50 && sandbox.state.kind !== 'stopped'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(sandbox.state.kind, 'stopped');
    await sandbox.destroy();
  });

  test('a start whose signal aborted before the call never reaches the driver; the sandbox is fenced and stopped', async () => {
    let asked = 0;
    const setup = localDriver({ startProcess: async () => void (asked += 1) });
    const sandbox = await started(setup);
    const child = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' });
    const error = await child.start({ signal: AbortSignal.abort() }).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.equal(asked, 0);
    for (let i = 0; i < 50 && sandbox.state.kind !== 'stopped'; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(sandbox.state.kind, 'stopped');
    await assert.rejects(child.start(), SandboxStateError, 'once only');
    await sandbox.destroy();
  });

  test('bad start options throw at the call, before anything is entered', async () => {
    const setup = localDriver();
    const reservation = createSandboxBackend(setup.driver).reserve(policy(), { kind: 'in_process' });
    assert.throws(() => reservation.start({ bogus: 1 }), SandboxValidationError);
    assert.throws(() => reservation.start({ signal: 'now' }), SandboxValidationError);
    assert.equal(reservation.state.kind, 'reserved');
    const sandbox = await reservation.start();
    const child = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' });
    assert.throws(() => child.start(null), SandboxValidationError);
    assert.equal(sandbox.state.kind, 'ready');
    const streams = await child.start();
    streams.stdin.end();
    streams.stdout.resume();
    streams.stderr.resume();
    assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    await sandbox.destroy();
  });

  test('stop() aborts the owner signal of a process start in progress', async () => {
    const seen = {};
    const setup = localDriver({ startProcess: hanging(seen) });
    const sandbox = await started(setup);
    const pending = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start().catch((e) => e);
    await new Promise((r) => setTimeout(r, 50));
    await sandbox.stop();
    assert.equal(seen.signal.aborted, true);
    const error = await pending;
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    await sandbox.destroy();
  });

  test("stop() closes the driver's streams and waits for them", async () => {
    const { raw, sandbox, streams } = await rawProcess();
    const ends = [streams.stdout, streams.stderr].map((stream) => settled(stream));
    streams.stdout.resume();
    streams.stderr.resume();
    await sandbox.stop();
    assert.deepEqual([raw.stdin.closed, raw.stdout.closed, raw.stderr.closed], [true, true, true]);
    // The driver never ended them: closed before their end, they may have held more.
    for (const outcome of await Promise.all(ends)) {
      assert.ok(outcome instanceof SandboxOperationError, String(outcome));
      assert.equal(outcome.code, 'cancelled');
      assert.match(outcome.message, /closed before the driver ended it/);
    }
    await sandbox.destroy();
  });

  test("a driver's stream that never reports closing holds the stop only until the close wait (5 s) ends", async () => {
    // Destroyed, it never finishes destroying: no 'close' ever comes.
    class Stuck extends PassThrough {
      _destroy() {}
    }
    // A cleanup bound past the close wait: without that wait's own bound the stop fails here.
    const { raw, sandbox, streams } = await rawProcess(undefined, { stdout: new Stuck(), cleanupMs: 15_000 });
    const [stdoutEnd, stderrEnd] = [streams.stdout, streams.stderr].map((stream) => settled(stream.resume(), 15_000));
    await sandbox.stop();
    assert.equal(sandbox.state.kind, 'stopped');
    assert.equal(raw.stdout.destroyed, true);
    assert.equal(raw.stdout.closed, false, 'the stuck stream never closed');
    assert.deepEqual([raw.stdin.closed, raw.stderr.closed], [true, true]);
    // Closed before the driver ended it, stderr failed with cancelled as at any stop; the stuck
    // stdout is left, and fails too instead of waiting for a close that never comes.
    const closed = await stderrEnd;
    assert.equal(closed.code, 'cancelled', String(closed));
    assert.match(closed.message, /stderr was closed before the driver ended it/);
    const left = await stdoutEnd;
    assert.equal(left.code, 'cancelled', String(left));
    assert.match(left.message, /stdout did not close within 5000 ms of the stop/);
    await sandbox.destroy();
  });

  test("the end still waiting for the driver's stdin fails with cancelled at a stop, without an 'error' event", async () => {
    class Stuck extends PassThrough {
      _destroy() {}
    }
    // A write is taken once staged, as on the Docker backend; end() waits until the driver's
    // stdin finished.
    const cases = [
      // Nobody reads the driver's stdin: past its 4 bytes, it waits for its drain.
      { name: 'a full stdin', stdin: () => new PassThrough({ highWaterMark: 4 }) },
      { name: 'a full stdin that never closes', stdin: () => new Stuck({ highWaterMark: 4 }) },
      // The driver's stdin never finishes.
      { name: 'a stdin that never finishes', stdin: () => new Writable({ write: (_chunk, _encoding, done) => done(), final() {} }) },
    ];
    for (const { name, stdin } of cases) {
      const { sandbox, streams } = await rawProcess(undefined, { stdin: stdin(), cleanupMs: 15_000 });
      const events = watched(streams);
      const written = callbackOf((done) => streams.stdin.write(Buffer.alloc(64), done));
      const ended = callbackOf((done) => streams.stdin.end(done));
      await sandbox.stop();
      const failed = await ended;
      assert.ok(failed instanceof SandboxOperationError, `${name}: ${failed}`);
      assert.equal(failed.code, 'cancelled', name);
      assert.match(failed.message, /the sandbox stopped before the driver took the process's stdin/, name);
      assert.ok((await written) == null, `${name}: the write was taken`);
      assert.deepEqual(events, [], `${name}: no 'error' event`);
      await sandbox.destroy();
    }
  });

  test("a write into a driver's stdin whose process is gone fails with cancelled at once, without an 'error' event", async () => {
    const setup = localDriver();
    const sandbox = await started(setup);
    const streams = await sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start();
    const events = watched(streams);
    assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    const error = await callbackOf((done) => streams.stdin.write(Buffer.alloc(16 * 1024), done));
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.match(error.message, /the process exited: its stdin takes nothing more/);
    // stdin takes nothing more: a later write and the end fail at once too, the same way.
    const late = await callbackOf((done) => streams.stdin.write('late', done));
    assert.equal(late, error);
    assert.equal(await callbackOf((done) => streams.stdin.end(done)), error);
    assert.deepEqual(events, [], "no 'error' event");
    assert.equal(sandbox.state.kind, 'ready', 'the sandbox is not stopped for it');
    await sandbox.destroy();
  });

  test("a driver's stdin closed without an error while a write or the end waits fails them with cancelled", async () => {
    // The first two end through the driver stdin's 'close'; the third through its end callback's
    // error, which its state shows was a close.
    const cases = [
      // Past its 4 bytes, the driver's stdin waits for its drain.
      { name: 'an end behind a write waiting for its drain', stdin: () => new PassThrough({ highWaterMark: 4 }) },
      // The write is taken but never done: end() waits behind it; and an end that never finishes.
      { name: 'an end behind a write never done', stdin: () => new Writable({ write() {} }) },
      { name: 'an end never finished', stdin: () => new Writable({ write: (_chunk, _encoding, done) => done(), final() {} }) },
    ];
    for (const { name, stdin } of cases) {
      const { raw, sandbox, streams } = await rawProcess(undefined, { stdin: stdin() });
      const events = watched(streams);
      const written = callbackOf((done) => streams.stdin.write(Buffer.alloc(64), done));
      const ended = callbackOf((done) => streams.stdin.end(done));
      await new Promise((resolve) => setImmediate(resolve));
      // As Node does to a child's stdin at its exit.
      raw.stdin.destroy();
      const failed = await ended;
      assert.ok(failed instanceof SandboxOperationError, `${name}: ${failed}`);
      assert.equal(failed.code, 'cancelled', name);
      assert.match(failed.message, /the process's stdin was closed/, name);
      assert.ok((await written) == null, `${name}: the write was taken`);
      assert.deepEqual(events, [], `${name}: no 'error' event`);
      assert.equal(sandbox.state.kind, 'ready', name);
      await sandbox.destroy();
    }
  });

  test("a stop whose kill fails the driver's stdin fails what waited with the stop's cancelled", async () => {
    // The driver's stop kills its process: its stdin then fails (EPIPE) before the streams close.
    const onStop = async (raw) => {
      raw.stdin.destroy(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      // Its 'error' is out before the stop closes the streams.
      await new Promise((resolve) => setImmediate(resolve));
    };
    const { sandbox, streams } = await rawProcess(onStop, { stdin: new PassThrough({ highWaterMark: 4 }) });
    const events = watched(streams);
    const written = callbackOf((done) => streams.stdin.write(Buffer.alloc(64), done));
    const ended = callbackOf((done) => streams.stdin.end(done));
    await sandbox.stop();
    assert.ok((await written) == null, 'the write was taken');
    const error = await ended;
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.match(error.message, /the sandbox stopped before the driver took the process's stdin/);
    assert.deepEqual(events, [], "no 'error' event");
    await sandbox.destroy();
  });

  test("a driver whose stop fails still has its process's streams closed, and what waited on them fails", async () => {
    let failing = true;
    const onStop = async () => {
      if (failing) throw new Error('the driver could not stop');
    };
    const { raw, sandbox, streams } = await rawProcess(onStop, { stdin: new PassThrough({ highWaterMark: 4 }) });
    const events = watched(streams);
    const written = callbackOf((done) => streams.stdin.write(Buffer.alloc(64), done));
    const ended = callbackOf((done) => streams.stdin.end(done));
    await assert.rejects(sandbox.stop(), SandboxCleanupError);
    assert.equal(sandbox.state.kind, 'uncertain');
    assert.ok((await written) == null, 'the write was taken');
    const error = await ended;
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.match(error.message, /the sandbox stopped before the driver took the process's stdin/);
    assert.deepEqual([raw.stdin.destroyed, raw.stdout.destroyed, raw.stderr.destroyed], [true, true, true]);
    assert.deepEqual(events, [], "no 'error' event");
    failing = false;
    await sandbox.destroy();
  });

  test("the driver's stdin failing fails what waits on it with stream_failure, and its 'error' does not reach the host", async () => {
    // A driver that does not listen to its own stdin's errors (a pipe whose reader is gone).
    const { raw, sandbox, streams } = await rawProcess(undefined, { stdin: new PassThrough({ highWaterMark: 4 }) });
    const events = watched(streams);
    const written = callbackOf((done) => streams.stdin.write(Buffer.alloc(64), done));
    const ended = callbackOf((done) => streams.stdin.end(done));
    assert.ok((await written) == null, 'the write was taken');
    raw.stdin.destroy(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    const error = await ended;
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'stream_failure');
    assert.match(error.message, /writing the process's stdin failed: write EPIPE/);
    assert.equal(error.cause?.code, 'EPIPE', 'the driver error itself is the cause');
    // stdin takes nothing more: a later write fails the same way, at once.
    assert.equal(await callbackOf((done) => streams.stdin.write('late', done)), error);
    assert.deepEqual(events, [], "no 'error' event");
    await sandbox.destroy();
  });

  test('streams a stopped driver ended, read all along, end as usual', async () => {
    // As a killed child: its streams end once what it wrote was read.
    const { raw, sandbox, streams } = await rawProcess(async ({ stdout, stderr }) => {
      stdout.end();
      stderr.end();
    });
    const out = collect(streams.stdout);
    const ends = settled(streams.stderr.resume());
    raw.stdout.write('before the stop');
    await sandbox.stop();
    assert.equal((await out).toString(), 'before the stop');
    assert.equal(await ends, 'end');
    await sandbox.destroy();
  });

  test('a stop with unread output settles; that stream fails with cancelled at its next read, the other ends', async () => {
    const { raw, sandbox, streams } = await rawProcess();
    streams.stderr.resume();
    const stderrEnd = settled(streams.stderr);
    // More than the staging: the consumer is behind and the driver's stream holds the rest.
    for (let i = 0; i < 64; i++) raw.stdout.write(Buffer.alloc(64 * 1024, 1));
    // The process closed its stderr; its stdout is still open when the stop comes.
    raw.stderr.end();
    await new Promise((resolve) => setImmediate(resolve));
    await sandbox.stop();
    assert.equal(await stderrEnd, 'end');
    const outcome = await settled(streams.stdout.resume());
    assert.ok(outcome instanceof SandboxOperationError, String(outcome));
    assert.equal(outcome.code, 'cancelled');
    assert.match(outcome.message, /stdout was unread/);
    await sandbox.destroy();
  });
});

test('past maxOutputBytes the failure comes after the bytes a stream buffered, and a stream nobody reads is not sent it', async () => {
  const raw = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() };
  const setup = localDriver({ startProcess: async () => ({ ...raw, exit: new Promise(() => {}) }), onStop: async () => {} });
  const sandbox = await started(setup, (p) => (p.streams.maxOutputBytes = 100));
  const streams = await sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start();
  raw.stdout.write('a'.repeat(60));
  await new Promise((resolve) => setImmediate(resolve));
  raw.stdout.write('b'.repeat(60));
  // Nobody reads yet: neither stream emits the failure (no listener would crash the host).
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(streams.stdout.destroyed, false);
  assert.equal(streams.stderr.destroyed, false);
  const chunks = [];
  const outcome = await new Promise((resolve) => {
    streams.stdout.on('data', (chunk) => chunks.push(chunk));
    streams.stdout.on('error', resolve);
    streams.stdout.on('end', () => resolve('end'));
  });
  assert.equal(Buffer.concat(chunks).toString(), 'a'.repeat(60));
  assert.equal(outcome.code, 'output_limit');
  assert.equal((await settled(streams.stderr.resume())).code, 'output_limit');
  await sandbox.destroy();
});

test('a driver whose stop waits for its output to be read is not held by a consumer that does not read', async () => {
  // As an engine with an attached client: the stop returns once the driver's output was read.
  const { raw, sandbox, streams } = await rawProcess(async ({ stdout, stderr }) => {
    stdout.end();
    stderr.end();
    await Promise.all([finished(stdout), finished(stderr)]);
  });
  // 4 MiB against a staging of 64 KiB: the driver's stream holds nearly all of it.
  for (let i = 0; i < 64; i++) raw.stdout.write(Buffer.alloc(64 * 1024, 1));
  await new Promise((resolve) => setImmediate(resolve));
  await sandbox.stop();
  assert.equal(sandbox.state.kind, 'stopped');
  let read = 0;
  streams.stdout.on('data', (chunk) => {
    read += chunk.length;
  });
  const outcome = await settled(streams.stdout);
  assert.ok(outcome instanceof SandboxOperationError, String(outcome));
  assert.equal(outcome.code, 'cancelled');
  assert.ok(read > 0 && read <= 64 * 1024 + 16 * 1024, `what the staging held came first (${read} bytes)`);
  assert.equal(await settled(streams.stderr.resume()), 'end');
  await sandbox.destroy();
});

/** What `start` hands its callback (`undefined` for success); no call within 20 s fails the test. */
function callbackOf(start) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the callback did not come within 20 s')), 20_000);
    start((error) => {
      clearTimeout(timer);
      resolve(error);
    });
  });
}

/** How `stream` settles: 'end', or its error; a stream still open after `ms` fails the test. */
function settled(stream, ms = 5_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the stream did not settle within ${ms} ms`)), ms);
    stream.once('end', () => {
      clearTimeout(timer);
      resolve('end');
    });
    stream.once('error', (error) => {
      clearTimeout(timer);
      resolve(error);
    });
  });
}


test("a driver's stream that ends early ends at once while the other runs on", async () => {
  const { raw, sandbox, streams } = await rawProcess();
  raw.stderr.write('last words');
  raw.stderr.end();
  const stderr = collect(streams.stderr);
  assert.equal(await stderr, 'last words');
  // stdout is still open, and still delivers.
  const out = collect(streams.stdout);
  raw.stdout.write('still here');
  raw.stdout.end();
  assert.equal(await out, 'still here');
  await sandbox.destroy();
});

test("a JavaScript driver's process gets the stall warning the Docker backend's gets", async () => {
  const warnings = [];
  const onWarning = (warning) => String(warning.code).startsWith('NATIVE_SANDBOX_') && warnings.push(warning);
  process.on('warning', onWarning);
  try {
    const sandbox = await started(localDriver());
    // Far more to stderr than the staging holds, while only stdout is read: the child blocks.
    const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'head -c 4000000 /dev/zero >&2; echo done'], env: {}, cwd: '/tmp' }).start();
    streams.stdin.end();
    const out = collect(streams.stdout);
    for (let i = 0; i < 300 && warnings.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['NATIVE_SANDBOX_OUTPUT_STALLED'],
    );
    assert.match(warnings[0].message, /the process's stderr has been full and unread for 10 s/);
    // Read, it delivers everything; nothing else is said.
    let read = 0;
    streams.stderr.on('data', (chunk) => (read += chunk.length));
    const errEnd = new Promise((resolve) => streams.stderr.on('end', resolve));
    assert.equal(await out, 'done\n');
    assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    await errEnd;
    assert.equal(read, 4_000_000);
    assert.equal(warnings.length, 1);
    await sandbox.destroy();
  } finally {
    process.off('warning', onWarning);
  }
});

test('a stop right after a process start was entered never leaves the driver start unaborted', async () => {
  for (let round = 0; round < 20; round++) {
    let asked = 0;
    let aborted = 0;
    // A start that settles only when its signal aborts.
    const startProcess = ({ signal }) => {
      asked += 1;
      return new Promise((_, reject) => {
        const onAbort = () => {
          aborted += 1;
          reject(signal.reason);
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
    };
    const sandbox = await started(localDriver({ startProcess }), (p) => (p.deadlines = { startupMs: 2_000, cleanupMs: 1_000 }));
    const pending = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start().catch((e) => e);
    await sandbox.stop();
    assert.equal(sandbox.state.kind, 'stopped', `round ${round}`);
    const error = await pending;
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.equal(error.code, 'cancelled');
    assert.equal(asked, aborted, `round ${round}: a start the driver was asked for was aborted`);
    await sandbox.destroy();
  }
});

test('a driver stream handed over paused still flows, and one that carries no bytes fails its stream', async () => {
  const stdout = new PassThrough();
  stdout.pause();
  const stderr = new PassThrough({ objectMode: true });
  const raw = { stdin: new PassThrough(), stdout, stderr };
  const setup = localDriver({ startProcess: async () => ({ ...raw, exit: new Promise(() => {}) }) });
  const sandbox = await started(setup);
  const streams = await sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/tmp' }).start();
  const out = collect(streams.stdout);
  stdout.end('flows');
  assert.equal(await out, 'flows');
  const failed = settled(streams.stderr.resume());
  stderr.write({ not: 'bytes' });
  const error = await failed;
  assert.ok(error instanceof SandboxStateError, String(error));
  assert.match(error.message, /stderr must carry bytes/);
  await sandbox.destroy();
});
