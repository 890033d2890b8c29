// Sessions: many commands and live files in one started Docker sandbox (runc and runsc), beside
// or without its reserved process; owned like the process (a stop ends them all, nothing is
// admitted after it); bad input answered with typed errors naming the field.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SandboxOperationError, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { collect, dockerBackend, leftovers, MiB, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';
import { initialRecord, SUPPORT } from './scripted-driver.mjs';

const namespace = uniqueNamespace('sessions');
const runc = dockerBackend(namespace);
const runsc = dockerBackend(namespace, { runtime: 'runsc' });

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the sessions suite leaves no engine objects behind');
});

const sh = (script, env = {}) => ({ executable: '/bin/sh', args: ['-c', script], env, cwd: '/sandbox/workspace' });

async function withStarted(backend, body, edit) {
  const sandbox = await backend.reserve(request(edit), { kind: 'in_process' }).start();
  try {
    return await body(sandbox);
  } finally {
    await sandbox.stop();
    await sandbox.destroy();
  }
}

function issuePaths(error) {
  assert.ok(error instanceof SandboxValidationError, `a validation error, not ${error}`);
  return error.issues.map((issue) => issue.path.join('.'));
}

for (const [name, backend] of [
  ['runc', runc],
  ['runsc', runsc],
]) {
  describe(`sessions (${name})`, () => {
    test('commands one after another and 64 at once, each with its own output and exit', async () => {
      await withStarted(backend, async (sandbox) => {
        assert.equal(runc.support.sessions, true);
        for (let i = 0; i < 5; i += 1) {
          const result = await sandbox.run(sh(`echo out-${i}; echo err-${i} >&2; exit ${i}`));
          assert.deepEqual(result.exit, { kind: 'exited', code: i });
          assert.equal(result.stdout.toString(), `out-${i}\n`);
          assert.equal(result.stderr.toString(), `err-${i}\n`);
        }
        const results = await Promise.all(
          Array.from({ length: 64 }, (_, i) => sandbox.run({ executable: '/bin/echo', args: [`n${i}`], env: {}, cwd: '/' })),
        );
        results.forEach((result, i) => {
          assert.deepEqual(result.exit, { kind: 'exited', code: 0 });
          assert.equal(result.stdout.toString(), `n${i}\n`);
        });
      });
    });

    test("a background child holding stdout: the command's exit settles, its streams end, run returns", async () => {
      await withStarted(backend, async (sandbox) => {
        const result = await sandbox.run(sh('sleep 60 & echo started'));
        assert.deepEqual(result.exit, { kind: 'exited', code: 0 });
        assert.equal(result.stdout.toString(), 'started\n');
        const command = await sandbox.exec(sh('sleep 60 & echo started'));
        assert.deepEqual(await command.exit, { kind: 'exited', code: 0 });
        assert.equal((await collect(command.stdout)).toString(), 'started\n');
      });
    });

    test('exec: binary stdin with EOF on end(), stdin: false reads /dev/null, kill signals the group', async () => {
      await withStarted(backend, async (sandbox) => {
        const payload = randomBytes(3 * MiB);
        const cat = await sandbox.exec({ executable: '/bin/cat', args: [], env: {}, cwd: '/' });
        const out = collect(cat.stdout);
        cat.stdin.end(payload);
        assert.deepEqual(await cat.exit, { kind: 'exited', code: 0 });
        assert.equal(createHash('sha256').update(await out).digest('hex'), createHash('sha256').update(payload).digest('hex'));

        const empty = await sandbox.exec({ executable: '/bin/cat', args: [], env: {}, cwd: '/' }, { stdin: false });
        assert.equal(empty.stdin, null);
        assert.deepEqual(await empty.exit, { kind: 'exited', code: 0 });
        assert.equal((await collect(empty.stdout)).length, 0);

        const sleeper = await sandbox.exec(sh('sleep 60'));
        sleeper.kill();
        assert.deepEqual(await sleeper.exit, { kind: 'signaled', signal: 'SIGTERM' });
        assert.throws(() => sleeper.kill('SIGSTOP'), (error) => issuePaths(error).includes('signal'));
      });
    });

    test('deadlineMs ends a command that ignores SIGTERM (SIGKILL after killGraceMs); a signal aborts run', async () => {
      await withStarted(backend, async (sandbox) => {
        await assert.rejects(
          sandbox.run(sh('trap "" TERM; sleep 60'), { deadlineMs: 300, killGraceMs: 200 }),
          (error) => error instanceof SandboxOperationError && error.code === 'deadline_exceeded',
        );
        const stubborn = await sandbox.exec(sh('trap "" TERM; echo ready; sleep 60 & wait'), { deadlineMs: 300, killGraceMs: 100 });
        assert.deepEqual(await stubborn.exit, { kind: 'signaled', signal: 'SIGKILL' });
        const controller = new AbortController();
        const reason = new Error('enough');
        setTimeout(() => controller.abort(reason), 200);
        await assert.rejects(sandbox.run(sh('sleep 60'), { signal: controller.signal }), (error) => {
          assert.ok(error instanceof SandboxOperationError, String(error));
          assert.equal(error.code, 'cancelled');
          assert.equal(error.cause, reason);
          return true;
        });
        // The sandbox goes on.
        assert.equal((await sandbox.run(sh('echo still'))).stdout.toString(), 'still\n');
      });
    });

    test('run: input then EOF; past maxOutputBytes the command is ended with output_limit', async () => {
      await withStarted(backend, async (sandbox) => {
        const counted = await sandbox.run(sh('wc -c'), { input: 'twelve bytes' });
        assert.equal(counted.stdout.toString().trim(), '12');
        await assert.rejects(
          sandbox.run(sh('yes'), { maxOutputBytes: 100_000 }),
          (error) => error instanceof SandboxOperationError && error.code === 'output_limit' && /stdout/.test(error.message),
        );
      });
    });

    test('files: write whole with parents, read, stat, list, remove, mkdir on the workspace, HOME and TMPDIR', async () => {
      await withStarted(backend, async (sandbox) => {
        const { files } = sandbox;
        await files.write('deep/er/a.txt', 'hello');
        assert.equal((await files.read('deep/er/a.txt')).toString(), 'hello');
        assert.equal((await files.read('/sandbox/workspace/deep/er/a.txt')).toString(), 'hello');
        assert.equal(await files.read('nope.txt'), null);
        const seen = await sandbox.run(sh('cat deep/er/a.txt; stat -c %u deep/er/a.txt'));
        assert.equal(seen.stdout.toString(), `hello${(await sandbox.run(sh('id -u'))).stdout.toString()}`);
        const stat = await files.stat('deep/er/a.txt');
        assert.equal(stat.kind, 'file');
        assert.equal(stat.size, 5n);
        assert.equal(await files.stat('nope'), null);
        assert.deepEqual(await files.list('deep'), [{ name: 'er', kind: 'directory' }]);
        assert.equal(await files.list('nope'), null);
        await assert.rejects(files.read('deep/er/a.txt', { maxBytes: 4 }), (error) => error instanceof SandboxOperationError);
        await files.mkdir('/sandbox/home/made/here', { recursive: true });
        await files.write('/sandbox/tmp/t.bin', new Uint8Array([0, 1, 2, 255]), { mode: 0o600 });
        assert.deepEqual([...(await files.read('/sandbox/tmp/t.bin'))], [0, 1, 2, 255]);
        assert.equal((await files.stat('/sandbox/tmp/t.bin')).mode & 0o777, 0o600);
        const big = randomBytes(3 * MiB + 17);
        async function* chunks() {
          for (let at = 0; at < big.length; at += 100_000) yield big.subarray(at, at + 100_000);
        }
        await files.write('big.bin', chunks());
        const stream = await files.readStream('big.bin');
        assert.ok((await collect(stream)).equals(big));
        assert.equal(await files.readStream('nope'), null);
        assert.equal(await files.remove('deep', { recursive: true }), true);
        assert.equal(await files.remove('deep'), false);
        assert.equal((await sandbox.run(sh('ls /sandbox/home/made'))).stdout.toString(), 'here\n');
      });
    });

    test('no path, .., absolute path or symbolic link reaches outside the roots', async () => {
      await withStarted(backend, async (sandbox) => {
        const { files } = sandbox;
        await sandbox.run(sh('ln -s /etc out; ln -s /etc/passwd pw; mkdir d; ln -s .. d/up'));
        for (const path of ['../etc/passwd', '/etc/passwd', '/sandbox/workspace/../home/x', 'out/passwd', 'pw', 'd/up/pw', '/proc/1/environ', '/']) {
          await assert.rejects(files.read(path), (error) => issuePaths(error).includes('path'), path);
          await assert.rejects(files.write(path === 'pw' ? 'pw' : `${path}/x`, 'no'), (error) => error instanceof SandboxValidationError, path);
        }
        await assert.rejects(files.list('out'), (error) => issuePaths(error).includes('path'));
        await assert.rejects(files.remove('out/passwd'), (error) => issuePaths(error).includes('path'));
        // A link is itself removed, never its target.
        assert.equal(await files.remove('out'), true);
        assert.equal((await sandbox.run(sh('test -f /etc/passwd && echo kept'))).stdout.toString(), 'kept\n');
      });
    });

    test('stop ends every command and nothing is admitted after it; a reserved process runs beside commands', async () => {
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      try {
        const process = await sandbox.reserveProcess(sh('echo leader; sleep 60')).start();
        const leaderOut = collect(process.stdout);
        const beside = await sandbox.run(sh('echo beside'));
        assert.equal(beside.stdout.toString(), 'beside\n');
        const running = await Promise.all([1, 2, 3].map(() => sandbox.exec(sh('sleep 60 & sleep 60'))));
        await sandbox.stop();
        for (const command of running) assert.equal((await command.exit).kind, 'unavailable');
        assert.equal((await process.exit).kind, 'unavailable');
        assert.match((await leaderOut).toString(), /^leader\n/);
        await assert.rejects(sandbox.run(sh('true')), SandboxStateError);
        await assert.rejects(sandbox.files.read('x'), SandboxStateError);
      } finally {
        await sandbox.stop();
        await sandbox.destroy();
      }
    });

    test('commands first, then the reserved process as one of the supervisor\'s', async () => {
      await withStarted(backend, async (sandbox) => {
        await sandbox.files.write('in.txt', 'from files');
        const process = await sandbox.reserveProcess(sh('cat in.txt; exit 3')).start();
        process.stdin.end();
        assert.equal((await collect(process.stdout)).toString(), 'from files');
        assert.deepEqual(await process.exit, { kind: 'exited', code: 3 });
      });
    });

    // Under runc only: gVisor's kernel (the 2022 runsc here) lets a task of the same user open a
    // non-dumpable task's /proc/<pid>/fd, so there a command can reach the supervisor's
    // connection; a malformed frame then ends the session with stream_failure (see README's
    // limits). That gap stays open until the supervisor runs as a user of its own.
    const forgeTest = name === 'runc' ? test : () => {};
    forgeTest("the guest cannot forge frames or end the supervisor: frame-shaped bytes to every descriptor, signals to PID 1", async () => {
      await withStarted(backend, async (sandbox) => {
        const listener = await sandbox.exec(sh('echo first; sleep 2; echo second'));
        const heard = collect(listener.stdout);
        const forge = "for fd in /proc/self/fd/* /proc/1/fd/*; do printf '\\001\\000\\000\\000\\011\\000\\000\\000\\001\\000\\000\\000xxxxxxxxx' > $fd 2>/dev/null; done; kill -9 1 2>/dev/null; kill -TERM 1 2>/dev/null; echo done";
        const forged = await sandbox.run(sh(forge));
        assert.deepEqual(forged.exit, { kind: 'exited', code: 0 });
        assert.match(forged.stdout.toString(), /done\n$/);
        assert.equal((await heard).toString(), 'first\nsecond\n');
        assert.deepEqual(await listener.exit, { kind: 'exited', code: 0 });
        assert.equal((await sandbox.run(sh('echo next'))).stdout.toString(), 'next\n');
      });
    });
  });
}

describe('sessions: bad input is a typed error naming the field', () => {
  test('recipe, options and paths', async () => {
    await withStarted(runc, async (sandbox) => {
      const paths = async (promise) => {
        try {
          await promise;
        } catch (error) {
          return issuePaths(error);
        }
        assert.fail('rejected');
      };
      assert.deepEqual(await paths(sandbox.exec({ executable: 'sh', args: [], env: {}, cwd: '/' })), ['spec.executable']);
      assert.deepEqual(await paths(sandbox.run({ executable: '/bin/sh', args: [], env: { A: 1 }, cwd: '/' })), ['spec.env.A']);
      assert.deepEqual(await paths(sandbox.run(sh('true'), { deadlineMs: -1 })), ['options.deadlineMs']);
      assert.deepEqual(await paths(sandbox.exec(sh('true'), { timeout: 5 })), ['options.timeout']);
      assert.deepEqual(await paths(sandbox.exec(sh('true'), { signal: 'no' })), ['options.signal']);
      assert.deepEqual(await paths(sandbox.run(sh('true'), { input: 42 })), ['options.input']);
      assert.deepEqual(await paths(sandbox.files.read(42)), ['path']);
      assert.deepEqual(await paths(sandbox.files.read('a', { maxBytes: -1 })), ['options.maxBytes']);
      assert.deepEqual(await paths(sandbox.files.write('a', 42)), ['data']);
      assert.deepEqual(await paths(sandbox.files.mkdir('a', { recursive: 'yes' })), ['options.recursive']);
      assert.deepEqual(await paths(sandbox.exec({ executable: '/nope', args: [], env: {}, cwd: '/' })), ['spec.executable']);
      assert.deepEqual(await paths(sandbox.run({ executable: '/bin/true', args: [], env: {}, cwd: '/etc/passwd/x' })), ['spec.cwd']);
      assert.deepEqual(await paths(sandbox.files.read('a', { maxBytes: 2 ** 31 })), ['options.maxBytes']);
      assert.deepEqual(await paths(sandbox.files.stat('a/'.repeat(3000))), ['path']);
      const endless = async function* () {
        for (;;) yield new Uint8Array(1024);
      };
      assert.deepEqual(await paths(sandbox.files.write('../out', endless())), ['path']);
      // An endless source is not drained for ever once its write is aborted: it settles, and
      // nothing of it is put in place.
      const controller = new AbortController();
      const reason = new Error('enough of that');
      setTimeout(() => controller.abort(reason), 200);
      await assert.rejects(sandbox.files.write('endless.bin', endless(), { signal: controller.signal }), (error) => {
        assert.ok(error instanceof SandboxOperationError, String(error));
        assert.equal(error.code, 'cancelled');
        assert.equal(error.cause, reason);
        return true;
      });
      assert.equal(await sandbox.files.stat('endless.bin'), null);
    });
  });

  test('a JavaScript driver without sessions says so, and its members throw SandboxUnsupportedError', async () => {
    const backend = createSandboxBackend({
      support: SUPPORT,
      reserve(request) {
        return {
          id: 'plain-1',
          recoveryRecord: initialRecord('plain-1'),
          async start() {
            return {
              effective: { resources: request.policy.resources, temporaryStorage: request.policy.temporaryStorage, network: request.policy.network, workspaceDiskQuota: { kind: 'not_requested' } },
              workspace: '/tmp',
            };
          },
          async stop() {},
          async destroy() {},
        };
      },
      async reconcile() {
        return { kind: 'absent' };
      },
    });
    assert.equal(backend.support.sessions, false);
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    assert.throws(() => sandbox.exec(sh('true')), SandboxUnsupportedError);
    assert.throws(() => sandbox.run(sh('true')), SandboxUnsupportedError);
    assert.throws(() => sandbox.files.read('x'), SandboxUnsupportedError);
    await sandbox.stop();
    await sandbox.destroy();
    assert.throws(() => createSandboxBackend({ ...backend, support: { ...SUPPORT, sessions: true }, reserve() {}, async reconcile() {} }), SandboxValidationError);
  });
});

test('a sandbox reserved before its backend pinned the image runs commands and file calls', async () => {
  const fresh = dockerBackend(namespace);
  await withStarted(fresh, async (sandbox) => {
    await sandbox.files.write('x', 'y');
    assert.equal((await sandbox.run(sh('cat x'))).stdout.toString(), 'y');
  });
});

test('commands keep going over time without leaving zombies or descriptors in the guest', async () => {
  await withStarted(runc, async (sandbox) => {
    for (let i = 0; i < 200; i += 1) await sandbox.run({ executable: '/bin/true', args: [], env: {}, cwd: '/' });
    await sleep(100);
    const zombies = await sandbox.run(sh("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l"));
    assert.equal(zombies.stdout.toString().trim(), '0');
  });
});
