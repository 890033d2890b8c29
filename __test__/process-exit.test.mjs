// A Node process that uses the addon, with a sandbox still pending, must exit by itself: no
// threadsafe function, timer or native handle may keep its event loop alive.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const driverModule = new URL('./scripted-driver.mjs', import.meta.url).href;

function runChild(source) {
  const started = Date.now();
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { ...child, elapsed: Date.now() - started };
}

test('a child with a started, stopped and destroyed sandbox exits by itself', () => {
  const child = runChild(`
    import { createSandboxBackend } from 'native-sandbox/backend';
    import { withSandbox } from 'native-sandbox';
    import { scriptedDriver, policy } from ${JSON.stringify(driverModule)};
    const { driver } = scriptedDriver();
    const backend = createSandboxBackend(driver);
    const reservation = backend.reserve(policy(), { kind: 'in_process' });
    const sandbox = await reservation.start();
    await sandbox.stop();
    await sandbox.destroy();
    console.log(await withSandbox(backend, policy(), async (s) => s.state.kind, { recovery: { kind: 'in_process' } }));
  `);
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'ready');
  assert.ok(child.elapsed < 10_000, `exited after ${child.elapsed} ms`);
});

test('a child that destroys a pending (hung) startup exits by itself', () => {
  const child = runChild(`
    import { createSandboxBackend } from 'native-sandbox/backend';
    import { scriptedDriver, policy } from ${JSON.stringify(driverModule)};
    const { driver } = scriptedDriver({ start: ['hang'] });
    const backend = createSandboxBackend(driver);
    const reservation = backend.reserve(policy(), { kind: 'in_process' });
    const pending = reservation.start().catch((error) => error.name);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await reservation.destroy();
    console.log(reservation.state.kind, await pending);
  `);
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'destroyed SandboxStartError');
  assert.ok(child.elapsed < 10_000, `exited after ${child.elapsed} ms`);
});

test('a child that abandons a reserved, never-started sandbox exits by itself', () => {
  const child = runChild(`
    import { createSandboxBackend } from 'native-sandbox/backend';
    import { scriptedDriver, policy } from ${JSON.stringify(driverModule)};
    const backend = createSandboxBackend(scriptedDriver().driver);
    backend.reserve(policy(), { kind: 'in_process' });
    console.log('reserved');
  `);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'reserved');
});

test('a child with a running Docker process that it destroys exits by itself', () => {
  const helpers = new URL('./docker-helpers.mjs', import.meta.url).href;
  const child = runChild(`
    import { dockerBackend, request, uniqueNamespace, leftovers } from ${JSON.stringify(helpers)};
    const namespace = uniqueNamespace('exit');
    const backend = dockerBackend(namespace);
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace });
    const streams = await process.start();
    streams.stdout.resume();
    streams.stderr.resume();
    await sandbox.destroy();
    console.log(JSON.stringify(await streams.exit), JSON.stringify(leftovers(namespace)));
  `);
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), '{"kind":"unavailable","reason":"sandbox_stopped","cause":"stop"} {"containers":[],"volumes":[],"networks":[]}');
  assert.ok(child.elapsed < 15_000, `exited after ${child.elapsed} ms`);
});

test("past maxOutputBytes, a host reading both streams with 'data' listeners alone meets one uncaught output_limit, and exit names it", () => {
  const helpers = new URL('./docker-helpers.mjs', import.meta.url).href;
  const child = runChild(`
    import { dockerBackend, request, uniqueNamespace, leftovers } from ${JSON.stringify(helpers)};
    const uncaught = [];
    process.on('uncaughtException', (error) => uncaught.push(error.code));
    const namespace = uniqueNamespace('exit');
    const backend = dockerBackend(namespace);
    const sandbox = await backend.reserve(request((p) => (p.streams.maxOutputBytes = 3)), { kind: 'in_process' }).start();
    const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo out; echo err >&2; sleep 60'], env: {}, cwd: sandbox.workspace }).start();
    streams.stdout.on('data', () => {});
    streams.stderr.on('data', () => {});
    const fate = await streams.exit;
    await new Promise((resolve) => setTimeout(resolve, 200));
    await sandbox.destroy();
    console.log(JSON.stringify({ uncaught, fate }), JSON.stringify(leftovers(namespace)));
  `);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(
    child.stdout.trim(),
    '{"uncaught":["output_limit"],"fate":{"kind":"unavailable","reason":"sandbox_stopped","cause":"output_limit"}} {"containers":[],"volumes":[],"networks":[]}',
  );
});
