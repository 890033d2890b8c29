// The addon's async runtime and the environment: TOKIO_WORKER_THREADS sizes it when it holds a
// positive integer, and any other value is ignored (the addon must never abort its host process
// while it loads).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const driverModule = new URL('./scripted-driver.mjs', import.meta.url).href;
const workerModule = fileURLToPath(new URL('./runtime-env-worker.mjs', import.meta.url));

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

// How many workers a value gives is src/binding/runtime.rs's unit test; a huge count is capped
// (it aborted the host too, or started a storm of threads).
for (const workers of ['3', '1000000', '18446744073709551615']) {
  test(`TOKIO_WORKER_THREADS=${workers}: the addon loads and its work runs`, () => {
    const child = lifecycleWith(workers);
    assert.equal(child.signal, null, child.stderr);
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'ready');
  });
}

/**
 * A child whose addon is loaded only by worker threads, one after another: each worker's exit
 * ends the last environment holding the addon, so the next worker starts its runtime again.
 */
function workersOneAfterAnotherWith(workers, rounds) {
  return spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
      import { Worker } from 'node:worker_threads';
      for (let round = 0; round < ${rounds}; round += 1) {
        const worker = new Worker(${JSON.stringify(workerModule)}, { execArgv: [] });
        // Listened for from the start: a worker that posts and exits at once may deliver its
        // last message and its exit in one turn, before a listener added after the message.
        const exited = new Promise((resolve) => worker.once('exit', resolve));
        const kind = await new Promise((resolve, reject) => {
          worker.once('message', resolve);
          worker.once('error', reject);
        });
        await exited;
        console.log(round, kind);
      }
      `,
    ],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, TOKIO_WORKER_THREADS: workers },
    },
  );
}

for (const workers of ['abc', '3']) {
  test(`TOKIO_WORKER_THREADS=${JSON.stringify(workers)}: workers that load the addon one after another each run their work`, () => {
    const child = workersOneAfterAnotherWith(workers, 3);
    assert.equal(child.signal, null, child.stderr);
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(child.stdout.trim().split('\n'), ['0 ready', '1 ready', '2 ready']);
  });
}
