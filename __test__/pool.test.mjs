// Warm pools (createSandboxPool): members reserved and started with their supervisor up, claimed
// once each (no state of one claim reaches another), read back at the claim (a member that no
// longer applies what it started with is never handed out), cold claims when none is ready,
// refills at most four at once, idle members replaced, close and the pool's signal destroying
// every unclaimed member; bad input refused before any engine object.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { createSandboxPool, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace, waitFor } from './docker-helpers.mjs';
import { localProcessBackend } from './fixtures/local-process-backend.mjs';

const sh = (script) => ({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: '/sandbox/workspace' });
const namespaces = [];
const backendOf = (label, extra) => {
  const namespace = uniqueNamespace(`pool-${label}`);
  namespaces.push(namespace);
  return { namespace, backend: dockerBackend(namespace, extra) };
};

after(() => {
  for (const namespace of namespaces) assert.deepEqual(leftovers(namespace), NOTHING, `the pool suite leaves nothing behind (${namespace})`);
});

/** The sandbox IDs with a running container in `namespace`. */
function runningSandboxes(namespace) {
  const out = execFileSync('docker', ['ps', '--filter', `label=dev.native-sandbox.namespace=${namespace}`, '--format', '{{.Label "dev.native-sandbox.sandbox"}}'], { encoding: 'utf8' });
  return [...new Set(out.split('\n').filter(Boolean))].sort();
}

function computeOf(sandbox) {
  const filters = ['--filter', `label=dev.native-sandbox.sandbox=${sandbox.id}`, '--filter', 'label=dev.native-sandbox.role=compute'];
  return execFileSync('docker', ['ps', '-q', '--no-trunc', ...filters], { encoding: 'utf8' }).trim();
}

/** The real `backend`, each reservation's start made by `start(reservation, options)`. */
function withStarts(backend, start) {
  return {
    support: backend.support,
    reconcile: (...args) => backend.reconcile(...args),
    reserve(req, recovery) {
      const reservation = backend.reserve(req, recovery);
      return {
        ...reservation,
        start: (options) => start(reservation, options),
        stop: () => reservation.stop(),
        destroy: () => reservation.destroy(),
      };
    },
  };
}

async function finish(sandbox) {
  await sandbox.stop();
  await sandbox.destroy();
}

describe('createSandboxPool: bad input, before any engine object', () => {
  const { namespace, backend } = backendOf('input');
  const paths = (fn) => {
    try {
      fn();
    } catch (error) {
      assert.ok(error instanceof SandboxValidationError, `a validation error, not ${error}`);
      return error.issues.map((issue) => issue.path.join('.'));
    }
    assert.fail('no error');
  };

  test('each bad option is named', () => {
    for (const size of [0, 65, 1.5, '4', undefined]) assert.deepEqual(paths(() => createSandboxPool(backend, { request: request(), size })), ['options.size'], `size ${size}`);
    assert.deepEqual(paths(() => createSandboxPool(backend, { request: request(), size: 1, idleMs: -1 })), ['options.idleMs']);
    assert.deepEqual(paths(() => createSandboxPool(backend, { request: request(), size: 1, signal: {} })), ['options.signal']);
    assert.deepEqual(paths(() => createSandboxPool(backend, { request: request(), size: 1, warm: true })), ['options.warm']);
    assert.deepEqual(paths(() => createSandboxPool(backend, { size: 1 })), ['options.request']);
    assert.deepEqual(paths(() => createSandboxPool(backend, null)), ['options']);
    assert.deepEqual(paths(() => createSandboxPool({}, { request: request(), size: 1 })), ['backend']);
    const badRequest = paths(() => createSandboxPool(backend, { request: request((p) => (p.resources.cpus = -1)), size: 1 }));
    assert.deepEqual(badRequest, ['options.request.policy.resources.cpus']);
  });

  test('a request the backend cannot honour is unsupported at creation', () => {
    const quota = request((p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 1024 ** 3, accounting: 'allocated_blocks' }));
    assert.throws(() => createSandboxPool(backend, { request: quota, size: 1 }), SandboxUnsupportedError);
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('claim options are read strictly', async () => {
    const pool = createSandboxPool(backend, { request: request(), size: 1 });
    try {
      await assert.rejects(pool.claim({ later: true }), (error) => error instanceof SandboxValidationError && error.issues[0].path.join('.') === 'options.later');
      await assert.rejects(pool.claim({ signal: 'no' }), SandboxValidationError);
    } finally {
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

describe('createSandboxPool (runc)', () => {
  test('claims are started, warm and used once: no file or process of one claim reaches the next', async () => {
    const { namespace, backend } = backendOf('once');
    const pool = createSandboxPool(backend, { request: request(), size: 2 });
    try {
      await waitFor(() => pool.ready === 2, 60_000, 'the pool is full');
      // Warm: every member's process container (its supervisor) runs before any claim.
      assert.equal(runningSandboxes(namespace).length, 2);
      const first = await pool.claim();
      assert.equal(first.state.kind, 'ready');
      assert.ok(computeOf(first), 'the claimed member already runs its supervisor');
      await first.files.write('secret.txt', Buffer.from('mine'));
      const background = await first.exec(sh('sleep 600 & echo started'), { stdin: false });
      assert.deepEqual(await background.exit, { kind: 'exited', code: 0 });
      const second = await pool.claim();
      assert.notEqual(second.id, first.id);
      assert.equal(await second.files.read('secret.txt'), null, "the first claim's file is not in the second");
      const ps = await second.run(sh('ps -o args | grep -c "[s]leep 600" || true'));
      assert.equal(ps.stdout.toString().trim(), '0', "the first claim's process is not in the second");
      const hello = await second.run(sh('echo hello'));
      assert.equal(hello.stdout.toString(), 'hello\n');
      await finish(first);
      await finish(second);
      // The pool refills to its size; claimed members never come back.
      await waitFor(() => pool.ready === 2, 60_000, 'the pool refills');
      const members = runningSandboxes(namespace);
      assert.ok(!members.includes(first.id) && !members.includes(second.id), 'claimed members never return');
    } finally {
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING, 'close destroys every unclaimed member');
    await assert.rejects(pool.claim(), SandboxStateError);
  });

  test('with none ready a claim starts one at once (cold), and refills run at most four at once', async () => {
    const { namespace, backend } = backendOf('cold');
    let starting = 0;
    let most = 0;
    // The real backend, its starts counted: what the pool starts for refills and cold claims.
    const counted = withStarts(backend, async (reservation, options) => {
      starting += 1;
      most = Math.max(most, starting);
      try {
        return await reservation.start(options);
      } finally {
        starting -= 1;
      }
    });
    const pool = createSandboxPool(counted, { request: request(), size: 8 });
    const claimed = [];
    try {
      assert.equal(pool.ready, 0);
      // Nothing is ready yet: both claims are cold, started beside the refills.
      claimed.push(...(await Promise.all([pool.claim(), pool.claim()])));
      for (const sandbox of claimed) assert.equal((await sandbox.run(sh('echo cold'))).stdout.toString(), 'cold\n');
      await waitFor(() => pool.ready === 8, 120_000, 'the pool fills');
      assert.ok(most <= 4 + 2, `at most four refills (and the two cold claims) at once, saw ${most}`);
      assert.ok(most >= 2, `starts ran side by side (${most})`);
    } finally {
      await Promise.all(claimed.map(finish));
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('a member that no longer applies what it started with, or whose container stopped, is never handed out', async () => {
    const { namespace, backend } = backendOf('readback');
    const pool = createSandboxPool(backend, { request: request(), size: 1 });
    const computeOfId = (id) => execFileSync('docker', ['ps', '-q', '--filter', `label=dev.native-sandbox.sandbox=${id}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
    try {
      const inspect = (container, format) => execFileSync('docker', ['inspect', '-f', format, container], { encoding: 'utf8' }).trim();
      // Each alteration, then its sight in the engine's own reading (the engine answers a kill
      // before the container stopped).
      for (const [what, alter, seen] of [
        ['another memory limit', (c) => execFileSync('docker', ['update', '--memory', '256m', '--memory-swap', '256m', c]), (c) => inspect(c, '{{.HostConfig.Memory}}') === String(256 * 1024 * 1024)],
        ['its process container killed', (c) => execFileSync('docker', ['kill', c]), (c) => inspect(c, '{{.State.Running}}') === 'false'],
      ]) {
        await waitFor(() => pool.ready === 1, 60_000, 'the pool is full');
        const running = runningSandboxes(namespace);
        assert.equal(running.length, 1, `one member runs: ${running}`);
        const [member] = running;
        const container = computeOfId(member);
        alter(container);
        await waitFor(() => seen(container), 10_000, `the engine reads ${what}`);
        const claimed = await pool.claim();
        try {
          assert.notEqual(claimed.id, member, `the member with ${what} was not handed out`);
          assert.equal((await claimed.run(sh('echo fresh'))).stdout.toString(), 'fresh\n');
        } finally {
          await finish(claimed);
        }
        // The altered member is destroyed, not kept.
        const objectsOf = (id) => execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${id}`], { encoding: 'utf8' }).trim();
        await waitFor(() => objectsOf(member) === '', 60_000, `the member with ${what} is destroyed`);
      }
    } finally {
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('refills that fail partway fail no claim with a member ready, are tried again, and leave nothing', async () => {
    const { namespace, backend } = backendOf('faults');
    let starts = 0;
    // The real backend, but once the pool is full every start is cut off 20 ms in (partway: the
    // engine objects it made by then are the owner's to remove) until three have failed.
    let failing = false;
    let failed = 0;
    const faulty = withStarts(backend, (reservation, options) => {
      starts += 1;
      if (!failing) return reservation.start(options);
      const cut = new AbortController();
      options?.signal?.addEventListener('abort', () => cut.abort(options.signal.reason), { once: true });
      setTimeout(() => cut.abort(new Error('the engine failed partway (test)')), 20);
      return reservation.start({ signal: cut.signal }).catch((error) => {
        failed += 1;
        if (failed >= 3) failing = false;
        throw error;
      });
    });
    const pool = createSandboxPool(faulty, { request: request(), size: 2 });
    const claimed = [];
    try {
      await waitFor(() => pool.ready === 2, 60_000, 'the pool is full');
      failing = true;
      // Both members are claimed while the refills behind them fail: neither claim fails.
      claimed.push(await pool.claim(), await pool.claim());
      for (const [i, sandbox] of claimed.entries()) assert.equal((await sandbox.run(sh(`echo claim-${i}`))).stdout.toString(), `claim-${i}\n`);
      await waitFor(() => failed >= 3, 60_000, 'three refills failed');
      // After the failures (and the pauses after them), the pool fills again.
      await waitFor(() => pool.ready === 2, 60_000, 'the pool refills after the failures');
      assert.ok(starts >= 2 + 3 + 2, `the pool tried again after each failure (${starts} starts)`);
    } finally {
      await Promise.all(claimed.map(finish));
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING, 'every refill cut off partway was cleaned up');
  });

  test('an idle member is replaced, and the signal closes the pool', async () => {
    const { namespace, backend } = backendOf('idle');
    const controller = new AbortController();
    const pool = createSandboxPool(backend, { request: request(), size: 1, idleMs: 500, signal: controller.signal });
    await waitFor(() => pool.ready === 1, 60_000, 'the pool is full');
    const firstMember = runningSandboxes(namespace);
    await waitFor(() => pool.ready === 1 && JSON.stringify(runningSandboxes(namespace)) !== JSON.stringify(firstMember) && runningSandboxes(namespace).length === 1, 60_000, 'the idle member is replaced');
    controller.abort();
    await pool.close();
    assert.equal(pool.ready, 0);
    assert.deepEqual(leftovers(namespace), NOTHING);
    await assert.rejects(pool.claim(), SandboxStateError);
  });

  test('a claim aborted by its signal rejects with the reason and leaves the member to the pool', async () => {
    const { namespace, backend } = backendOf('abort');
    const pool = createSandboxPool(backend, { request: request(), size: 1 });
    try {
      await waitFor(() => pool.ready === 1, 60_000, 'the pool is full');
      const reason = new Error('changed my mind');
      await assert.rejects(pool.claim({ signal: AbortSignal.abort(reason) }), (error) => error === reason);
      assert.equal(pool.ready, 1);
      // Aborted while its member is read back (the claim's first step runs at once): the claim
      // rejects with the reason all the same, and the member goes back to the pool.
      const controller = new AbortController();
      const claiming = pool.claim({ signal: controller.signal });
      controller.abort(reason);
      await assert.rejects(claiming, (error) => error === reason);
      assert.equal(pool.ready, 1);
      const sandbox = await pool.claim();
      assert.equal((await sandbox.run(sh('echo after'))).stdout.toString(), 'after\n');
      await finish(sandbox);
    } finally {
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

describe('createSandboxPool (runsc)', () => {
  test('a claimed member runs its first command', async () => {
    const { namespace, backend } = backendOf('runsc', { runtime: 'runsc' });
    const pool = createSandboxPool(backend, { request: request(), size: 1 });
    try {
      await waitFor(() => pool.ready === 1, 60_000, 'the pool is full');
      const sandbox = await pool.claim();
      try {
        assert.equal((await sandbox.run(sh('echo under gvisor'))).stdout.toString(), 'under gvisor\n');
      } finally {
        await finish(sandbox);
      }
    } finally {
      await pool.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

describe('createSandboxPool (a JavaScript driver)', () => {
  test('members are started sandboxes of the driver, claimed once, and close destroys the rest', async () => {
    const local = localProcessBackend();
    try {
      const pool = createSandboxPool(local.backend, { request: request((p) => (p.network = { kind: 'outbound' })), size: 2 });
      await waitFor(() => pool.ready === 2, 10_000, 'the pool is full');
      assert.equal(local.census().length, 2);
      const sandbox = await pool.claim();
      assert.equal(sandbox.state.kind, 'ready');
      assert.throws(() => sandbox.files.stat('.'), SandboxUnsupportedError, 'a driver without sessions says so');
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo from the driver'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      streams.stdin.end();
      let out = '';
      for await (const chunk of streams.stdout) out += chunk;
      assert.equal(out, 'from the driver\n');
      await sandbox.stop();
      await sandbox.destroy();
      await waitFor(() => pool.ready === 2, 10_000, 'the pool refills');
      await pool.close();
      assert.deepEqual(local.census(), [], 'close destroyed every unclaimed member');
    } finally {
      local.close();
    }
  });
});
