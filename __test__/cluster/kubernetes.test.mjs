// The Kubernetes backend against the real single-node test cluster (`npm run cluster:up`):
// runc, the guest image imported into the cluster's own containerd. Run by
// `npm run test:kubernetes`, which starts the cluster when none answers.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileFromBytes, SandboxOperationError, SandboxStartError, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from 'native-sandbox/kubernetes';
import { collect, IMAGE, MiB, request, RUN } from '../docker-helpers.mjs';
import { census as censusOf, EMPTY, KUBECONFIG, KUBECTL, kubectl, NAMESPACE, scopeFor } from './cluster.mjs';

const census = () => censusOf(scope);

async function drained(bytes) {
  const chunks = [];
  for await (const chunk of bytes) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const scope = scopeFor('t');
const options = { kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 };
/** The test cluster's kubelet gives every pod 256 PIDs: a request asks at least that many. */
const asked = (edit = () => {}) =>
  request((policy) => {
    policy.resources.pids = 256;
    // The test node has two cores, and a pod's requests are its limits.
    policy.resources.cpus = 0.25;
    policy.network = { kind: 'outbound' };
    edit(policy);
  });
const sh = (script) => ({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: KUBERNETES_SANDBOX_GUEST.workspace });

/** Starts a sandbox; a failed start's owner cleans up before the error goes on. */
async function started(from, req) {
  const reservation = from.reserve(req, { kind: 'in_process' });
  try {
    return await reservation.start();
  } catch (error) {
    await error.owner?.stop();
    await error.owner?.destroy();
    throw error;
  }
}

const backend = await createKubernetesSandboxBackend(options);

after(() => assert.deepEqual(census(), EMPTY));

describe('kubernetes: options and the cluster', () => {
  it('bad options are a typed error naming each field, before anything reaches a cluster', async () => {
    await assert.rejects(
      createKubernetesSandboxBackend({ namespace: 'Bad_NS', scope: '-x', image: 'a b', podPidsLimit: 0, networkPolicy: 'yes', extra: 1 }),
      (error) => {
        assert.ok(error instanceof SandboxValidationError);
        const paths = error.issues.map((issue) => issue.path.join('.'));
        for (const field of ['namespace', 'scope', 'image', 'podPidsLimit', 'networkPolicy', 'extra']) assert.ok(paths.includes(field), `${field} in ${paths}`);
        return true;
      },
    );
  });

  it('an API server that does not answer fails creation within the bound, naming the kubeconfig and context', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nsbx-kube-'));
    const file = join(dir, 'unreachable.kubeconfig');
    // Port 1 on loopback: nothing listens, so the connection is refused at once.
    writeFileSync(
      file,
      ['apiVersion: v1', 'kind: Config', 'clusters:', '- name: gone', '  cluster:', '    server: https://127.0.0.1:1', '    insecure-skip-tls-verify: true', 'users:', '- name: u', '  user:', '    token: t', 'contexts:', '- name: here', '  context:', '    cluster: gone', '    user: u', 'current-context: here', ''].join('\n'),
    );
    const started = Date.now();
    await assert.rejects(createKubernetesSandboxBackend({ ...options, kubeconfig: file, context: 'here' }), (error) => {
      assert.ok(error instanceof SandboxOperationError, String(error));
      assert.match(error.message, new RegExp(`kubeconfig ${file}, context here`));
      assert.match(error.message, /127\.0\.0\.1:1/);
      return true;
    });
    assert.ok(Date.now() - started < 15_000);
  });

  it('a context the kubeconfig does not have is named', async () => {
    await assert.rejects(createKubernetesSandboxBackend({ ...options, context: 'no-such-context' }), /no-such-context/);
  });

  it('says what it enforces: isolated only where NetworkPolicy is enforced, never an allowlist', async () => {
    assert.deepEqual(backend.support.network, ['outbound']);
    assert.equal(backend.support.sessions, true);
    assert.throws(() => backend.reserve(request(), { kind: 'in_process' }), SandboxUnsupportedError);
    const enforced = await createKubernetesSandboxBackend({ ...options, networkPolicy: 'enforced' });
    assert.deepEqual(enforced.support.network, ['isolated', 'outbound']);
    // Persisted records are offered (kubernetes-recovery.test.mjs reconciles them).
    const persisted = backend.reserve(asked(), { kind: 'persisted', persist: async () => {} });
    await persisted.destroy();
  });
});

describe('kubernetes: a sandbox is a pod', () => {
  it('runs its process with binary stdio and its exit code, then stop and destroy leave nothing', async () => {
    const sandbox = await started(backend, asked());
    try {
      assert.equal(sandbox.workspace, KUBERNETES_SANDBOX_GUEST.workspace);
      assert.equal(sandbox.effective.resources.pids, 256);
      assert.equal(sandbox.effective.resources.memoryBytes, 128 * MiB);
      assert.equal(sandbox.effective.network.kind, 'outbound');
      const pods = census().pods;
      assert.equal(pods.length, 1);
      const payload = randomBytes(3 * MiB);
      const process = sandbox.reserveProcess(sh('cat; id -u >&2; pwd >&2; exit 7'));
      const streams = await process.start();
      const out = collect(streams.stdout);
      const err = collect(streams.stderr);
      streams.stdin.end(payload);
      const [stdout, stderr, exit] = await Promise.all([out, err, streams.exit]);
      assert.equal(createHash('sha256').update(stdout).digest('hex'), createHash('sha256').update(payload).digest('hex'));
      assert.equal(stderr.toString(), `65532\n${KUBERNETES_SANDBOX_GUEST.workspace}\n`);
      assert.deepEqual(exit, { kind: 'exited', code: 7 });
    } finally {
      await sandbox.stop();
      await sandbox.destroy();
    }
    assert.deepEqual(census(), EMPTY);
  });

  it('runs commands and file calls beside each other, each with its own exit', async () => {
    const sandbox = await started(backend, asked());
    try {
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => sandbox.run(sh(`echo out-${i}; echo err-${i} >&2; exit ${i}`))));
      results.forEach((result, i) => {
        assert.equal(result.stdout.toString(), `out-${i}\n`);
        assert.equal(result.stderr.toString(), `err-${i}\n`);
        assert.deepEqual(result.exit, { kind: 'exited', code: i });
      });
      const started = Date.now();
      const background = await sandbox.run(sh('sleep 60 & echo started'));
      assert.equal(background.stdout.toString(), 'started\n');
      assert.ok(Date.now() - started < 5_000);
      await sandbox.files.write('dir/a.txt', 'hello');
      assert.equal((await sandbox.files.read('dir/a.txt')).toString(), 'hello');
      assert.equal(await sandbox.files.read('missing.txt'), null);
      const listed = await sandbox.files.list('dir');
      assert.deepEqual(listed.map((entry) => entry.name), ['a.txt']);
      const seen = await sandbox.run(sh('cat dir/a.txt; stat -c %u dir/a.txt'));
      assert.equal(seen.stdout.toString(), 'hello65532\n');
      await assert.rejects(sandbox.files.read('../../etc/passwd'), SandboxValidationError);
    } finally {
      await sandbox.stop();
      await sandbox.destroy();
    }
  });

  it('imports as the sandbox user beside running commands, and exports after the stop from the kept workspace', async () => {
    const sandbox = await started(backend, asked());
    try {
      const big = randomBytes(3 * MiB + 17);
      const sleeper = await sandbox.exec(sh('sleep 600'), { stdin: false });
      await sandbox.importTree([fileFromBytes('in/big.bin', big), fileFromBytes('in/run.sh', Buffer.from('#!/bin/sh\necho ran\n'), { executable: true })]);
      const seen = await sandbox.run(sh('stat -c %u in/big.bin; ./in/run.sh; sha256sum in/big.bin | cut -c1-64'));
      assert.equal(seen.stdout.toString(), `65532\nran\n${createHash('sha256').update(big).digest('hex')}\n`);
      await sandbox.run(sh('echo made > in/made.txt'));
      await sandbox.stop();
      assert.equal((await sleeper.exit).kind, 'unavailable');
      const entries = new Map();
      await sandbox.exportTree({ kind: 'subtree', path: 'in' }, async (entry) => {
        entries.set(entry.path, entry.kind === 'file' ? await drained(entry.bytes) : 'directory');
      });
      assert.ok(entries.get('in/big.bin').equals(big), 'every byte of the large file came back');
      assert.equal(entries.get('in/made.txt').toString(), 'made\n');
      assert.equal(entries.get('in'), 'directory');
      const missing = await sandbox.exportTree({ kind: 'subtree', path: 'absent' }, async () => {}).catch((e) => e);
      assert.ok(missing instanceof SandboxValidationError, String(missing));
    } finally {
      await sandbox.stop();
      await sandbox.destroy();
    }
    assert.deepEqual(census(), EMPTY);
  });

  it('an export abandoned midway has its helper stopped before the next transfer runs', async () => {
    const sandbox = await started(backend, asked());
    const size = 64 * MiB;
    try {
      await sandbox.run(sh(`head -c ${size} /dev/zero > big.bin`));
      await sandbox.stop();
      const abandoned = await sandbox
        .exportTree({ kind: 'files', paths: ['big.bin'] }, async (entry) => {
          for await (const piece of entry.bytes) if (piece.length > 0) throw new Error('enough');
        })
        .catch((e) => e);
      assert.ok(abandoned instanceof Error, String(abandoned));
      // The next run waits for the abandoned helper to be stopped, then gives every byte.
      const lengths = [];
      await sandbox.exportTree({ kind: 'files', paths: ['big.bin'] }, async (entry) => {
        let length = 0;
        for await (const piece of entry.bytes) length += piece.length;
        lengths.push(length);
      });
      assert.deepEqual(lengths, [size]);
      const pod = census().pods[0].replace('pod/', '');
      const processes = kubectl('exec', '-n', NAMESPACE, pod, '-c', 'workspace', '--', 'ps').split('\n');
      assert.deepEqual(processes.filter((line) => line.trim().endsWith('/native-sandbox/helper')), [], 'no transfer helper left running');
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(census(), EMPTY);
  });

  it('stop ends every command and everything it started, and nothing is admitted after it', async () => {
    const sandbox = await started(backend, asked());
    const sleeper = await sandbox.exec(sh('sleep 600 & sleep 600'), { stdin: false });
    sleeper.stdout.resume();
    sleeper.stderr.resume();
    await sandbox.stop();
    assert.equal((await sleeper.exit).kind, 'unavailable');
    await assert.rejects(sandbox.run(sh('true')), SandboxStateError);
    await assert.rejects(sandbox.files.read('x'), SandboxStateError);
    const phase = kubectl('get', 'pods', '-n', NAMESPACE, '-l', `native-sandbox.dev/sandbox=${sandbox.id}`, '-o', 'jsonpath={.items[*].status.containerStatuses[0].state}');
    assert.ok(phase === '' || /terminated/.test(phase), phase);
    await sandbox.destroy();
    assert.deepEqual(census(), EMPTY);
  });

  it('a start that cannot be bounded or is looser than asked fails, leaving nothing', async () => {
    const unbounded = await createKubernetesSandboxBackend({ ...options, podPidsLimit: undefined });
    await assert.rejects(started(unbounded, asked()), (error) => {
      assert.ok(error instanceof SandboxStartError, String(error));
      assert.match(String(error.cause?.message ?? error.message), /podPidsLimit/);
      return true;
    });
    await assert.rejects(started(backend, asked((policy) => { policy.resources.pids = 64; })), (error) => {
      assert.ok(error instanceof SandboxStartError, String(error));
      return true;
    });
    assert.deepEqual(census(), EMPTY);
  });

  it('an image the node does not have fails the start by name, leaving nothing', async () => {
    const missing = await createKubernetesSandboxBackend({ ...options, image: 'native-sandbox/not-here:1' });
    await assert.rejects(started(missing, asked()), (error) => {
      assert.ok(error instanceof SandboxStartError, String(error));
      assert.match(String(error.cause?.message ?? ''), /ErrImageNeverPull|not-here/);
      return true;
    });
    assert.deepEqual(census(), EMPTY);
  });

  it('a stop while the start makes the pod ends the start and leaves nothing', async () => {
    for (const delayMs of [0, 150, 400]) {
      const reservation = backend.reserve(asked(), { kind: 'in_process' });
      const starting = reservation.start().then((sandbox) => sandbox, (error) => error);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      await reservation.stop();
      const outcome = await starting;
      await reservation.destroy();
      assert.ok(outcome instanceof SandboxStartError || outcome?.state !== undefined, String(outcome));
      assert.deepEqual(census(), EMPTY, `stopped ${delayMs} ms into the start`);
    }
  });

  it('a pod deleted by someone else fails the calls in flight and later ones with a typed error, and destroy still settles', async () => {
    const sandbox = await started(backend, asked());
    try {
      const sleeper = await sandbox.exec(sh('sleep 600'), { stdin: false });
      // Its streams fail with the supervisor (stream_failure): read, and their failure kept.
      const failures = [];
      for (const stream of [sleeper.stdout, sleeper.stderr]) {
        stream.on('error', (error) => failures.push(error));
        stream.resume();
      }
      const pod = census().pods[0];
      kubectl('delete', pod, '-n', NAMESPACE, '--grace-period=0', '--force', '--wait=false');
      const fate = await Promise.race([sleeper.exit, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 30_000))]);
      assert.notEqual(fate, 'still waiting');
      assert.notEqual(fate.kind, 'exited');
      for (const failure of failures) assert.equal(failure.code, 'stream_failure');
      await assert.rejects(sandbox.run(sh('true')), SandboxOperationError);
      // A transfer names the pod that went.
      const imported = await sandbox.importTree([fileFromBytes('late.txt', Buffer.from('x'))]).catch((e) => e);
      assert.ok(imported instanceof SandboxOperationError, String(imported));
      assert.ok(imported.message.includes(pod.replace('pod/', '')), imported.message);
    } finally {
      await sandbox.stop().catch(() => {});
      await sandbox.destroy();
    }
    assert.deepEqual(census(), EMPTY);
  });

  it('isolated makes a deny-all NetworkPolicy for the pod alone, gone with it', async () => {
    const enforced = await createKubernetesSandboxBackend({ ...options, networkPolicy: 'enforced' });
    const sandbox = await started(enforced, asked((policy) => { policy.network = { kind: 'isolated' }; }));
    try {
      assert.equal(sandbox.effective.network.kind, 'isolated');
      const policy = JSON.parse(kubectl('get', 'networkpolicy', '-n', NAMESPACE, '-l', `native-sandbox.dev/sandbox=${sandbox.id}`, '-o', 'json')).items;
      assert.equal(policy.length, 1);
      assert.deepEqual(policy[0].spec.podSelector, { matchLabels: { 'native-sandbox.dev/sandbox': sandbox.id } });
      assert.deepEqual(policy[0].spec.policyTypes, ['Ingress', 'Egress']);
      assert.equal(policy[0].spec.ingress, undefined);
      assert.equal(policy[0].spec.egress, undefined);
    } finally {
      await sandbox.stop();
      await sandbox.destroy();
    }
    assert.deepEqual(census(), EMPTY);
  });
});

describe('kubernetes: the least-privilege Role', () => {
  it('a controller bound to exactly docs/kubernetes-role.yaml runs, isolates and cleans up its sandboxes', async () => {
    const account = `nsbx-${scope}`.slice(0, 63);
    const role = new URL('../../docs/kubernetes-role.yaml', import.meta.url).pathname;
    kubectl('apply', '-n', NAMESPACE, '-f', role);
    kubectl('create', 'serviceaccount', account, '-n', NAMESPACE);
    kubectl('create', 'rolebinding', account, '-n', NAMESPACE, '--role=native-sandbox', `--serviceaccount=${NAMESPACE}:${account}`);
    try {
      const token = kubectl('create', 'token', account, '-n', NAMESPACE, '--duration=10m').trim();
      const admin = readFileSync(KUBECONFIG, 'utf8');
      const server = /server: (\S+)/.exec(admin)[1];
      const authority = /certificate-authority(?:-data)?: (\S+)/.exec(admin);
      const dir = mkdtempSync(join(tmpdir(), 'nsbx-kube-role-'));
      const file = join(dir, 'role.kubeconfig');
      const ca = authority[0].startsWith('certificate-authority-data') ? `    certificate-authority-data: ${authority[1]}` : `    certificate-authority: ${authority[1]}`;
      writeFileSync(file, ['apiVersion: v1', 'kind: Config', 'clusters:', '- name: test', '  cluster:', `    server: ${server}`, ca, 'users:', '- name: sandboxes', '  user:', `    token: ${token}`, 'contexts:', '- name: sandboxes', '  context:', '    cluster: test', '    user: sandboxes', `    namespace: ${NAMESPACE}`, 'current-context: sandboxes', ''].join('\n'));
      const limited = await createKubernetesSandboxBackend({ ...options, kubeconfig: file, networkPolicy: 'enforced' });
      const sandbox = await started(limited, asked((policy) => { policy.network = { kind: 'isolated' }; }));
      try {
        const result = await sandbox.run(sh('echo through-the-role'));
        assert.equal(result.stdout.toString(), 'through-the-role\n');
        await sandbox.files.write('role.txt', 'ok');
        assert.equal((await sandbox.files.read('role.txt')).toString(), 'ok');
        await sandbox.importTree([fileFromBytes('imported.txt', Buffer.from('in'))]);
        await sandbox.stop();
        const seen = new Map();
        await sandbox.exportTree({ kind: 'files', paths: ['imported.txt', 'role.txt'] }, async (entry) => {
          seen.set(entry.path, (await drained(entry.bytes)).toString());
        });
        assert.deepEqual(Object.fromEntries(seen), { 'imported.txt': 'in', 'role.txt': 'ok' });
        // Reconcile reads each recorded object by name: the Role's get is enough.
        const found = await limited.reconcile(sandbox.recoveryRecord);
        assert.equal(found.kind, 'matched');
        await found.owner.destroy();
      } finally {
        await sandbox.stop();
        await sandbox.destroy();
      }
      assert.deepEqual(census(), EMPTY);
      // The Role grants nothing else: listing secrets is refused.
      assert.throws(() => execFileSync(KUBECTL, ['--kubeconfig', file, 'get', 'secrets', '-n', NAMESPACE], { stdio: 'pipe' }), /forbidden/i);
    } finally {
      kubectl('delete', 'rolebinding', account, '-n', NAMESPACE, '--ignore-not-found');
      kubectl('delete', 'serviceaccount', account, '-n', NAMESPACE, '--ignore-not-found');
      kubectl('delete', 'role', 'native-sandbox', '-n', NAMESPACE, '--ignore-not-found');
    }
  });
});
