// The reaper: a controller that dies without destroying its in_process sandboxes (SIGINT with no
// handler, sent to its process group as a terminal's Ctrl-C is, or SIGKILL) leaves nothing on
// the engine within 10 s: with a process running, in the middle of an import, or idle. Two live
// controllers never reap each other's sandboxes, persisted sandboxes are never reaped, and
// `reaper: false` runs none. A slow engine is waited for as long as it answers; a hung one is left
// after 30 s, and what was left is written to the controller's stderr. A process that was itself
// started as a reaper (an application that ran instead of the reaper's script) starts none.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace, waitFor } from './docker-helpers.mjs';
import { startEngineFront } from './engine-front.mjs';

const helpers = new URL('./docker-helpers.mjs', import.meta.url).href;

/** What a child controller does once its sandboxes started, before it prints `ready`. */
const MODES = {
  process: `
    const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace });
    await process.start();
    report();`,
  import: `
    async function* files() {
      yield fileFromBytes('first', new Uint8Array(1024 * 1024));
      report();
      await new Promise(() => {});
    }
    void sandbox.importTree(files());`,
  idle: `report();`,
  // A full pool of three beside the sandbox: every member is the reaper's like any other.
  pool: `
    const { createSandboxPool } = await import('native-sandbox');
    const pool = createSandboxPool(backend, { request: request(), size: 3 });
    while (pool.ready < 3) await new Promise((resolve) => setTimeout(resolve, 50));
    report();`,
};
/** A controller that destroyed its sandbox before it died. */
const DESTROYED = `await sandbox.destroy(); report();`;

/**
 * A controller in a child process, in a process group of its own (as a terminal's foreground
 * job): `count` in_process sandboxes of `namespace` (and one persisted, with `persisted`), then
 * `mode`; it prints `ready <ids as JSON>` and waits to be ended.
 */
function controller(namespace, mode, { count = 1, persisted = false, backendOptions = {}, env = {} } = {}) {
  const source = `
    import { fileFromBytes } from 'native-sandbox';
    import { dockerBackend, request } from ${JSON.stringify(helpers)};
    const backend = dockerBackend(${JSON.stringify(namespace)}, ${JSON.stringify(backendOptions)});
    const ids = [];
    const report = () => console.log('ready ' + JSON.stringify(ids));
    for (let i = 0; i < ${count}; i++) {
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      ids.push(sandbox.id);
      if (i === ${count} - 1) {
        if (${persisted}) {
          const kept = await backend.reserve(request(), { kind: 'persisted', persist: async () => {} }).start();
          ids.push(kept.id);
        }
        ${MODES[mode] ?? DESTROYED}
      }
    }
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const ended = new Promise((resolve) => child.stderr.on('end', resolve));
  const ready = new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      const line = stdout.split('\n').find((l) => l.startsWith('ready '));
      if (line) resolve(JSON.parse(line.slice('ready '.length)));
    });
    child.once('exit', (code, signal) => reject(new Error(`controller ended early (${code ?? signal}): ${stderr}`)));
  });
  return {
    child,
    ready: within(ready, 60_000, 'the controller is ready'),
    stderr: () => stderr,
    // Bounded from when it is awaited (once the controller ended): the reaper holds the pipe
    // until it exits, after its removals (at most 30 s without an answer from the engine).
    get stderrEnded() {
      return within(ended, 60_000, "the controller's stderr (held by its reaper) ends");
    },
  };
}

/** `promise`, or a failure naming `what` after `ms` (no wait in these tests is unbounded). */
function within(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The pids of the reapers a controller's debug output says it started. */
const reaperPids = (stderr) => [...stderr.matchAll(/reaper started \(pid (\d+)\)/g)].map((m) => Number(m[1]));

/** Ends the controller: SIGINT to its whole process group (a terminal's Ctrl-C), or SIGKILL. */
async function end({ child }, signal) {
  const exited = within(once(child, 'exit'), 10_000, 'the controller exits');
  if (signal === 'SIGINT') process.kill(-child.pid, 'SIGINT');
  else child.kill('SIGKILL');
  const [code, received] = await exited;
  assert.equal(received, signal, `the controller ended by ${signal} (exit code ${code})`);
}

/** Polls the engine census of `namespace` until it is empty, at most `ms`; the last census. */
async function emptiedWithin(namespace, ms) {
  const deadline = Date.now() + ms;
  let census = leftovers(namespace);
  while (JSON.stringify(census) !== JSON.stringify(NOTHING) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    census = leftovers(namespace);
  }
  return census;
}

/** Removes by label what a test deliberately left (sandboxes nothing else may remove). */
function removeByLabel(namespace) {
  const { containers, volumes, networks } = leftovers(namespace);
  if (containers.length) execFileSync('docker', ['rm', '-f', ...containers]);
  if (volumes.length) execFileSync('docker', ['volume', 'rm', ...volumes]);
  if (networks.length) execFileSync('docker', ['network', 'rm', ...networks]);
}

for (const mode of Object.keys(MODES)) {
  for (const signal of ['SIGINT', 'SIGKILL']) {
    const doing = { process: 'with a process running', import: 'mid-import', idle: 'that never destroys', pool: 'with a full pool' }[mode];
    test(`a controller ended by ${signal} ${doing} leaves nothing within 10 s`, async () => {
      const namespace = uniqueNamespace(`reap-${mode}-${signal.toLowerCase()}`);
      const running = controller(namespace, mode);
      const ids = await running.ready;
      assert.equal(ids.length, 1);
      const before = leftovers(namespace);
      const sandboxes = mode === 'pool' ? 4 : 1;
      assert.ok(before.containers.length >= sandboxes && before.volumes.length === sandboxes, JSON.stringify(before));
      if (mode === 'process') {
        const processes = execFileSync('docker', ['ps', '-q', '--filter', `label=dev.native-sandbox.sandbox=${ids[0]}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
        assert.notEqual(processes, '', 'the process container runs');
      }
      await end(running, signal);
      const census = await emptiedWithin(namespace, 10_000);
      assert.deepEqual(census, NOTHING);
    });
  }
}

test('the reaper runs in a process group of its own, says what it removed under NODE_DEBUG, and exits once done', async () => {
  const namespace = uniqueNamespace('reap-debug');
  const running = controller(namespace, 'idle', { count: 2, env: { NODE_DEBUG: 'native-sandbox' } });
  const ids = await running.ready;
  const [reaper] = reaperPids(running.stderr());
  const group = (pid) => Number(execFileSync('ps', ['-o', 'pgid=', '-p', String(pid)], { encoding: 'utf8' }).trim());
  assert.equal(group(running.child.pid), running.child.pid, "the controller leads its own group (a terminal's job)");
  assert.equal(group(reaper), reaper, 'the reaper leads a group of its own: Ctrl-C to the job never reaches it');
  await end(running, 'SIGKILL');
  // The reaper shares the controller's stderr when debugging: it ends once the reaper exits.
  await running.stderrEnded;
  assert.deepEqual(leftovers(namespace), NOTHING);
  const lines = running.stderr().split('\n');
  assert.ok(lines.some((l) => /^NATIVE-SANDBOX \d+: reaper started \(pid \d+\)$/.test(l)), running.stderr());
  for (const id of ids) assert.ok(lines.some((l) => new RegExp(`^NATIVE-SANDBOX \\d+: reaper removed ${id} in \\d+ ms$`).test(l)), running.stderr());
});

test("two live controllers never reap each other's sandboxes", async () => {
  const namespace = uniqueNamespace('reap-two');
  const first = controller(namespace, 'process');
  const second = controller(namespace, 'process');
  const [firstIds, secondIds] = await Promise.all([first.ready, second.ready]);
  await end(first, 'SIGKILL');
  const ofFirst = () => execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${firstIds[0]}`], { encoding: 'utf8' }).trim();
  const deadline = Date.now() + 10_000;
  while (ofFirst() !== '' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(ofFirst(), '', "the first controller's sandbox was reaped");
  const running = execFileSync('docker', ['ps', '-q', '--filter', `label=dev.native-sandbox.sandbox=${secondIds[0]}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
  assert.notEqual(running, '', "the live controller's process still runs");
  assert.equal(leftovers(namespace).volumes.length, 1, "the live controller's workspace is there");
  await end(second, 'SIGKILL');
  assert.deepEqual(await emptiedWithin(namespace, 10_000), NOTHING);
});

test('a persisted sandbox is never reaped, even beside a reaped one', async () => {
  const namespace = uniqueNamespace('reap-persisted');
  const running = controller(namespace, 'idle', { persisted: true, env: { NODE_DEBUG: 'native-sandbox' } });
  try {
    const [reaped, kept] = await running.ready;
    await end(running, 'SIGKILL');
    await running.stderrEnded; // the reaper finished
    assert.match(running.stderr(), new RegExp(`reaper removed ${reaped} `));
    const left = (id) => execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${id}`], { encoding: 'utf8' }).trim();
    assert.equal(left(reaped), '');
    assert.notEqual(left(kept), '', 'the persisted sandbox is untouched');
    assert.equal(leftovers(namespace).volumes.length, 1);
  } finally {
    // What nothing else may remove goes whether or not the assertions held.
    if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
    removeByLabel(namespace);
  }
});

for (const [how, backendOptions, env] of [
  ['reaper: false', { reaper: false }, {}],
  ['NATIVE_SANDBOX_REAPER=0', {}, { NATIVE_SANDBOX_REAPER: '0' }],
]) {
  test(`${how} runs no reaper`, async () => {
    const namespace = uniqueNamespace('reap-off');
    const running = controller(namespace, 'idle', { backendOptions, env: { NODE_DEBUG: 'native-sandbox', ...env } });
    try {
      await running.ready;
      await end(running, 'SIGKILL');
      await running.stderrEnded; // no reaper holds it open
      assert.doesNotMatch(running.stderr(), /reaper/);
      assert.equal(leftovers(namespace).volumes.length, 1, 'nothing removed the sandbox');
    } finally {
      if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
      removeByLabel(namespace);
    }
  });
}

test('a sandbox destroyed by its controller is forgotten: the reaper has nothing to remove', async () => {
  const namespace = uniqueNamespace('reap-forgotten');
  const running = controller(namespace, 'destroyed', { env: { NODE_DEBUG: 'native-sandbox' } });
  await running.ready;
  assert.deepEqual(leftovers(namespace), NOTHING);
  await end(running, 'SIGKILL');
  await running.stderrEnded; // the reaper exited
  assert.match(running.stderr(), /reaper started/);
  assert.doesNotMatch(running.stderr(), /reaper (removed|gave up)/);
});

test('reaper must be a boolean', () => {
  assert.throws(() => dockerBackend(uniqueNamespace('reap-bad'), { reaper: 'yes' }), (error) => error.name === 'SandboxValidationError' && error.issues.some((issue) => issue.path.join('.') === 'reaper'));
});

test("the Ctrl-C recipe (a signal into withSandbox) destroys the sandbox before the controller exits (no reaper needed)", async () => {
  const namespace = uniqueNamespace('reap-recipe');
  const source = `
    import { withSandbox } from 'native-sandbox';
    import { dockerBackend, request } from ${JSON.stringify(helpers)};
    const backend = dockerBackend(${JSON.stringify(namespace)}, { reaper: false });
    const interrupted = new AbortController();
    process.once('SIGINT', () => interrupted.abort(new Error('interrupted')));
    try {
      await withSandbox(backend, request(), async (sandbox) => {
        const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace });
        const { exit } = await process.start();
        console.log('ready []');
        await exit;
      }, { recovery: { kind: 'in_process' }, signal: interrupted.signal });
    } catch (error) {
      console.log('ended ' + error.code);
    }
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  await waitFor(() => stdout.includes('ready'), 60_000, 'the recipe controller is ready');
  assert.equal(leftovers(namespace).volumes.length, 1);
  const exited = within(once(child, 'exit'), 30_000, 'the recipe controller exits');
  process.kill(-child.pid, 'SIGINT');
  const [code] = await exited;
  assert.equal(code, 0, 'the controller ended on its own after the abort');
  assert.match(stdout, /ended cancelled/);
  assert.deepEqual(leftovers(namespace), NOTHING, 'destroyed before the exit, with no reaper');
});

test('a reaper killed while its controller lives is replaced and told every sandbox again', async () => {
  const namespace = uniqueNamespace('reap-restart');
  const running = controller(namespace, 'process', { env: { NODE_DEBUG: 'native-sandbox' } });
  const [id] = await running.ready;
  const [first] = reaperPids(running.stderr());
  process.kill(first, 'SIGKILL');
  const second = await waitFor(() => reaperPids(running.stderr())[1], 10_000, 'a new reaper');
  assert.notEqual(second, first);
  // Told everything again (it said it runs, then got the engine and the sandbox's record).
  await waitFor(() => (running.stderr().match(/reaper ready \(told 2 lines\)/g) ?? []).length >= 2, 10_000, 'the new reaper told every sandbox');
  // The sandbox was left alone: the killed reaper was told nothing had ended.
  const running_ = execFileSync('docker', ['ps', '-q', '--filter', `label=dev.native-sandbox.sandbox=${id}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
  assert.notEqual(running_, '', 'the process still runs');
  await end(running, 'SIGKILL');
  assert.deepEqual(await emptiedWithin(namespace, 10_000), NOTHING, 'the new reaper removed it');
});

test('a slow engine is waited for past the 8 s the reaper once allowed: nothing is left', async () => {
  const namespace = uniqueNamespace('reap-slow');
  const front = await startEngineFront();
  const running = controller(namespace, 'process', { backendOptions: { engine: { socketPath: front.path } }, env: { NODE_DEBUG: 'native-sandbox' } });
  try {
    const [id] = await running.ready;
    // Each request of the reaper's (its own connections, made after this) reaches the engine
    // 2.5 s late: about 6 requests for the sandbox, 15 s in all, each answered well within 30 s.
    front.delay(2_500);
    const ended = Date.now();
    await end(running, 'SIGKILL');
    await running.stderrEnded; // the reaper exited
    const took = Date.now() - ended;
    assert.deepEqual(leftovers(namespace), NOTHING, running.stderr());
    assert.ok(took > 8_000, `the reaper took ${took} ms: the engine was not slow enough to test the bound`);
    assert.match(running.stderr(), new RegExp(`reaper removed ${id} in \\d+ ms`));
    assert.doesNotMatch(running.stderr(), /native-sandbox reaper: (left|stopped)/);
  } finally {
    if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
    front.close();
    removeByLabel(namespace);
  }
});

test("a hung engine is left after 30 s without an answer, and what was left is written to the controller's stderr", async () => {
  const namespace = uniqueNamespace('reap-hung');
  const front = await startEngineFront();
  // No NODE_DEBUG: the account of what was left is written whatever the debug setting.
  const running = controller(namespace, 'process', { backendOptions: { engine: { socketPath: front.path } } });
  try {
    const [id] = await running.ready;
    front.hang();
    const ended = Date.now();
    await end(running, 'SIGKILL');
    await running.stderrEnded; // the reaper exited
    const took = Date.now() - ended;
    assert.ok(took >= 30_000 && took < 60_000, `the reaper exited after ${took} ms`);
    const stderr = running.stderr();
    assert.match(stderr, /^native-sandbox reaper: stopped after 3\d\.\d s: engine \d+ answered none of its calls for 30 s$/m, stderr);
    const left = leftovers(namespace);
    assert.ok(left.containers.length >= 1 && left.volumes.length === 1, JSON.stringify(left));
    for (const [role, kind] of [['compute', 'container'], ['export', 'container'], ['storage', 'volume']]) {
      assert.match(stderr, new RegExp(`^native-sandbox reaper: left ${id} ${role} ${kind} \\S+ \\(`, 'm'), stderr);
    }
    // Every container left is named by its engine ID (a prefix of it is what the CLI lists).
    for (const container of left.containers) assert.match(stderr, new RegExp(`container ${container}`), stderr);
  } finally {
    if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
    front.close();
    removeByLabel(namespace);
  }
});

test('a process started as a reaper starts none: its in_process starts fail with SandboxUnsupportedError, its persisted ones run', () => {
  const namespace = uniqueNamespace('reap-marked');
  const source = `
    import { dockerBackend, request } from ${JSON.stringify(helpers)};
    const backend = dockerBackend(${JSON.stringify(namespace)});
    const seen = [];
    for (let i = 0; i < 2; i++) {
      const reservation = backend.reserve(request(), { kind: 'in_process' });
      const error = await reservation.start().then(() => undefined, (e) => e);
      seen.push({ name: error?.name, cause: error?.cause?.name, message: error?.cause?.message });
      await reservation.destroy();
    }
    const kept = await backend.reserve(request(), { kind: 'persisted', persist: async () => {} }).start();
    await kept.destroy();
    console.log(JSON.stringify(seen));
  `;
  const ran = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NATIVE_SANDBOX_REAPER_PROCESS: '1', NODE_DEBUG: 'native-sandbox' },
  });
  try {
    assert.equal(ran.status, 0, ran.stderr);
    const seen = JSON.parse(ran.stdout.trim().split('\n').at(-1));
    assert.equal(seen.length, 2);
    for (const { name, cause, message } of seen) {
      assert.equal(name, 'SandboxStartError');
      assert.equal(cause, 'SandboxUnsupportedError');
      assert.match(message, /started as another process's reaper/);
      assert.match(message, /recovery \{ kind: 'persisted' \}/);
      assert.match(message, /reaper: false/);
    }
    assert.doesNotMatch(ran.stderr, /reaper started/, 'nothing was spawned');
    assert.deepEqual(leftovers(namespace), NOTHING);
  } finally {
    removeByLabel(namespace);
  }
});
