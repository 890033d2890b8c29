// Policy enforced for real: what the guest itself sees, and what is refused before any effect.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SandboxStartError, SandboxUnsupportedError, SandboxValidationError, SandboxOperationError } from 'native-sandbox';
import { createDockerSandboxBackend, DOCKER_SANDBOX_GUEST } from 'native-sandbox/docker';
import { collect, dockerBackend, IMAGE, leftovers, MiB, NOTHING, request, runOnce, runShell, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('policy');
const backend = dockerBackend(namespace);
const CGROUP_MEMORY = 'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes';
const CGROUP_PIDS = 'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max';
// Builtins only: at the PID limit the shell cannot fork a cat.
const CGROUP_PIDS_CURRENT = 'for f in /sys/fs/cgroup/pids.current /sys/fs/cgroup/pids/pids.current; do [ -r $f ] && read n < $f && echo $n; done';

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the policy suite leaves no engine objects behind');
});

describe('docker policy inside the guest', () => {
  test('the fixed layout is exported', () => {
    assert.deepEqual(DOCKER_SANDBOX_GUEST, {
      workspace: '/sandbox/workspace',
      home: '/sandbox/home',
      tmpdir: '/sandbox/tmp',
      HOME: '/sandbox/home',
      TMPDIR: '/sandbox/tmp',
      PATH: '/usr/local/bin:/usr/bin:/bin',
      env: { HOME: '/sandbox/home', TMPDIR: '/sandbox/tmp', PATH: '/usr/local/bin:/usr/bin:/bin' },
    });
    assert.ok(Object.isFrozen(DOCKER_SANDBOX_GUEST.env));
  });

  test('non-root uid 65532, no effective capabilities, read-only root, fixed environment plus explicit env', async () => {
    const result = await runOnce(
      backend,
      'id -u; id -g; grep CapEff /proc/self/status; touch /x 2>/dev/null && echo writable-root || echo read-only-root; echo "$HOME $TMPDIR $PATH $GREETING"; pwd; touch "$HOME/ok" && touch "$TMPDIR/ok" && touch /sandbox/workspace/ok && echo writable-layout',
      { env: { GREETING: 'hello' } },
    );
    assert.deepEqual(result.stdout.trim().split('\n'), [
      '65532',
      '65532',
      'CapEff:\t0000000000000000',
      'read-only-root',
      '/sandbox/home /sandbox/tmp /usr/local/bin:/usr/bin:/bin hello',
      '/sandbox/workspace',
      'writable-layout',
    ]);
  });

  test('an init process is PID 1 and reaps', async () => {
    const result = await runOnce(backend, 'cat /proc/1/comm');
    assert.notEqual(result.stdout.trim(), 'sh');
  });

  test('isolated: only the loopback interface exists', async () => {
    const result = await runOnce(backend, 'ls /sys/class/net');
    assert.equal(result.stdout.trim(), 'lo');
  });

  test('outbound: an interface and a default route, on a network of its own removed at destroy', async () => {
    const sandbox = await backend.reserve(request((p) => (p.network = { kind: 'outbound' })), { kind: 'in_process' }).start();
    const record = sandbox.recoveryRecord;
    const network = record.resources.find((r) => r.role === 'network');
    assert.equal(network.identity.kind, 'identified');
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'ls /sys/class/net | sort | tr "\\n" " "; echo; awk \'$2 == "00000000" { print "default-route" }\' /proc/net/route'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const output = collect(streams.stdout);
      streams.stderr.resume();
      streams.stdin.end();
      await streams.exit;
      const text = (await output).toString();
      assert.match(text, /eth0/);
      assert.match(text, /default-route/);
      assert.deepEqual(sandbox.effective.network, { kind: 'outbound' });
    } finally {
      await sandbox.destroy();
    }
    const remaining = execFileSync('docker', ['network', 'ls', '-q', '--filter', `id=${network.identity.id}`], { encoding: 'utf8' }).trim();
    assert.equal(remaining, '');
  });

  test('the cgroup memory and PID limits equal the request, and sandbox.effective reports them', async () => {
    const sandbox = await backend
      .reserve(request((p) => Object.assign(p.resources, { memoryBytes: 96 * MiB, pids: 48, cpus: 0.5 })), { kind: 'in_process' })
      .start();
    try {
      assert.deepEqual(sandbox.effective.resources, { cpus: 0.5, memoryBytes: 96 * MiB, pids: 48 });
      assert.deepEqual(sandbox.effective.temporaryStorage, { homeBytes: 8 * MiB, tempBytes: 8 * MiB });
      assert.deepEqual(sandbox.effective.workspaceDiskQuota, { kind: 'not_requested' });
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', `${CGROUP_MEMORY}; ${CGROUP_PIDS}`], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const output = collect(streams.stdout);
      streams.stderr.resume();
      streams.stdin.end();
      assert.deepEqual((await output).toString().trim().split('\n'), [String(96 * MiB), '48']);
    } finally {
      await sandbox.destroy();
    }
  });

  test('an allocation past the memory limit is OOM-killed and reported as out_of_memory', async () => {
    const result = await runOnce(backend, 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived', {
      edit: (p) => (p.resources.memoryBytes = 32 * MiB),
    });
    assert.deepEqual(result.exit, { kind: 'signaled', signal: 'SIGKILL', reason: 'out_of_memory' });
    assert.doesNotMatch(result.stdout, /survived/);
  });

  test('a fork bomb is contained by the PID limit', async () => {
    const result = await runOnce(
      backend,
      // The bomb runs in a subshell, which dies when it cannot fork; the parent survives to measure.
      '(i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; ' + CGROUP_PIDS_CURRENT + '; echo survived',
      { edit: (p) => (p.resources.pids = 32) },
    );
    const [current, survived] = result.stdout.trim().split('\n');
    assert.equal(survived, 'survived');
    assert.ok(Number(current) > 0 && Number(current) <= 32, `pids.current ${current}`);
  });

  test('tmpfs writes stop at their size', async () => {
    const result = await runOnce(
      backend,
      'head -c 20000000 /dev/zero > "$HOME/big" 2>/dev/null; wc -c < "$HOME/big"; head -c 20000000 /dev/zero > "$TMPDIR/big" 2>/dev/null; wc -c < "$TMPDIR/big"',
      { edit: (p) => Object.assign(p.temporaryStorage, { homeBytes: 4 * MiB, tempBytes: 6 * MiB }) },
    );
    const [home, temp] = result.stdout.trim().split('\n').map(Number);
    assert.ok(home <= 4 * MiB && home > 3 * MiB, `home ${home}`);
    assert.ok(temp <= 6 * MiB && temp > 5 * MiB, `temp ${temp}`);
  });
});

describe('docker admission', () => {
  const extraEnvImage = `native-sandbox/test-extra-env:${process.pid}`;
  let context;
  before(() => {
    context = mkdtempSync(join(tmpdir(), 'native-sandbox-image-'));
    writeFileSync(join(context, 'Dockerfile'), `FROM ${IMAGE}\nENV API_TOKEN=leak\n`);
    execFileSync('docker', ['build', '--quiet', '--tag', extraEnvImage, context], { stdio: 'ignore' });
  });
  after(() => {
    rmSync(context, { recursive: true, force: true });
    execFileSync('docker', ['rmi', '-f', extraEnvImage], { stdio: 'ignore' });
  });

  test('an image with extra environment is refused before any container exists', async () => {
    const ns = uniqueNamespace('env');
    const refusing = dockerBackend(ns, { image: extraEnvImage });
    const reservation = refusing.reserve(request(), { kind: 'in_process' });
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError);
    assert.ok(error.cause instanceof SandboxUnsupportedError);
    assert.match(error.cause.message, /API_TOKEN/);
    assert.deepEqual(leftovers(ns), NOTHING);
    await error.owner.destroy();
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('an image given by its ID asks the engine nothing at creation; startup admits it or fails before any container', async () => {
    const id = execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', IMAGE], { encoding: 'utf8' }).trim();
    // No engine answers on port 1: creation still succeeds, because nothing needs asking.
    const offline = createDockerSandboxBackend({ image: id, namespace: uniqueNamespace('id-offline'), spillDirectory: spillDirectory(), engine: { url: 'tcp://127.0.0.1:1' } });
    const unreachable = offline.reserve(request(), { kind: 'in_process' });
    assert.equal(unreachable.recoveryRecord.imageDigest, id);
    const startError = await unreachable.start().catch((e) => e);
    assert.ok(startError instanceof SandboxStartError, String(startError));
    assert.match(startError.cause.message, /Connection refused/);
    // The message names the engine and the cause, not the HTTP client library's layers.
    assert.match(startError.cause.message, /\(the engine: engine\.url tcp:\/\/127\.0\.0\.1:1\): could not connect to the engine: tcp connect error: Connection refused/);
    assert.doesNotMatch(startError.cause.message, /hyper|client error/);
    await unreachable.destroy();
    // A reference is resolved at startup: the same.
    const byName = createDockerSandboxBackend({ image: IMAGE, namespace: uniqueNamespace('name-offline'), spillDirectory: spillDirectory(), engine: { url: 'tcp://127.0.0.1:1' } }).reserve(request(), { kind: 'in_process' });
    const nameError = await byName.start().catch((e) => e);
    assert.match(nameError.cause?.message ?? '', new RegExp(`^resolving image ${IMAGE} \\(the engine: engine\\.url tcp://127\\.0\\.0\\.1:1\\): could not connect to the engine: `));
    assert.doesNotMatch(nameError.cause.message, /hyper|client error/);
    await byName.destroy();

    const ns = uniqueNamespace('id');
    const sandbox = await dockerBackend(ns, { image: id }).reserve(request(), { kind: 'in_process' }).start();
    try {
      assert.equal(sandbox.recoveryRecord.imageDigest, id);
      assert.equal((await runShell(sandbox, 'echo by-id')).stdout, 'by-id\n');
    } finally {
      await sandbox.destroy();
    }

    const absentNs = uniqueNamespace('id-absent');
    const absent = dockerBackend(absentNs, { image: `sha256:${'0'.repeat(64)}` }).reserve(request(), { kind: 'in_process' });
    const absentError = await absent.start().catch((e) => e);
    assert.ok(absentError instanceof SandboxStartError, String(absentError));
    assert.match(absentError.cause.message, /no such image/i);
    await absent.destroy();
    assert.deepEqual(leftovers(absentNs), NOTHING);
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('workspaceDiskQuota required is refused with zero engine objects created', () => {
    const ns = uniqueNamespace('quota');
    const quota = dockerBackend(ns);
    assert.equal(quota.support.workspaceDiskQuota, false);
    assert.throws(
      () => quota.reserve(request((p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 1024 ** 3, accounting: 'allocated_blocks' })), { kind: 'in_process' }),
      SandboxUnsupportedError,
    );
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('bad backend options name the field; a missing image is a driver failure', () => {
    assert.throws(
      () => createDockerSandboxBackend({ image: IMAGE, namespace: 'bad ns', spillDirectory: 'relative' }),
      (error) => error instanceof SandboxValidationError && error.issues.map((i) => i.path[0]).join() === 'namespace,spillDirectory',
    );
    // A spillDirectory that is not there, or not a directory, is a validation error naming it.
    for (const [path, problem] of [['/no/such/spill-directory', /is not an existing directory/], ['/etc/passwd', /is not a directory/]]) {
      assert.throws(
        () => createDockerSandboxBackend({ image: IMAGE, namespace: 'fine', spillDirectory: path }),
        (error) =>
          error instanceof SandboxValidationError &&
          error.issues.length === 1 &&
          error.issues[0].path.join() === 'spillDirectory' &&
          problem.test(error.issues[0].message) &&
          /mkdtempSync/.test(error.issues[0].message),
        path,
      );
    }
  });

  test('a missing image reference fails startup before any engine object exists', async () => {
    const ns = uniqueNamespace('missing-image');
    const missing = createDockerSandboxBackend({ image: 'native-sandbox/does-not-exist:0', namespace: ns, spillDirectory: spillDirectory() });
    const reservation = missing.reserve(request(), { kind: 'in_process' });
    const error = await reservation.start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError, String(error));
    assert.ok(error.cause instanceof SandboxOperationError && error.cause.code === 'driver_failure', String(error.cause));
    assert.match(error.cause.message, /does-not-exist/);
    assert.deepEqual(leftovers(ns), NOTHING);
    await error.owner.destroy();
    assert.deepEqual(leftovers(ns), NOTHING);
  });
});

describe('docker runtimes', () => {
  test("runtime 'runsc' offers only isolated networking: outbound is refused at reserve", () => {
    const ns = uniqueNamespace('runsc-support');
    const gvisor = createDockerSandboxBackend({ image: IMAGE, namespace: ns, spillDirectory: spillDirectory(), runtime: 'runsc' });
    assert.deepEqual(gvisor.support.network, ['isolated']);
    assert.throws(() => gvisor.reserve(request((p) => (p.network = { kind: 'outbound' })), { kind: 'in_process' }), SandboxUnsupportedError);
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a runtime the engine does not have fails startup before any engine object exists', async () => {
    const ns = uniqueNamespace('no-runtime');
    const missing = createDockerSandboxBackend({ image: IMAGE, namespace: ns, spillDirectory: spillDirectory(), runtime: 'no-such-runtime' });
    assert.deepEqual(missing.support.network, ['isolated', 'outbound', 'allowlist']);
    const error = await missing.reserve(request(), { kind: 'in_process' }).start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError, String(error));
    assert.ok(error.cause instanceof SandboxUnsupportedError, String(error.cause));
    assert.match(error.cause.message, /no runtime no-such-runtime/);
    assert.deepEqual(leftovers(ns), NOTHING);
    await error.owner.destroy();
  });
});
