// The Docker backend over TLS: a TLS endpoint that demands a client certificate signed by the test
// CA stands in front of the real engine's socket, as `dockerd --tlsverify` would. Everything the
// backend does (image resolution, creation, the attached process, archives, removal) crosses it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileFromBytes, SandboxCleanupError, SandboxOperationError, SandboxStartError, SandboxValidationError } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { IMAGE, leftovers, NOTHING, request, runShell, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { CA, CLIENT, engineSocket, fixtures, pem, startFront } from './tls-front-control.mjs';

const front = await startFront();
const url = `tcp://127.0.0.1:${front.port}`;
const frontCounts = () => front.counts();
after(() => front.close());

const namespaces = [];
function tlsBackend(label, tls = CLIENT, engineUrl = url) {
  const namespace = uniqueNamespace(label);
  namespaces.push(namespace);
  return createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), engine: { url: engineUrl, tls } });
}

after(() => {
  for (const namespace of namespaces) assert.deepEqual(leftovers(namespace), NOTHING, namespace);
});

test('a whole sandbox runs over a TLS engine connection with a client certificate', async () => {
  const before = (await frontCounts()).authorized;
  const backend = tlsBackend('tls');
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    // Beside a tiny file, one the helper writes just below 16 MiB and one the engine writes above
    // it: the helper's answer to the marker comes only once the marker went through TLS.
    const near = randomBytes(16 * 1024 * 1024 - 1);
    const large = randomBytes(16 * 1024 * 1024 + 1);
    await sandbox.importTree([
      fileFromBytes('in/data.bin', Buffer.from([0, 1, 2, 255, 10, 13])),
      fileFromBytes('in/near.bin', near, { chunkBytes: 64 * 1024 }),
      fileFromBytes('in/large.bin', large, { chunkBytes: 64 * 1024 }),
    ]);
    const echoed = await runShell(sandbox, 'cat; wc -c < in/data.bin >&2; printf out > in/result.txt', { input: 'stdin bytes over TLS' });
    assert.deepEqual(echoed.exit, { kind: 'exited', code: 0 });
    assert.equal(echoed.stdout, 'stdin bytes over TLS');
    assert.equal(echoed.stderr.trim(), '6');
    await sandbox.stop();
    const files = {};
    await sandbox.exportTree({ kind: 'subtree', path: 'in' }, async (entry) => {
      if (entry.kind !== 'file') return;
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      files[entry.path] = Buffer.concat(chunks);
    });
    assert.deepEqual(Object.keys(files).sort(), ['in/data.bin', 'in/large.bin', 'in/near.bin', 'in/result.txt']);
    assert.equal(files['in/result.txt'].toString(), 'out');
    assert.ok(files['in/near.bin'].equals(near) && files['in/large.bin'].equals(large), 'byte-exact');
  } finally {
    await sandbox.destroy();
  }
  assert.ok((await frontCounts()).authorized > before, 'the backend reached the engine through the authenticated TLS front');
});

test('an https:// URL by host name is verified against the name in the engine certificate', async () => {
  const backend = tlsBackend('tls-name', CLIENT, `https://localhost:${front.port}`);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    assert.equal((await runShell(sandbox, 'echo named')).stdout, 'named\n');
  } finally {
    await sandbox.destroy();
  }
});

test('an engine whose certificate the given CA did not sign is refused before anything is created', async () => {
  const refusedBefore = (await frontCounts()).refused;
  const backend = tlsBackend('tls-ca', { ...CLIENT, ca: pem('other-ca.pem') });
  const error = await backend.reserve(request(), { kind: 'in_process' }).start().catch((e) => e);
  assert.ok(error instanceof SandboxStartError, String(error));
  assert.ok(error.cause instanceof SandboxOperationError, String(error.cause));
  assert.equal(error.cause.code, 'driver_failure');
  assert.match(error.cause.message, /invalid peer certificate: UnknownIssuer/);
  assert.ok((await frontCounts()).refused > refusedBefore, 'the TLS front saw the refused handshake');
  await error.owner.destroy();
});

test('tcp:// without a port means the engine ports, as with the docker CLI: 2375 plain, 2376 over TLS', async () => {
  const plain = await startFront(2375, 'plain');
  const secure = await startFront(2376);
  try {
    for (const [label, engine, used] of [
      ['tcp-plain', { url: 'tcp://127.0.0.1' }, plain],
      ['tcp-tls', { url: 'tcp://localhost', tls: CLIENT }, secure],
    ]) {
      const before = (await used.counts()).connections;
      const namespace = uniqueNamespace(label);
      namespaces.push(namespace);
      const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), engine });
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      try {
        assert.equal((await runShell(sandbox, 'cat', { input: label })).stdout, label);
      } finally {
        await sandbox.destroy();
      }
      assert.ok((await used.counts()).connections > before, `${label} went through its front`);
    }
  } finally {
    plain.close();
    secure.close();
  }
});

test('an engine whose certificate names another host is refused', async () => {
  const elsewhere = await startFront(0, 'elsewhere');
  try {
    const backend = tlsBackend('tls-host', CLIENT, `tcp://127.0.0.1:${elsewhere.port}`);
    const error = await backend.reserve(request(), { kind: 'in_process' }).start().catch((e) => e);
    assert.ok(error instanceof SandboxStartError, String(error));
    assert.ok(error.cause instanceof SandboxOperationError, String(error.cause));
    assert.match(error.cause.message, /invalid peer certificate: certificate not valid for name/);
    assert.equal((await elsewhere.counts()).authorized, 0);
    await error.owner.destroy();
  } finally {
    elsewhere.close();
  }
});

test('TLS options are validated and name the offending field', () => {
  const issuesOf = (engine) => {
    try {
      createDockerSandboxBackend({ image: IMAGE, namespace: uniqueNamespace('tls-bad'), spillDirectory: spillDirectory(), engine });
    } catch (e) {
      assert.ok(e instanceof SandboxValidationError, String(e));
      return e.issues.map((issue) => issue.path.join('.'));
    }
    assert.fail('expected a validation error');
  };
  assert.deepEqual(issuesOf({ url: url.replace('tcp', 'https') }), ['engine.url']);
  assert.deepEqual(issuesOf({ url, tls: { ...CLIENT, ca: join(fixtures, 'ca.pem') } }), ['engine.tls.ca']);
  assert.deepEqual(issuesOf({ url, tls: { ...CLIENT, key: pem('server-key.pem') } }), ['engine.tls.key']);
  assert.deepEqual(issuesOf({ url, tls: { ca: CA } }), ['engine.tls.cert', 'engine.tls.key']);
  assert.deepEqual(issuesOf({ socketPath: engineSocket, tls: CLIENT }), ['engine.tls']);
});

test('DOCKER_HOST with DOCKER_TLS_VERIFY uses DOCKER_CERT_PATH, as the docker CLI does', async () => {
  const saved = { DOCKER_HOST: process.env.DOCKER_HOST, DOCKER_TLS_VERIFY: process.env.DOCKER_TLS_VERIFY, DOCKER_CERT_PATH: process.env.DOCKER_CERT_PATH };
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const certPath = mkdtempSync(join(tmpdir(), 'native-sandbox-certs-'));
  writeFileSync(join(certPath, 'ca.pem'), CLIENT.ca);
  writeFileSync(join(certPath, 'cert.pem'), CLIENT.cert);
  writeFileSync(join(certPath, 'key.pem'), CLIENT.key, { mode: 0o600 });
  const before = (await frontCounts()).authorized;
  const namespace = uniqueNamespace('tls-env');
  namespaces.push(namespace);
  try {
    Object.assign(process.env, { DOCKER_HOST: url, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certPath });
    const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory() });
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const ran = await runShell(sandbox, 'echo via-env');
      assert.equal(ran.stdout, 'via-env\n');
    } finally {
      await sandbox.destroy();
    }
    assert.ok((await frontCounts()).authorized > before);

    rmSync(join(certPath, 'key.pem'));
    const missing = (() => {
      try {
        createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory() });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(missing instanceof Error);
    assert.match(missing.message, /key\.pem/);
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(certPath, { recursive: true, force: true });
  }
});

test('an engine lost mid-process: streams fail, exit waits for the real fate, cleanup retries once it is back', async () => {
  let lossy = await startFront();
  const backend = tlsBackend('tls-lost', CLIENT, `tcp://127.0.0.1:${lossy.port}`);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo ready; sleep 2; exit 3'], env: {}, cwd: sandbox.workspace });
    const streams = await process.start();
    const stdoutFailure = new Promise((resolve) => streams.stdout.on('error', resolve));
    streams.stderr.on('error', () => {});
    streams.stdin.on('error', () => {});
    let settled = false;
    const exit = streams.exit.finally(() => {
      settled = true;
    });
    await new Promise((resolve) => streams.stdout.once('data', resolve));

    await lossy.kill();
    const failure = await stdoutFailure;
    assert.ok(failure instanceof SandboxOperationError, String(failure));
    assert.equal(failure.code, 'stream_failure');
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(settled, false, 'a lost connection is not an exit');
    assert.deepEqual(sandbox.state, { kind: 'ready' });

    lossy = await startFront(lossy.port);
    assert.deepEqual(await exit, { kind: 'exited', code: 3 }, 'the wait is asked again once the engine answers');

    await lossy.kill();
    const stopError = await sandbox.stop().catch((e) => e);
    assert.ok(stopError instanceof SandboxCleanupError, String(stopError));
    assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'stop' });
    lossy = await startFront(lossy.port);
    await stopError.retryCleanup();
    assert.deepEqual(sandbox.state, { kind: 'stopped' });
  } finally {
    await sandbox.destroy();
    lossy.close();
  }
});

test('an engine lost mid-transfer fails the import and the export with the engine named, and leaves nothing', async () => {
  let lossy = await startFront();
  const spill = spillDirectory();
  const namespace = uniqueNamespace('tls-lost-transfer');
  namespaces.push(namespace);
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spill, engine: { url: `tcp://127.0.0.1:${lossy.port}`, tls: CLIENT } });
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const chunk = Buffer.alloc(64 * 1024, 7);
    // Kept: 32 MiB, far more than the connection's buffers hold, for the export below.
    const kept = Array.from({ length: 512 }, (_, i) => ({ kind: 'file', path: `keep/f${i}`, byteLength: chunk.length, executable: false, open: () => [chunk] }));
    await sandbox.importTree(kept);
    async function* files() {
      for (let i = 0; i < 10_000; i += 1) {
        yield { kind: 'file', path: `big/f${i}`, byteLength: chunk.length, executable: false, open: () => [chunk] };
        if (i === 1_000) await lossy.kill();
      }
    }
    const imported = await sandbox.importTree(files()).catch((e) => e);
    assert.ok(imported instanceof SandboxOperationError, String(imported));
    assert.equal(imported.code, 'stream_failure');
    assert.match(imported.message, /the sandbox stopped accepting the import archive: (writing the import archive to the workspace helper: |the workspace helper ended before the import archive did)/);
    assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'import' }, 'bytes reached the guest: execution is fenced');
    assert.deepEqual(readdirSync(spill), [], 'no spill file stays behind');

    lossy = await startFront(lossy.port);
    await sandbox.stop();
    let entries = 0;
    const exported = await sandbox
      .exportTree({ kind: 'subtree', path: 'keep' }, async (entry) => {
        if (entry.kind === 'file') for await (const _ of entry.bytes);
        entries += 1;
        if (entries === 100) await lossy.kill();
      })
      .catch((e) => e);
    assert.ok(exported instanceof SandboxOperationError, String(exported));
    assert.equal(exported.code, 'stream_failure');
    assert.match(exported.message, /reading the workspace archive from the engine/);
    assert.deepEqual(readdirSync(spill), []);
    lossy = await startFront(lossy.port);
  } finally {
    await sandbox.destroy();
    lossy.close();
  }
});

test('an engine lost during startup: the start fails, cleanup waits for the engine and then leaves nothing', async () => {
  let lossy = await startFront();
  const namespace = uniqueNamespace('tls-lost-start');
  namespaces.push(namespace);
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), engine: { url: `tcp://127.0.0.1:${lossy.port}`, tls: CLIENT } });
  let killed = false;
  const persist = async (record) => {
    // Once an engine object exists, the engine goes away before the next effect.
    if (!killed && record.resources.some((resource) => resource.identity.kind === 'identified')) {
      killed = true;
      await lossy.kill();
    }
  };
  const reservation = backend.reserve(request(), { kind: 'persisted', persist });
  try {
    const startError = await reservation.start().catch((e) => e);
    assert.ok(killed, 'the engine was lost mid-startup');
    assert.ok(startError instanceof SandboxStartError, String(startError));
    const cleanupError = await reservation.destroy().catch((e) => e);
    assert.ok(cleanupError instanceof SandboxCleanupError, String(cleanupError));
    assert.notDeepEqual(leftovers(namespace), NOTHING, 'the object created before the loss is still there');
    lossy = await startFront(lossy.port);
    await cleanupError.retryCleanup();
    assert.deepEqual(reservation.state, { kind: 'destroyed' });
    assert.deepEqual(leftovers(namespace), NOTHING);
  } finally {
    lossy.close();
  }
});

test('reconcile against an unreachable engine is an error, never absent; once it answers, the record matches', async () => {
  let lossy = await startFront();
  const namespace = uniqueNamespace('tls-reconcile');
  namespaces.push(namespace);
  const imageId = execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', IMAGE], { encoding: 'utf8' }).trim();
  const backend = createDockerSandboxBackend({ image: imageId, namespace, spillDirectory: spillDirectory(), engine: { url: `tcp://127.0.0.1:${lossy.port}`, tls: CLIENT } });
  let record;
  const sandbox = await backend.reserve(request(), { kind: 'persisted', persist: async (r) => void (record = r) }).start();
  try {
    await lossy.kill();
    const unreachable = await backend.reconcile(record).then(
      (outcome) => outcome,
      (e) => e,
    );
    assert.ok(unreachable instanceof Error, `an unreachable engine answered ${JSON.stringify(unreachable?.kind)}`);
    assert.ok(unreachable instanceof SandboxOperationError, String(unreachable));
    assert.match(unreachable.message, /Connection refused/);
    lossy = await startFront(lossy.port);
    const outcome = await backend.reconcile(record);
    assert.equal(outcome.kind, 'matched');
    await outcome.owner.destroy();
    assert.deepEqual(leftovers(namespace), NOTHING);
  } finally {
    await sandbox.destroy();
    lossy.close();
  }
});
