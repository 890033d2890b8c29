// A process stream the caller destroys never wedges the process, on the Docker backend and on a
// JavaScript driver alike: a destroyed stdout or stderr discards what the guest still writes
// there (the guest never blocks on it; the other stream and `exit` go on), whether the caller
// called destroy(), broke out of `for await`, or `pipeline()` destroyed it after its sink failed;
// and `stdin.destroy()` ends the guest's stdin (EOF).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { collect, dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';
import { localProcessBackend } from './fixtures/local-process-backend.mjs';

const namespace = uniqueNamespace('stream-destroy');
const local = localProcessBackend();
after(async () => {
  await local.close();
  assert.deepEqual(leftovers(namespace), NOTHING);
});

const BACKENDS = [
  ['the Docker backend', () => dockerBackend(namespace), request()],
  ['a JavaScript driver', () => local.backend, request((policy) => (policy.network = { kind: 'outbound' }))],
];

/** `promise`, or a failure naming `what` if it has not settled within `ms` (a hang, not a speed goal). */
function within(promise, what, ms = 30_000) {
  let timer;
  const bound = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)));
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** Starts `script` in a fresh sandbox of `backend`, hands its streams to `use`, then destroys it. */
async function withProcess(makeBackend, policy, script, use) {
  const sandbox = await makeBackend().reserve(policy, { kind: 'in_process' }).start();
  try {
    const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: sandbox.workspace });
    return await use(await process.start());
  } finally {
    await sandbox.destroy();
  }
}

/** Fifty MB on stdout (fifty times the staging), then a line on stderr. */
const FLOOD_STDOUT = 'head -c 50000000 /dev/zero; echo done >&2';

for (const [label, makeBackend, policy] of BACKENDS) {
  test(`${label}: stdout destroyed mid-flow; the guest writes on, stderr and exit arrive`, async () => {
    await withProcess(makeBackend, policy, FLOOD_STDOUT, async ({ stdin, stdout, stderr, exit }) => {
      stdin.end();
      const err = collect(stderr);
      const first = await new Promise((resolve) => stdout.once('data', resolve));
      assert.ok(first.length > 0);
      stdout.destroy();
      assert.deepEqual(await within(exit, 'exit'), { kind: 'exited', code: 0 });
      assert.equal((await within(err, 'stderr')).toString(), 'done\n');
    });
  });

  test(`${label}: a break out of for await over stdout; the process still exits`, async () => {
    await withProcess(makeBackend, policy, FLOOD_STDOUT, async ({ stdin, stdout, stderr, exit }) => {
      stdin.end();
      const err = collect(stderr);
      let seen = 0;
      for await (const chunk of stdout) {
        seen += chunk.length;
        break;
      }
      assert.ok(seen > 0 && stdout.destroyed);
      assert.deepEqual(await within(exit, 'exit'), { kind: 'exited', code: 0 });
      assert.equal((await within(err, 'stderr')).toString(), 'done\n');
    });
  });

  test(`${label}: pipeline() into a sink that fails destroys stdout; the process still exits`, async () => {
    await withProcess(makeBackend, policy, FLOOD_STDOUT, async ({ stdin, stdout, stderr, exit }) => {
      stdin.end();
      const err = collect(stderr);
      const sink = new Writable({ write: (_chunk, _encoding, callback) => callback(new Error('the sink is full')) });
      await assert.rejects(within(pipeline(stdout, sink), 'pipeline'), /the sink is full/);
      assert.deepEqual(await within(exit, 'exit'), { kind: 'exited', code: 0 });
      assert.equal((await within(err, 'stderr')).toString(), 'done\n');
    });
  });

  test(`${label}: stderr destroyed while the guest floods it; stdout arrives whole`, async () => {
    await withProcess(makeBackend, policy, 'head -c 50000000 /dev/zero >&2; echo done', async ({ stdin, stdout, stderr, exit }) => {
      stdin.end();
      const out = collect(stdout);
      stderr.destroy();
      assert.deepEqual(await within(exit, 'exit'), { kind: 'exited', code: 0 });
      assert.equal((await within(out, 'stdout')).toString(), 'done\n');
    });
  });

  test(`${label}: stdin.destroy() ends the guest's stdin`, async () => {
    await withProcess(makeBackend, policy, 'cat > /dev/null; echo eof', async ({ stdin, stdout, stderr, exit }) => {
      const out = collect(stdout);
      const err = collect(stderr);
      await new Promise((resolve, reject) => stdin.write('some input\n', (error) => (error ? reject(error) : resolve())));
      stdin.destroy();
      assert.deepEqual(await within(exit, 'exit'), { kind: 'exited', code: 0 });
      assert.equal((await within(out, 'stdout')).toString(), 'eof\n');
      assert.equal((await err).toString(), '');
    });
  });
}
