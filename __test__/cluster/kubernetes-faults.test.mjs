// The cluster faults a user meets, on the test cluster: the API server killed and started again
// (scripts/cluster/restart-apiserver.sh) during a start, while a process writes, and during an
// export and an import. Whatever each outcome, it is never a clean success with bytes missing,
// every promise settles within its bound, and stop and destroy leave nothing of the scope.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { SandboxStartError } from 'native-sandbox';
import { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from 'native-sandbox/kubernetes';
import { IMAGE, MiB, request } from '../docker-helpers.mjs';
import { census, EMPTY, KUBECONFIG, NAMESPACE, scopeFor, sweep } from './cluster.mjs';

const RESTART = fileURLToPath(new URL('../../scripts/cluster/restart-apiserver.sh', import.meta.url));
/** Every outcome below settles within this (the start's or a call's bound, and the restart). */
const SETTLE_MS = 90_000;
const scope = scopeFor('f');
const backend = await createKubernetesSandboxBackend({ kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 });
const asked = (edit = () => {}) =>
  request((policy) => {
    policy.resources.pids = 256;
    policy.resources.cpus = 0.25;
    policy.network = { kind: 'outbound' };
    policy.deadlines.startupMs = 60_000;
    edit(policy);
  });
const sh = (script) => ({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: KUBERNETES_SANDBOX_GUEST.workspace });
/** Kills the API server and starts it again; resolves with how long it was away (ms). */
const restart = () =>
  new Promise((resolve, reject) => execFile('bash', [RESTART], (error, stdout, stderr) => (error ? reject(new Error(`${error.message}: ${stderr}`)) : resolve(Number(stdout.trim())))));
/** `promise`'s outcome (a value, or the error it rejected with), failing the test past `ms`. */
const settled = (what, promise, ms = SETTLE_MS) =>
  Promise.race([promise.then((value) => ({ value }), (error) => ({ error })), new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);

after(async () => {
  try {
    assert.deepEqual(census(scope), EMPTY);
  } finally {
    sweep(scope);
  }
  // After a restart the scheduler and kubelet may take tens of seconds to take up new pods:
  // the suites after this one start once a sandbox starts again.
  for (let attempt = 1; ; attempt += 1) {
    try {
      const probe = await backend.reserve(asked(), { kind: 'in_process' }).start();
      await probe.destroy();
      return;
    } catch (error) {
      await error.owner?.stop().catch(() => {});
      await error.owner?.destroy().catch(() => {});
      if (attempt === 3) throw error;
    }
  }
});

async function cleanedUp(sandbox) {
  await settled('the stop', sandbox.stop().catch(() => {}));
  const destroyed = await settled('the destroy', sandbox.destroy());
  assert.equal(destroyed.error, undefined, String(destroyed.error));
  assert.deepEqual(census(scope), EMPTY);
}

describe('kubernetes: the API server restarted', () => {
  it('during a start: the start settles ready and working, or fails typed, and nothing is left', async () => {
    let restarting;
    const persist = async (record) => {
      const compute = record.resources.find((r) => r.role === 'compute');
      if (!restarting && record.phase === 'starting' && compute.identity.kind === 'identified') restarting = restart();
    };
    const outcome = await settled('the start', backend.reserve(asked(), { kind: 'persisted', persist }).start());
    const away = await restarting;
    assert.ok(away > 0, 'the API server went away during the start');
    console.log(`# start during the restart (${away} ms away): ${outcome.error ? `failed (${outcome.error.cause?.message ?? outcome.error.message})` : 'ready'}`);
    if (outcome.error) {
      assert.ok(outcome.error instanceof SandboxStartError, String(outcome.error));
      await settled('the failed start\'s stop', outcome.error.owner.stop().catch(() => {}));
      await settled('the failed start\'s destroy', outcome.error.owner.destroy());
      assert.deepEqual(census(scope), EMPTY);
      return;
    }
    const sandbox = outcome.value;
    try {
      assert.equal((await sandbox.run(sh('echo ok'))).stdout.toString(), 'ok\n');
    } finally {
      await cleanedUp(sandbox);
    }
  });

  it('while a process writes: its output and exit fail, or are whole; never short and clean', async () => {
    const sandbox = await backend.reserve(asked(), { kind: 'in_process' }).start();
    try {
      const rounds = 200;
      const streams = await sandbox.reserveProcess(sh(`i=0; while [ $i -lt ${rounds} ]; do head -c 65536 /dev/zero; sleep 0.05; i=$((i+1)); done`)).start();
      // Every stream may fail with the supervisor's connection: each failure is kept or read.
      streams.stdin.on('error', () => {});
      streams.stdin.end();
      streams.stderr.on('error', () => {}).resume();
      let bytes = 0;
      const read = new Promise((resolve, reject) => {
        streams.stdout.on('data', (chunk) => (bytes += chunk.length));
        streams.stdout.on('end', resolve);
        streams.stdout.on('error', reject);
      });
      // Observed from now: a failure during the restart is an outcome, not an unhandled rejection.
      const outcomes = Promise.all([settled('the output', read), settled('the exit', streams.exit)]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await restart();
      const [output, exit] = await outcomes;
      console.log(`# process during the restart: ${bytes} of ${rounds * 65536} bytes, output ${output.error ? `failed (${output.error.code})` : 'ended'}, exit ${JSON.stringify(exit.value ?? exit.error?.message)}`);
      const clean = output.error === undefined && exit.value?.kind === 'exited' && exit.value.code === 0;
      if (clean) assert.equal(bytes, rounds * 65536, 'a clean end has every byte');
      else assert.ok(bytes < rounds * 65536 || output.error, 'the restart cut the process short');
    } finally {
      await cleanedUp(sandbox);
    }
  });

  it('during an import and an export: each fails typed or delivers every byte', async () => {
    const sandbox = await backend.reserve(asked(), { kind: 'in_process' }).start();
    try {
      const size = 64 * MiB;
      const chunk = new Uint8Array(64 * 1024);
      const file = (path, chunks, pauseMs) => ({
        kind: 'file',
        path,
        byteLength: chunks * chunk.length,
        executable: false,
        open: async function* () {
          for (let i = 0; i < chunks; i += 1) {
            if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
            yield chunk;
          }
        },
      });
      await sandbox.importTree([file('big.bin', size / chunk.length, 0)]);
      // An import whose body comes slowly, for longer than the restart takes.
      const chunks = 320;
      const importing = settled('the import', sandbox.importTree([file('in.bin', chunks, 25)]));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await restart();
      const imported = await importing;
      if (imported.error) assert.ok(typeof imported.error.code === 'string' || imported.error.name.startsWith('Sandbox'), String(imported.error));

      await sandbox.stop();
      // Read slowly, so that the restart comes while the archive streams.
      let received = 0;
      const exporting = settled(
        'the export',
        sandbox.exportTree({ kind: 'files', paths: ['big.bin'] }, async (entry) => {
          for await (const piece of entry.bytes) {
            received += piece.length;
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await restart();
      const exported = await exporting;
      if (exported.error) assert.ok(typeof exported.error.code === 'string' || exported.error.name.startsWith('Sandbox'), String(exported.error));
      else assert.equal(received, size, 'a whole export has every byte');
      if (!imported.error) {
        // Said whole: the file is there, every byte of it.
        let length = 0;
        await sandbox.exportTree({ kind: 'files', paths: ['in.bin'] }, async (entry) => {
          for await (const piece of entry.bytes) length += piece.length;
        });
        assert.equal(length, chunks * chunk.length);
      }
      console.log(`# import during the restart: ${imported.error ? `failed (${imported.error.message})` : 'whole'}; export: ${exported.error ? `failed (${exported.error.message})` : 'whole'}`);
    } finally {
      await cleanedUp(sandbox);
    }
  });
});
