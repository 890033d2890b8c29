// The Docker backend on gVisor (`runtime: 'runsc'`, registered with the engine by
// scripts/ensure-runsc.sh): the guest runs on gVisor's kernel with every guarantee the default
// runtime gives (hardening, limits, the out-of-memory exit, crash recovery, no leftovers). The
// contract as a whole runs in conformance-runsc.test.mjs.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { SandboxValidationError } from 'native-sandbox';
import { dockerSandboxRuntime } from 'native-sandbox/docker';
import { dockerBackend, leftovers, MiB, NOTHING, request, runOnce, runShell, spawnController, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('runsc');
const roomy = (p) => (p.resources.pids = 64);
const gvisorRequest = () => request(roomy);
const gvisor = dockerBackend(namespace, { runtime: 'runsc' });
const runc = dockerBackend(namespace);
const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-runsc-'));

after(() => {
  rmSync(scratch, { recursive: true, force: true });
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('the runtime the engine applied is read back: runsc here, the default elsewhere', async () => {
  const sandbox = await gvisor.reserve(gvisorRequest(), { kind: 'in_process' }).start();
  try {
    assert.equal(dockerSandboxRuntime(sandbox), 'runsc');
  } finally {
    await sandbox.destroy();
  }
  const plainNamespace = uniqueNamespace('runc');
  const plain = await dockerBackend(plainNamespace).reserve(request(), { kind: 'in_process' }).start();
  try {
    assert.notEqual(dockerSandboxRuntime(plain), 'runsc');
  } finally {
    await plain.destroy();
  }
  assert.deepEqual(leftovers(plainNamespace), NOTHING);
  assert.throws(() => dockerSandboxRuntime({}), SandboxValidationError);
});

test("the guest runs on gVisor's kernel, not the host's", async () => {
  const result = await runOnce(gvisor, 'uname -r; dmesg | head -1', { edit: roomy });
  const [kernel, boot] = result.stdout.trim().split('\n');
  assert.notEqual(kernel, release(), 'the guest does not see the host kernel');
  assert.match(boot, /gVisor/);
});

test('hardening holds under gVisor: non-root, no capabilities, read-only root, writable layout', async () => {
  const result = await runOnce(
    gvisor,
    'id -u; id -g; grep CapEff /proc/self/status; touch /x 2>/dev/null && echo writable-root || echo read-only-root; touch "$HOME/ok" && touch "$TMPDIR/ok" && touch /sandbox/workspace/ok && echo writable-layout',
    { edit: roomy },
  );
  assert.deepEqual(result.stdout.trim().split('\n'), ['65532', '65532', 'CapEff:\t0000000000000000', 'read-only-root', 'writable-layout']);
  assert.deepEqual({ ...result.exit }, { kind: 'exited', code: 0 });
});

test('an allocation past the memory limit under gVisor exits as out_of_memory', async () => {
  const result = await runOnce(gvisor, 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived', {
    edit: (p) => {
      roomy(p);
      p.resources.memoryBytes = 32 * MiB;
    },
  });
  assert.deepEqual({ ...result.exit }, { kind: 'signaled', signal: 'SIGKILL', reason: 'out_of_memory' });
  assert.doesNotMatch(result.stdout, /survived/);
});

// The engine's state says `OOMKilled` only when the runtime's OOM event reaches it before the exit
// event; under gVisor on a busy machine some arrive the other way round (about one in fifteen
// when six ran at once here), and the exit must still say out_of_memory. Whether a late event is
// found is src/docker/oom_events.rs's unit test; this shows it end to end when one comes.
test('memory kills of eight sandboxes at once under gVisor all exit as out_of_memory', async () => {
  const results = await Promise.all(
    Array.from({ length: 8 }, () =>
      runOnce(gvisor, 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived', {
        edit: (p) => {
          roomy(p);
          p.resources.memoryBytes = 32 * MiB;
        },
      }),
    ),
  );
  for (const result of results) {
    assert.deepEqual({ ...result.exit }, { kind: 'signaled', signal: 'SIGKILL', reason: 'out_of_memory' });
    assert.doesNotMatch(result.stdout, /survived/);
  }
});

test('a guest writing into its workspace under gVisor: the files come back exactly', async () => {
  const sandbox = await gvisor.reserve(gvisorRequest(), { kind: 'in_process' }).start();
  try {
    const made = await runShell(sandbox, 'mkdir -p out && i=0; while [ $i -lt 50 ]; do echo "line $i" > out/f$i; i=$((i+1)); done; echo ok');
    assert.equal(made.stdout.trim(), 'ok', made.stderr);
    await sandbox.stop();
    const seen = new Map();
    await sandbox.exportTree({ kind: 'files', paths: ['out/f0', 'out/f49'] }, async (entry) => {
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(chunk);
      seen.set(entry.path, Buffer.concat(chunks).toString());
    });
    assert.deepEqual([...seen], [['out/f0', 'line 0\n'], ['out/f49', 'line 49\n']]);
  } finally {
    await sandbox.destroy();
  }
});

test('a controller killed with SIGKILL under gVisor: a fresh one reconciles and destroys everything', async () => {
  const crashed = uniqueNamespace('runsc-crash');
  const recordFile = join(scratch, 'record.json');
  const child = spawnController(crashed, recordFile, { runtime: 'runsc' }, 256);
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => chunk.toString().includes('running') && resolve());
    child.on('exit', (code) => reject(new Error(`controller exited early with ${code}`)));
  });
  child.kill('SIGKILL');
  await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(leftovers(crashed).containers.length, 2, 'holder and process survive the controller');
  const record = JSON.parse(readFileSync(recordFile, 'utf8'));
  const result = await dockerBackend(crashed, { runtime: 'runsc' }).reconcile(record);
  assert.equal(result.kind, 'matched');
  await result.owner.destroy();
  assert.deepEqual(leftovers(crashed), NOTHING);
});

test('pids means the guest\'s tasks on both runtimes: the same recipe forks up to the limit and fails one past it', async () => {
  const pids = 16;
  // The init and the shell are two of the guest's tasks: pids - 2 background children fit.
  const forks = (count) => `i=0; while [ $i -lt ${count} ]; do sleep 30 & i=$((i+1)); done; echo forked ${count}`;
  for (const [name, backend] of [['runc', runc], ['runsc', gvisor]]) {
    const limited = (p) => (p.resources.pids = pids);
    const fits = await runOnce(backend, forks(pids - 2), { edit: limited });
    assert.deepEqual(fits.exit, { kind: 'exited', code: 0 }, `${name}: ${fits.stderr}`);
    assert.equal(fits.stdout.trim(), `forked ${pids - 2}`);
    const past = await runOnce(backend, forks(pids - 1), { edit: limited });
    assert.deepEqual(past.exit, { kind: 'exited', code: 2 }, `${name}: one past the limit cannot fork`);
    assert.match(past.stderr, /can't fork/, name);
  }
  const sandbox = await gvisor.reserve(request((p) => (p.resources.pids = pids)), { kind: 'in_process' }).start();
  try {
    assert.equal(sandbox.effective.resources.pids, pids, 'the guest limit is what gVisor reports as applied');
  } finally {
    await sandbox.destroy();
  }
});
