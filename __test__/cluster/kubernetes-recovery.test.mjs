// Crash recovery on the test cluster: a controller killed with SIGKILL in each phase (starting,
// importing, a process and commands running, stopping; a record is last written when the start
// completes, so the last two say `ready`), then a fresh controller reconciles its
// persisted record and cleans up, and nothing of the scope is left. Records of another scope or
// cluster configuration are conflicts that touch nothing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { createKubernetesSandboxBackend } from 'native-sandbox/kubernetes';
import { IMAGE, request } from '../docker-helpers.mjs';
import { census, EMPTY, KUBECONFIG, kubectl, NAMESPACE, scopeFor, sweep } from './cluster.mjs';

const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-kube-recovery-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
const options = (scope) => ({ kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 });

/** Runs a controller to `phase`, then kills it with SIGKILL. */
async function crashed(scope, recordFile, phase) {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./crash-controller.mjs', import.meta.url)), scope, recordFile, phase], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve, reject) => {
    const late = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the controller did not reach ${phase} within 120 s`));
    }, 120_000);
    child.on('exit', () => clearTimeout(late));
    let said = '';
    child.stdout.on('data', (chunk) => {
      said += chunk.toString();
      if (said.includes(phase)) {
        clearTimeout(late);
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`the controller exited early with ${code}`)));
  });
  child.kill('SIGKILL');
  await new Promise((resolve) => child.on('exit', resolve));
}

/** The state of the sandbox container of the scope's one pod (`running`, `terminated`, …). */
function sandboxContainerState(scope) {
  const pods = JSON.parse(kubectl('get', 'pods', '-n', NAMESPACE, '-l', `native-sandbox.dev/scope=${scope}`, '-o', 'json')).items;
  const state = pods[0]?.status?.containerStatuses?.find((c) => c.name === 'sandbox')?.state ?? {};
  return Object.keys(state)[0] ?? 'none';
}

async function eventually(what, predicate, ms = 30_000) {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) assert.fail(`${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('kubernetes: a controller killed with SIGKILL, reconciled by a new one', () => {
  for (const [phase, recordPhase] of [
    ['starting', 'starting'],
    ['importing', 'ready'],
    ['running', 'ready'],
    ['stopping', 'ready'],
  ]) {
    it(`killed ${phase}: the record reconciles, its owner cleans up, and nothing is left`, async () => {
      const scope = scopeFor(`k${phase.slice(0, 3)}`);
      const recordFile = join(scratch, `${phase}.json`);
      try {
        await crashed(scope, recordFile, phase);
        assert.equal(census(scope).pods.length, 1, 'the pod outlives its controller');
        if (phase === 'running' || phase === 'importing') {
          // The supervisor's stdin closed with the controller's attach: nothing of the guest runs on.
          await eventually('the sandbox container ended with its controller', () => sandboxContainerState(scope) === 'terminated');
        }
        const record = JSON.parse(readFileSync(recordFile, 'utf8'));
        assert.equal(record.phase, recordPhase);
        const backend = await createKubernetesSandboxBackend(options(scope));
        const found = await backend.reconcile(record);
        assert.equal(found.kind, 'matched');
        assert.equal(found.owner.recoveryRecord.sandboxId, record.sandboxId);
        await found.owner.stop();
        await found.owner.destroy();
        assert.deepEqual(census(scope), EMPTY);
        const again = await backend.reconcile(record);
        assert.equal(again.kind, 'absent');
        assert.equal(again.record.phase, 'destroyed');
      } finally {
        sweep(scope);
      }
    });
  }

  it('a record of another scope, or written under other options, is a conflict that touches nothing', async () => {
    const scope = scopeFor('kown');
    const backend = await createKubernetesSandboxBackend(options(scope));
    const asked = request((policy) => {
      policy.resources.pids = 256;
      policy.resources.cpus = 0.25;
      policy.network = { kind: 'outbound' };
    });
    const sandbox = await backend.reserve(asked, { kind: 'in_process' }).start();
    try {
      const other = await createKubernetesSandboxBackend(options(scopeFor('koth')));
      const foreign = await other.reconcile(sandbox.recoveryRecord);
      assert.equal(foreign.kind, 'conflict');
      assert.match(foreign.reason, /scope/);
      const reconfigured = await createKubernetesSandboxBackend({ ...options(scope), podPidsLimit: 512 });
      const changed = await reconfigured.reconcile(sandbox.recoveryRecord);
      assert.equal(changed.kind, 'conflict');
      assert.match(changed.reason, /configuration/);
      // A record whose pod UID is not the one under the name: not adopted.
      const forged = structuredClone(sandbox.recoveryRecord);
      forged.resources.find((r) => r.role === 'compute').identity.id = '00000000-0000-0000-0000-000000000000';
      const wrong = await backend.reconcile(forged);
      assert.equal(wrong.kind, 'conflict');
      assert.equal(census(scope).pods.length, 1, 'nothing was touched');
      assert.equal((await sandbox.run({ executable: '/bin/sh', args: ['-c', 'echo alive'], env: {}, cwd: sandbox.workspace })).stdout.toString(), 'alive\n');
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(census(scope), EMPTY);
  });
});
