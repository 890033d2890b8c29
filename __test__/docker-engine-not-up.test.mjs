// A service constructed before Docker is up: creating the backend never throws for an engine whose
// socket does not exist yet; a start then fails naming the engine's address, and once the engine
// answers there, the next start works (the image reference is resolved again).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { SandboxStartError } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { IMAGE, leftovers, NOTHING, request, runShell, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { engineSocket } from './tls-front-control.mjs';

const namespace = uniqueNamespace('not-up');
const directory = mkdtempSync(join(tmpdir(), 'native-sandbox-not-up-'));
after(() => {
  rmSync(directory, { recursive: true, force: true });
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('an engine not up yet fails the start, naming its address, never the creation; once it is up, the next start works', async () => {
  const socketPath = join(directory, 'docker.sock');
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), engine: { socketPath } });
  const failed = await backend.reserve(request(), { kind: 'in_process' }).start().catch((e) => e);
  assert.ok(failed instanceof SandboxStartError, String(failed));
  assert.match(failed.cause?.message ?? '', new RegExp(`cannot reach the Docker engine \\(engine\\.socketPath ${socketPath}\\): `));
  await failed.owner.destroy();
  // The engine comes up at that address.
  symlinkSync(engineSocket, socketPath);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const ran = await runShell(sandbox, 'echo up');
    assert.equal(ran.stdout, 'up\n');
  } finally {
    await sandbox.destroy();
  }
});

test('an engine that comes up before the first start: that start works (a resolution that failed unobserved is asked again)', async () => {
  const socketPath = join(directory, 'later.sock');
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), engine: { socketPath } });
  // The background resolution meets no engine and fails, unobserved.
  await new Promise((resolve) => setTimeout(resolve, 500));
  symlinkSync(engineSocket, socketPath);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    assert.equal((await runShell(sandbox, 'echo up')).stdout, 'up\n');
  } finally {
    await sandbox.destroy();
  }
});
