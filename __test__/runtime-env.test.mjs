// The addon's async runtime and the environment: TOKIO_WORKER_THREADS sizes it when it holds a
// positive integer, and any other value is ignored (the addon must never abort its host process
// while it loads).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const driverModule = new URL('./scripted-driver.mjs', import.meta.url).href;

/** A child that loads the addon and runs a whole lifecycle on its runtime, with `workers` set. */
function lifecycleWith(workers) {
  return spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
      import { createSandboxBackend } from 'native-sandbox/backend';
      import { withSandbox } from 'native-sandbox';
      import { scriptedDriver, policy } from ${JSON.stringify(driverModule)};
      const backend = createSandboxBackend(scriptedDriver().driver);
      console.log(await withSandbox(backend, policy(), async (s) => s.state.kind, { recovery: { kind: 'in_process' } }));
      `,
    ],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, TOKIO_WORKER_THREADS: workers },
    },
  );
}

for (const workers of ['abc', '0', '-1', '', '2.5']) {
  test(`TOKIO_WORKER_THREADS=${JSON.stringify(workers)} is ignored: the addon loads and its work runs`, () => {
    const child = lifecycleWith(workers);
    assert.equal(child.signal, null, child.stderr);
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'ready');
  });
}

// How many workers a value gives is src/binding/runtime.rs's unit test.
test('TOKIO_WORKER_THREADS=3: the addon loads and its work runs', () => {
  const child = lifecycleWith('3');
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'ready');
});
