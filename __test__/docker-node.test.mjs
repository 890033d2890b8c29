// The /node directory helpers against the real engine.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { SandboxOperationError, SandboxValidationError } from 'native-sandbox';
import { createSandboxSpillStore, exportSandboxDirectory, importSandboxDirectory, SandboxDirectoryCleanupError } from 'native-sandbox/node';
import { dockerBackend, leftovers, NOTHING, request, runShell, uniqueNamespace } from './docker-helpers.mjs';
import { described } from './helpers.mjs';

const namespace = uniqueNamespace('node');
const backend = dockerBackend(namespace);
const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-node-'));
after(() => assert.deepEqual(leftovers(namespace), NOTHING));

async function withReady(fn) {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    return await fn(sandbox);
  } finally {
    await sandbox.destroy();
  }
}

function sourceTree() {
  const root = mkdtempSync(join(scratch, 'src-'));
  mkdirSync(join(root, 'lib/deep'), { recursive: true });
  writeFileSync(join(root, 'lib/deep/data.bin'), randomBytes(300_000));
  writeFileSync(join(root, 'empty.txt'), '');
  writeFileSync(join(root, 'run.sh'), '#!/bin/sh\ncat lib/deep/data.bin | wc -c > out/count.txt\n');
  chmodSync(join(root, 'run.sh'), 0o755);
  mkdirSync(join(root, 'out'));
  return root;
}

test('a host directory goes in, a process works on it, and the workspace comes back byte for byte', async () => {
  const source = sourceTree();
  await withReady(async (sandbox) => {
    const summary = await importSandboxDirectory(sandbox, source);
    assert.equal(summary.files, 3n);
    assert.equal(summary.directories, 3n);
    const ran = await runShell(sandbox, './run.sh && cat out/count.txt');
    assert.equal(ran.stdout.trim(), '300000');
    await sandbox.stop();
    const destination = join(scratch, `dest-${Date.now()}`);
    const exported = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination);
    assert.equal(exported.directory, join(destination, 'files'));
    assert.deepEqual(readdirSync(destination), ['files'], 'only the published tree remains');
    assert.ok(readFileSync(join(exported.directory, 'lib/deep/data.bin')).equals(readFileSync(join(source, 'lib/deep/data.bin'))));
    assert.equal(readFileSync(join(exported.directory, 'out/count.txt'), 'utf8').trim(), '300000');
    assert.equal(statSync(join(exported.directory, 'run.sh')).mode & 0o777, 0o700);
    assert.equal(statSync(join(exported.directory, 'empty.txt')).mode & 0o777, 0o600);
    assert.equal(exported.summary.files, 4n);
  });
});

test('symlinks and special files in the source are refused, naming them', async () => {
  const withLink = sourceTree();
  symlinkSync('/etc/passwd', join(withLink, 'passwd'));
  const withFifo = sourceTree();
  execFileSync('mkfifo', [join(withFifo, 'pipe')]);
  for (const [source, name] of [[withLink, 'passwd'], [withFifo, 'pipe']]) {
    await withReady(async (sandbox) => {
      const error = await importSandboxDirectory(sandbox, source).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError, `${error}`);
      assert.match(error.message, new RegExp(name));
    });
  }
});

test('an existing destination is preserved; a failed export leaves no destination behind', async () => {
  await withReady(async (sandbox) => {
    await runShell(sandbox, 'echo ok > ok.txt; ln -s /etc/passwd passwd');
    await sandbox.stop();
    const existing = mkdtempSync(join(scratch, 'existing-'));
    writeFileSync(join(existing, 'keep.txt'), 'mine');
    const refused = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, existing).catch((e) => e);
    assert.ok(refused instanceof SandboxValidationError);
    assert.deepEqual(refused.issues[0].path, ['destination']);
    assert.equal(readFileSync(join(existing, 'keep.txt'), 'utf8'), 'mine');
    const destination = join(scratch, `hostile-${Date.now()}`);
    const error = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination).catch((e) => e);
    assert.match(error.message, /passwd is a symbolic link/);
    assert.equal(existsSync(destination), false, 'the destination holds nothing');
  });
});

test('a umask that removes a requested bit fails the export instead of publishing wrong metadata', async () => {
  await withReady(async (sandbox) => {
    await runShell(sandbox, 'printf "#!/bin/sh\\n" > tool.sh; chmod 755 tool.sh');
    await sandbox.stop();
    const destination = join(scratch, `umask-${Date.now()}`);
    const previous = process.umask(0o177);
    try {
      const error = await exportSandboxDirectory(sandbox, { kind: 'files', paths: ['tool.sh'] }, destination).catch((e) => e);
      assert.match(String(error?.message), /umask/);
    } finally {
      process.umask(previous);
    }
    assert.equal(existsSync(destination), false);
  });
});

test('the helpers take any started sandbox, and refuse what is not one', async () => {
  const error = await importSandboxDirectory({}, scratch).catch((e) => e);
  assert.ok(error instanceof SandboxValidationError, String(error));
  assert.deepEqual(error.issues[0].path, ['sandbox']);
  assert.equal(typeof SandboxDirectoryCleanupError, 'function');
});

test('createSandboxSpillStore: exclusive, unlinked, canonical', async () => {
  const directory = mkdtempSync(join(scratch, 'spill-'));
  const store = await createSandboxSpillStore(directory);
  const file = await store.createFile();
  assert.deepEqual(readdirSync(directory), [], 'unlinked at creation');
  assert.deepEqual(await file.write(Buffer.from('abcdef'), 0, 6, 0), { bytesWritten: 6 });
  const buffer = Buffer.alloc(3);
  assert.deepEqual(await file.read(buffer, 0, 3, 2), { bytesRead: 3 });
  assert.equal(buffer.toString(), 'cde');
  await file.truncate(1);
  assert.deepEqual(await file.read(buffer, 0, 3, 0), { bytesRead: 1 });
  await store.createFile();
  await store.close();
  const link = join(scratch, `spill-link-${Date.now()}`);
  symlinkSync(directory, link);
  await assert.rejects(createSandboxSpillStore(link), SandboxValidationError);
  await assert.rejects(createSandboxSpillStore('relative'), SandboxValidationError);
});

test('import chunkBytes above the sandbox policy is refused, naming the entry', async () => {
  const source = sourceTree();
  await withReady(async (sandbox) => {
    const error = await importSandboxDirectory(sandbox, source, { chunkBytes: 128 * 1024 }).catch((e) => e);
    assert.ok(error instanceof SandboxValidationError, `${error}`);
    assert.match(described(error), /chunkBytes/);
  });
});

test('aborting an export to a directory mid-way leaves no destination and no staging', async () => {
  const source = mkdtempSync(join(scratch, 'many-'));
  for (let i = 0; i < 1500; i++) writeFileSync(join(source, `f${i}.txt`), `file ${i}\n`);
  await withReady(async (sandbox) => {
    await importSandboxDirectory(sandbox, source);
    await sandbox.stop();
    const destination = join(scratch, `aborted-${Date.now()}`);
    const controller = new AbortController();
    // Abort as soon as the staging directory holds a first file.
    const watcher = setInterval(() => {
      try {
        const staging = readdirSync(destination).find((name) => name.startsWith('.staging-'));
        if (staging && readdirSync(join(destination, staging)).length > 0) controller.abort();
      } catch {
        // Not created yet.
      }
    }, 1);
    const error = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination, { signal: controller.signal }).catch((e) => e);
    clearInterval(watcher);
    assert.ok(controller.signal.aborted, 'the export was still running when it was aborted');
    assert.ok(error instanceof SandboxOperationError, `${error}`);
    assert.equal(error.code, 'cancelled');
    assert.equal(existsSync(destination), false, 'no destination and no staging remain');
    // The native writer had stopped before the helper cleaned up: nothing is written later.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(existsSync(destination), false, 'no late write recreates anything');
    const again = join(scratch, `after-abort-${Date.now()}`);
    const { summary } = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, again);
    assert.equal(summary.files, 1500n, 'the transfer slot was released');
  });
});

test('destroy() ends an exportSandboxDirectory in progress: it rejects and publishes nothing', async () => {
  const backend = dockerBackend(uniqueNamespace('node-destroy'));
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  const body = Buffer.alloc(1024, 1);
  await sandbox.importTree(Array.from({ length: 5000 }, (_, i) => ({ kind: 'file', path: `many/f${i}`, byteLength: body.length, executable: false, open: () => [body] })));
  await sandbox.stop();
  const destination = join(mkdtempSync(join(scratch, 'destroyed-')), 'out');
  const pending = exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination).catch((e) => e);
  await new Promise((resolve) => setTimeout(resolve, 150));
  await sandbox.destroy();
  const error = await pending;
  assert.ok(error instanceof SandboxOperationError, String(error));
  assert.equal(error.code, 'cancelled');
  assert.equal(existsSync(destination), false, 'nothing is published and the destination is removed');
});
