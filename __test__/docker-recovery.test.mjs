// Crash recovery against the real engine: a controller killed with SIGKILL while its process
// runs, a fresh controller that reconciles the persisted record and destroys, and records of
// other namespaces that are never touched.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { dockerBackend, leftovers, NOTHING, request, spawnController, uniqueNamespace } from './docker-helpers.mjs';

const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-recovery-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('a controller killed with SIGKILL mid-process: a fresh one reconciles the persisted record and destroys everything', async () => {
  const namespace = uniqueNamespace('crash');
  const recordFile = join(scratch, 'record.json');
  const child = spawnController(namespace, recordFile);
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => chunk.toString().includes('running') && resolve());
    child.on('exit', (code) => reject(new Error(`controller exited early with ${code}`)));
  });
  child.kill('SIGKILL');
  await new Promise((resolve) => child.on('exit', resolve));

  const before = leftovers(namespace);
  assert.equal(before.containers.length, 2, 'holder and process survive the controller');
  assert.equal(before.volumes.length, 1);

  const record = JSON.parse(readFileSync(recordFile, 'utf8'));
  assert.equal(record.phase, 'ready');
  assert.equal(record.resources.find((r) => r.role === 'compute').identity.kind, 'identified');
  const backend = dockerBackend(namespace);
  const result = await backend.reconcile(record);
  assert.equal(result.kind, 'matched');
  assert.deepEqual(Object.keys(result.owner).sort(), ['destroy', 'recoveryRecord', 'stop']);
  assert.equal(result.owner.recoveryRecord.sandboxId, record.sandboxId);
  await result.owner.stop();
  assert.equal(leftovers(namespace).volumes.length, 1, 'stop keeps storage');
  await result.owner.destroy();
  assert.deepEqual(leftovers(namespace), NOTHING);

  const again = await backend.reconcile(record);
  assert.equal(again.kind, 'absent');
  assert.equal(again.record.phase, 'destroyed');
});

for (const work of ['commands', 'both']) {
  test(`a controller killed with SIGKILL with commands running (${work === 'both' ? 'beside the process' : 'no process'}): reconcile destroys everything`, async () => {
    const namespace = uniqueNamespace('crash-commands');
    const recordFile = join(scratch, `record-${work}.json`);
    const child = spawnController(namespace, recordFile, {}, 64, { kind: 'isolated' }, work);
    await new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => chunk.toString().includes('running') && resolve());
      child.on('exit', (code) => reject(new Error(`controller exited early with ${code}`)));
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('exit', resolve));

    assert.equal(leftovers(namespace).containers.length, 2, 'holder and process container survive the controller');
    const record = JSON.parse(readFileSync(recordFile, 'utf8'));
    const result = await dockerBackend(namespace).reconcile(record);
    assert.equal(result.kind, 'matched');
    await result.owner.stop();
    await result.owner.destroy();
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
}

test('reconcile of a record from another namespace touches nothing', async () => {
  const mine = uniqueNamespace('mine');
  const theirs = uniqueNamespace('theirs');
  const owner = dockerBackend(theirs);
  const sandbox = await owner.reserve(request(), { kind: 'in_process' }).start();
  try {
    const before = leftovers(theirs);
    const result = await dockerBackend(mine).reconcile(sandbox.recoveryRecord);
    assert.equal(result.kind, 'conflict');
    assert.match(result.reason, /namespace/);
    assert.deepEqual(leftovers(theirs), before);
  } finally {
    await sandbox.destroy();
  }
  assert.deepEqual(leftovers(theirs), NOTHING);
});

test('a name and labels alone never adopt: an impostor with the recorded name and labels is left untouched', async () => {
  const namespace = uniqueNamespace('forge');
  const backend = dockerBackend(namespace);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  const record = sandbox.recoveryRecord;
  const holder = record.resources.find((r) => r.role === 'export');
  // Replace the holder by an impostor with the same name and labels but another incarnation.
  const labels = JSON.parse(execFileSync('docker', ['inspect', holder.name, '--format', '{{json .Config.Labels}}'], { encoding: 'utf8' }));
  execFileSync('docker', ['rm', '-f', holder.name], { stdio: 'ignore' });
  const impostor = execFileSync('docker', ['create', '--name', holder.name, ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]), 'native-sandbox/busybox:1', 'true'], { encoding: 'utf8' }).trim();
  try {
    const result = await backend.reconcile(record);
    assert.equal(result.kind, 'matched', 'the volume is still provably this record\'s');
    await result.owner.destroy();
    assert.deepEqual(leftovers(namespace).volumes, []);
    assert.deepEqual(leftovers(namespace).containers, [impostor.slice(0, 12)], 'only the impostor remains');
    await sandbox.destroy();
    assert.deepEqual(leftovers(namespace).containers, [impostor.slice(0, 12)], 'the live owner does not remove it either');
  } finally {
    execFileSync('docker', ['rm', '-f', impostor], { stdio: 'ignore' });
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});
