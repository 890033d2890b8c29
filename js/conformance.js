// native-sandbox/conformance: the backend conformance suite. `runSandboxConformance` registers
// node:test tests that hold any SandboxBackend to the contract, through its public face only:
// states and once-only start, joined and retried stop/destroy, withSandbox, transfers (round
// trips, quotas at and past their bounds, hostile entries the guest makes), the process (binary
// streams, EOF, exit, stream limits, execution deadline), sessions when the backend offers them
// (commands, a background child, deadlines, stop with commands running, file roots), the
// effective policy, reconcile, and, through `census()`, that nothing is left behind.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SandboxOperationError, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from './errors.js';
import { fileFromBytes } from './bytes.js';
import { withSandbox } from './with-sandbox.js';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from './constants.js';

const MiB = 1024 * 1024;
/** How long the suite waits for a state an operation promised (a bound, not a speed goal). */
const SETTLE_MS = 60_000;
/** Every test ends within this, whatever the backend does (a hang is a failure, not a stall). */
const TEST_MS = 300_000;

function checkOptions(options) {
  const issues = [];
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected the conformance options object' }]);
  }
  if (typeof options.name !== 'string' || options.name === '') issues.push({ code: 'invalid_type', path: ['name'], message: 'must be a non-empty string' });
  if (typeof options.createBackend !== 'function') issues.push({ code: 'invalid_type', path: ['createBackend'], message: 'must be a function' });
  if (options.guest === null || typeof options.guest !== 'object') {
    issues.push({ code: 'invalid_type', path: ['guest'], message: 'must describe the guest: { shell }' });
  } else if (typeof options.guest.shell !== 'string' || !options.guest.shell.startsWith('/')) {
    issues.push({ code: 'invalid_path', path: ['guest', 'shell'], message: 'must be the absolute path of a POSIX shell in the guest' });
  }
  if (options.census !== undefined && typeof options.census !== 'function') issues.push({ code: 'invalid_type', path: ['census'], message: 'must be a function' });
  if (issues.length > 0) throw new SandboxValidationError(issues);
}

/** A small, explicit policy; the network is the strictest kind the backend offers. */
function requestFor(support, edit = () => {}) {
  // An allowlist-only backend gets a host nothing answers for: the strictest list there is.
  const network = support.network.includes('isolated')
    ? { kind: 'isolated' }
    : support.network.includes('allowlist')
      ? { kind: 'allowlist', hosts: ['conformance.invalid'] }
      : { kind: support.network[0] };
  const policy = {
    // Room for runtimes whose PID limit also counts their own threads (gVisor: about 45).
    resources: { cpus: 1, memoryBytes: 128 * MiB, pids: 256 },
    temporaryStorage: { homeBytes: 8 * MiB, tempBytes: 8 * MiB },
    network,
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: { ...SANDBOX_DEFAULT_STREAM_LIMITS },
  };
  edit(policy);
  return { policy };
}

async function drain(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Runs `shell -c script` as the sandbox's one process, feeding `input`; everything it gave. */
async function shell(sandbox, guest, script, input = Buffer.alloc(0)) {
  const streams = await sandbox.reserveProcess({ executable: guest.shell, args: ['-c', script], env: {}, cwd: sandbox.workspace }).start();
  const stdout = drain(streams.stdout);
  const stderr = drain(streams.stderr);
  streams.stdin.end(input);
  const [out, err, exit] = await Promise.all([stdout, stderr, streams.exit]);
  return { stdout: out, stderr: err, exit };
}

/** Everything an export delivered: path → { kind, bytes, executable }. */
async function exported(sandbox, selection, options) {
  const entries = new Map();
  const summary = await sandbox.exportTree(
    selection,
    async (entry) => {
      entries.set(entry.path, entry.kind === 'file' ? { kind: 'file', executable: entry.executable, bytes: await drain(entry.bytes) } : { kind: 'directory' });
    },
    options,
  );
  return { entries, summary };
}

async function eventually(what, predicate) {
  const until = Date.now() + SETTLE_MS;
  while (!(await predicate())) {
    if (Date.now() > until) assert.fail(`${what} within ${SETTLE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Registers the suite for one backend. `createBackend()` makes the backend under test (once);
 * `guest.shell` is an absolute POSIX shell in its guests; `census()`, when given, lists what the
 * backend holds on its engine now: after every test it must list what it listed before the suite.
 */
export function runSandboxConformance(options) {
  checkOptions(options);
  const { name, guest, census } = options;
  let backend;
  let baseline;
  const support = () => (typeof backend.support === 'function' ? backend.support() : backend.support);
  const request = (edit) => requestFor(support(), edit);
  const held = async () => (census ? [...(await census())].map(String).sort() : []);
  const reserve = (edit) => backend.reserve(request(edit), { kind: 'in_process' });
  /** A started sandbox, destroyed after `fn` whatever happens. */
  const withReady = async (fn, edit) => {
    const sandbox = await reserve(edit).start();
    try {
      return await fn(sandbox);
    } finally {
      await sandbox.destroy();
    }
  };

  describe(`sandbox conformance: ${name}`, () => {
    before(async () => {
      backend = await options.createBackend();
      baseline = await held();
    });
    after(async () => {
      if (census) assert.deepEqual(await held(), baseline, 'the backend holds exactly what it held before the suite');
    });

    test('reserve acquires nothing; start is once-only; the states follow the lifecycle', { timeout: TEST_MS }, async () => {
      const reservation = reserve();
      assert.equal(reservation.state.kind, 'reserved');
      assert.deepEqual(await held(), baseline, 'a reservation holds nothing yet');
      const sandbox = await reservation.start();
      try {
        assert.equal(sandbox.state.kind, 'ready');
        assert.equal(sandbox.id, reservation.id);
        await assert.rejects(async () => reservation.start(), SandboxStateError);
      } finally {
        await sandbox.destroy();
      }
      assert.equal(sandbox.state.kind, 'destroyed');
      await assert.rejects(async () => sandbox.importTree([]), SandboxStateError);
      assert.deepEqual(await held(), baseline);
    });

    test('stop and destroy are joined while in progress and succeed again once done', { timeout: TEST_MS }, async () => {
      const sandbox = await reserve().start();
      await Promise.all([sandbox.stop(), sandbox.stop()]);
      assert.equal(sandbox.state.kind, 'stopped');
      await sandbox.stop();
      await Promise.all([sandbox.destroy(), sandbox.destroy()]);
      assert.equal(sandbox.state.kind, 'destroyed');
      await sandbox.destroy();
      assert.deepEqual(await held(), baseline);
    });

    test('a reservation never started is destroyed without leaving anything', { timeout: TEST_MS }, async () => {
      const reservation = reserve();
      await reservation.destroy();
      assert.equal(reservation.state.kind, 'destroyed');
      assert.deepEqual(await held(), baseline);
    });

    test('withSandbox destroys after its callback, also when the callback throws', { timeout: TEST_MS }, async () => {
      const recovery = { kind: 'in_process' };
      let seen;
      const value = await withSandbox(backend, request(), async (sandbox) => {
        seen = sandbox;
        assert.equal(sandbox.state.kind, 'ready');
        return 42;
      }, { recovery });
      assert.equal(value, 42);
      assert.equal(seen.state.kind, 'destroyed');
      const failure = new Error('callback failed');
      await assert.rejects(withSandbox(backend, request(), async (sandbox) => {
        seen = sandbox;
        throw failure;
      }, { recovery }), (error) => error === failure);
      assert.equal(seen.state.kind, 'destroyed');
      assert.deepEqual(await held(), baseline);
    });

    test('a tree round-trips byte for byte: workspace, exact files and subtrees', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        const binary = randomBytes(200_000);
        const summary = await sandbox.importTree([
          { kind: 'directory', path: 'empty-dir' },
          fileFromBytes('bin/tool', Buffer.from('#!/bin/sh\necho tool\n'), { executable: true }),
          fileFromBytes('data/blob.bin', binary),
          fileFromBytes('data/empty', Buffer.alloc(0)),
          fileFromBytes('data/nested/deep/note.txt', Buffer.from('note')),
        ]);
        assert.equal(summary.files, 4n);
        assert.equal(summary.fileBytes, BigInt(binary.length + 24));
        await sandbox.stop();
        const whole = await exported(sandbox, { kind: 'workspace' });
        assert.ok(whole.entries.get('data/blob.bin')?.bytes.equals(binary), 'binary content is exact');
        assert.equal(whole.entries.get('data/empty')?.bytes.length, 0);
        assert.equal(whole.entries.get('bin/tool')?.executable, true);
        assert.equal(whole.entries.get('data/blob.bin')?.executable, false);
        assert.equal(whole.entries.get('empty-dir')?.kind, 'directory');
        assert.equal(whole.summary.files, 4n);
        const files = await exported(sandbox, { kind: 'files', paths: ['data/nested/deep/note.txt', 'bin/tool'] });
        assert.deepEqual([...files.entries.keys()], ['data/nested/deep/note.txt', 'bin/tool'], 'exact files in the requested order');
        assert.equal(files.entries.get('data/nested/deep/note.txt').bytes.toString(), 'note');
        const subtree = await exported(sandbox, { kind: 'subtree', path: 'data/nested' });
        assert.deepEqual([...subtree.entries.keys()].sort(), ['data/nested', 'data/nested/deep', 'data/nested/deep/note.txt']);
        const missing = await exported(sandbox, { kind: 'files', paths: ['no/such/file'] }).catch((e) => e);
        assert.ok(missing instanceof SandboxValidationError, String(missing));
        assert.deepEqual(missing.issues[0].path, ['paths', 0]);
      });
    });

    test('transfer quotas hold at their bounds and fail one past them, naming the quota', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        const two = () => [fileFromBytes('q/a', Buffer.alloc(10)), fileFromBytes('q/b', Buffer.alloc(10))];
        await sandbox.importTree(two(), { quotas: { maxFiles: 2, maxFileBytes: 10, maxTotalBytes: 20 } });
        await sandbox.stop();
        await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { maxFiles: 2, maxFileBytes: 10, maxTotalBytes: 20 } });
        for (const [quotas, named] of [
          [{ maxFiles: 1 }, 'maxFiles'],
          [{ maxFileBytes: 9 }, 'maxFileBytes'],
          [{ maxTotalBytes: 19 }, 'maxTotalBytes'],
        ]) {
          const error = await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas }).catch((e) => e);
          assert.ok(error instanceof SandboxValidationError, `${named}: ${error}`);
          assert.deepEqual(error.issues[0].path, ['quotas', named]);
        }
      });
      await withReady(async (sandbox) => {
        const error = await sandbox.importTree([fileFromBytes('a', Buffer.alloc(1)), fileFromBytes('b', Buffer.alloc(1))], { quotas: { maxFiles: 1 } }).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError, String(error));
        assert.deepEqual(error.issues[0].path, ['quotas', 'maxFiles']);
      });
    });

    test('a link the guest made fails a workspace export, naming it', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        const made = await shell(sandbox, guest, 'ln -s /etc/passwd escape && echo made');
        assert.equal(made.stdout.toString().trim(), 'made', made.stderr.toString());
        await sandbox.stop();
        const error = await exported(sandbox, { kind: 'workspace' }).catch((e) => e);
        assert.ok(error instanceof Error && !(error instanceof SandboxStateError), String(error));
        assert.match(error.message, /escape/);
      });
    });

    test('the process: binary stdin to stdout, EOF, stderr apart, the exit code', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        const input = randomBytes(300_000);
        const echoed = await shell(sandbox, guest, 'cat; echo done >&2', input);
        assert.ok(echoed.stdout.equals(input), 'every byte came back, in order, after EOF reached the guest');
        assert.equal(echoed.stderr.toString().trim(), 'done');
        assert.deepEqual({ ...echoed.exit }, { kind: 'exited', code: 0 });
        assert.throws(() => sandbox.reserveProcess({ executable: guest.shell, args: [], env: {}, cwd: sandbox.workspace }), SandboxStateError);
      });
      await withReady(async (sandbox) => {
        const failed = await shell(sandbox, guest, 'exit 7');
        assert.deepEqual({ ...failed.exit }, { kind: 'exited', code: 7 });
      });
    });

    test('output past maxOutputBytes fails the stream and stops the sandbox', { timeout: TEST_MS }, async () => {
      await withReady(
        async (sandbox) => {
          const streams = await sandbox.reserveProcess({ executable: guest.shell, args: ['-c', 'while :; do echo 0123456789abcdef; done'], env: {}, cwd: sandbox.workspace }).start();
          streams.stdin.end();
          // Both streams fail with the limit: stderr's failure is expected too.
          streams.stderr.on('error', () => {}).resume();
          const error = await drain(streams.stdout).then(() => undefined, (e) => e);
          assert.ok(error instanceof SandboxOperationError, String(error));
          assert.equal(error.code, 'output_limit');
          await eventually('the sandbox stopped', () => sandbox.state.kind === 'stopped');
        },
        (policy) => Object.assign(policy.streams, { maxOutputBytes: 4096 }),
      );
    });

    test('a stop settles while the output is unread, and the streams settle after it', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        // Lines of 4 KiB, written for ever: the staging and every buffer behind it fill up.
        const script = 's=0123456789abcdef; for i in 1 2 3 4 5 6 7 8; do s=$s$s; done; while :; do echo $s; echo $s >&2; done';
        const streams = await sandbox.reserveProcess({ executable: guest.shell, args: ['-c', script], env: {}, cwd: sandbox.workspace }).start();
        streams.stdin.end();
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        await sandbox.stop();
        assert.equal(sandbox.state.kind, 'stopped');
        await streams.exit;
        // Read now: each stream ends, or fails saying that output was discarded.
        for (const stream of [streams.stdout, streams.stderr]) {
          const outcome = await drain(stream).then(() => undefined, (e) => e);
          if (outcome !== undefined) {
            assert.ok(outcome instanceof SandboxOperationError, String(outcome));
            assert.equal(outcome.code, 'cancelled');
          }
        }
      });
    });

    test('the execution deadline stops the whole workload (or is refused at reserve)', { timeout: TEST_MS }, async () => {
      const deadline = (policy) => {
        policy.execution = { kind: 'deadline', timeoutMs: 1_000 };
      };
      if (!support().execution.includes('deadline')) {
        assert.throws(() => reserve(deadline), SandboxUnsupportedError);
        return;
      }
      await withReady(
        async (sandbox) => {
          const streams = await sandbox.reserveProcess({ executable: guest.shell, args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace }).start();
          streams.stdin.end();
          streams.stdout.resume();
          streams.stderr.resume();
          const exit = await streams.exit;
          assert.notDeepEqual({ ...exit }, { kind: 'exited', code: 0 }, 'the sleep did not finish');
          await eventually('the sandbox stopped', () => sandbox.state.kind === 'stopped');
        },
        (policy) => {
          policy.execution = { kind: 'deadline', timeoutMs: 1_000 };
        },
      );
    });

    test('the effective policy is no looser than the request', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        const asked = request().policy;
        const { effective } = sandbox;
        assert.equal(effective.network.kind, asked.network.kind);
        assert.ok(effective.resources.memoryBytes <= asked.resources.memoryBytes);
        assert.ok(effective.resources.cpus <= asked.resources.cpus);
        assert.ok(effective.resources.pids <= asked.resources.pids);
        assert.ok(effective.temporaryStorage.homeBytes <= asked.temporaryStorage.homeBytes);
        assert.ok(effective.temporaryStorage.tempBytes <= asked.temporaryStorage.tempBytes);
        assert.ok(Object.isFrozen(effective));
      });
    });

    // Sessions (0.4): a backend whose support says `sessions: true` must pass these; any other
    // must refuse the members with SandboxUnsupportedError.
    const sessionsOffered = () => support().sessions === true;
    const command = (script, cwd = '/') => ({ executable: guest.shell, args: ['-c', script], env: {}, cwd });
    /** A backend without sessions refuses every member with SandboxUnsupportedError. */
    const refusesSessions = (sandbox) => {
      assert.throws(() => sandbox.exec(command('true')), SandboxUnsupportedError);
      assert.throws(() => sandbox.run(command('true')), SandboxUnsupportedError);
      assert.throws(() => sandbox.files.read('x'), SandboxUnsupportedError);
    };

    test('sessions: commands beside each other, each with its own streams and exit; unsupported said plainly', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        if (!sessionsOffered()) return refusesSessions(sandbox);
        const results = await Promise.all(Array.from({ length: 16 }, (_, i) => sandbox.run(command(`echo ${i}; echo e${i} >&2; exit ${i % 5}`))));
        results.forEach((result, i) => {
          assert.equal(result.stdout.toString(), `${i}\n`);
          assert.equal(result.stderr.toString(), `e${i}\n`);
          assert.deepEqual({ ...result.exit }, { kind: 'exited', code: i % 5 });
        });
        const input = randomBytes(200_000);
        const cat = await sandbox.exec(command('cat'));
        const out = drain(cat.stdout);
        cat.stdin.end(input);
        assert.ok((await out).equals(input), 'stdin to stdout byte for byte, then EOF');
        assert.deepEqual({ ...(await cat.exit) }, { kind: 'exited', code: 0 });
      });
    });

    test('sessions: a background child does not hold the exit; a deadline ends a command that ignores SIGTERM', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        if (!sessionsOffered()) return refusesSessions(sandbox);
        const started = await sandbox.run(command('sleep 120 & echo started'));
        assert.equal(started.stdout.toString(), 'started\n');
        assert.deepEqual({ ...started.exit }, { kind: 'exited', code: 0 });
        const stubborn = await sandbox.exec(command('trap "" TERM; sleep 120'), { deadlineMs: 200, killGraceMs: 200 });
        assert.deepEqual({ ...(await stubborn.exit) }, { kind: 'signaled', signal: 'SIGKILL' });
        await assert.rejects(sandbox.run(command('sleep 120'), { deadlineMs: 200 }), (error) => error instanceof SandboxOperationError && error.code === 'deadline_exceeded');
      });
    });

    test('sessions: stop ends every command, and no command or file call is admitted after it', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        if (!sessionsOffered()) return refusesSessions(sandbox);
        const running = await Promise.all([1, 2, 3].map(() => sandbox.exec(command('sleep 120 & sleep 120'))));
        await sandbox.stop();
        for (const each of running) assert.equal((await each.exit).kind, 'unavailable');
        await assert.rejects(sandbox.run(command('true')), SandboxStateError);
        await assert.rejects(sandbox.files.stat('x'), SandboxStateError);
      });
    });

    test('sessions: files reach the workspace, HOME and TMPDIR and nothing outside them', { timeout: TEST_MS }, async () => {
      await withReady(async (sandbox) => {
        if (!sessionsOffered()) return refusesSessions(sandbox);
        await sandbox.files.write('a/b.txt', 'x');
        assert.equal((await sandbox.files.read('a/b.txt')).toString(), 'x');
        assert.equal((await sandbox.run(command('cat a/b.txt', sandbox.workspace))).stdout.toString(), 'x');
        assert.equal(await sandbox.files.read('absent'), null);
        await sandbox.run(command('ln -s / root', sandbox.workspace));
        for (const path of ['../x', '/etc/passwd', 'root/etc/passwd', '/sandbox/workspace/../../etc/passwd']) {
          await assert.rejects(sandbox.files.read(path), SandboxValidationError, path);
        }
      });
    });

    test('reconcile: a live sandbox is matched and its owner cleans up; a destroyed one is absent', { timeout: TEST_MS }, async () => {
      const sandbox = await reserve().start();
      const record = sandbox.recoveryRecord;
      try {
        const live = await backend.reconcile(record);
        assert.ok(live.kind === 'matched' || live.kind === 'uncertain', `a live sandbox reconciles as matched or uncertain, not ${live.kind}`);
        assert.equal(live.owner.recoveryRecord.sandboxId, record.sandboxId);
        await live.owner.destroy();
      } finally {
        await sandbox.destroy();
      }
      assert.deepEqual(await held(), baseline, 'the recovered owner and the live one together left nothing');
      const gone = await backend.reconcile(record);
      assert.equal(gone.kind, 'absent');
    });
  });
}
