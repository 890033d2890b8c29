// Transfers through createSandboxBackend: a JavaScript driver's ready port gets validated
// entries and once-only bodies; what it delivers is checked; the ledger spills to its port.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileFromBytes, SandboxOperationError, SandboxStateError, SandboxValidationError } from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { createSandboxSpillStore, exportSandboxDirectory, importSandboxDirectory, SandboxDirectoryCleanupError } from 'native-sandbox/node';
import { SpillLedger } from '../js/spill-ledger.js';
import { initialRecord, policy, SUPPORT } from './scripted-driver.mjs';

/** A driver whose workspace is a Map of path → { kind, bytes, executable }. */
function memoryDriver({ deliver, skipBodies = false } = {}) {
  const spillDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-driver-spill-'));
  const workspace = new Map();
  const setup = { workspace, spillDirectory, bodyOf: undefined };
  let count = 0;
  const driver = {
    support: SUPPORT,
    reserve(request) {
      count += 1;
      const id = `mem-${count}`;
      return {
        id,
        recoveryRecord: initialRecord(id),
        async start() {
          return {
            effective: { resources: request.policy.resources, temporaryStorage: request.policy.temporaryStorage, network: request.policy.network, workspaceDiskQuota: { kind: 'not_requested' } },
            workspace: '/workspace',
            openSpill: () => createSandboxSpillStore(spillDirectory),
            async importTree(entries) {
              const summary = { directories: 0n, files: 0n, fileBytes: 0n, archiveBytes: 0n };
              for await (const entry of entries) {
                if (entry.kind === 'directory') {
                  summary.directories += 1n;
                  workspace.set(entry.path, { kind: 'directory' });
                } else if (skipBodies) {
                  // A driver that takes the entries and never opens their bodies.
                  summary.files += 1n;
                  summary.fileBytes += BigInt(entry.byteLength);
                  summary.archiveBytes += BigInt(512) + BigInt(entry.byteLength);
                } else {
                  const chunks = [];
                  for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
                  const bytes = Buffer.concat(chunks);
                  workspace.set(entry.path, { kind: 'file', bytes, executable: entry.executable });
                  summary.files += 1n;
                  summary.fileBytes += BigInt(bytes.length);
                  summary.archiveBytes += BigInt(512 + bytes.length);
                }
              }
              return summary;
            },
            async exportTree(selection, consume) {
              const summary = { directories: 0n, files: 0n, fileBytes: 0n, archiveBytes: 0n };
              const items = deliver ? deliver(selection, workspace) : [...workspace].filter(([path]) => selection.kind === 'workspace' || (selection.kind === 'files' ? selection.paths.includes(path) : path === selection.path || path.startsWith(`${selection.path}/`)));
              for (const [path, item] of items) {
                if (item.kind === 'directory') {
                  summary.directories += 1n;
                  await consume({ kind: 'directory', path });
                } else {
                  summary.files += 1n;
                  summary.fileBytes += BigInt(item.bytes.length);
                  const bytes = setup.bodyOf ? setup.bodyOf(item.bytes) : (async function* () { if (item.bytes.length) yield item.bytes; })();
                  await consume({ kind: 'file', path, byteLength: BigInt(item.bytes.length), executable: item.executable, bytes });
                }
              }
              return summary;
            },
          };
        },
        async stop() {},
        async destroy() {},
      };
    },
    async reconcile() {
      return { kind: 'conflict', reason: 'not used' };
    },
  };
  setup.driver = driver;
  return setup;
}

const tiny = () => {
  const request = policy();
  Object.assign(request.policy.transfers, { chunkBytes: 1024, metadataBatchBytes: 4096, mergeFanIn: 2 });
  return request;
};

async function ready(setup, request = tiny()) {
  const backend = createSandboxBackend(setup.driver);
  return backend.reserve(request, { kind: 'in_process' }).start();
}

describe('transfers through a JavaScript driver', () => {
  test('import hands validated entries and once-only bodies to the driver; export round-trips', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const summary = await sandbox.importTree([{ kind: 'directory', path: 'src' }, fileFromBytes('src/a.txt', Buffer.from('hello'), { chunkBytes: 1024 }), fileFromBytes('run.sh', Buffer.from('#!'), { executable: true, chunkBytes: 1024 })]);
    assert.deepEqual(summary, { directories: 1n, files: 2n, fileBytes: 7n, archiveBytes: 1031n });
    assert.equal(setup.workspace.get('src/a.txt').bytes.toString(), 'hello');
    await sandbox.stop();
    const got = [];
    const exported = await sandbox.exportTree({ kind: 'subtree', path: 'src' }, async (entry) => {
      let text = '';
      if (entry.kind === 'file') for await (const chunk of entry.bytes) text += chunk;
      got.push([entry.kind, entry.path, text]);
    });
    assert.deepEqual(got, [['directory', 'src', ''], ['file', 'src/a.txt', 'hello']]);
    assert.equal(exported.files, 1n);
    assert.deepEqual(readdirSync(setup.spillDirectory), []);
    await sandbox.destroy();
  });

  test('many paths spill through the driver port and a late duplicate fails the import', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const entries = Array.from({ length: 600 }, (_, i) => ({ kind: 'directory', path: `d${i % 50}/e${i}` }));
    entries.push({ kind: 'directory', path: 'd3/e3' });
    const error = await sandbox.importTree(entries).catch((e) => e);
    assert.ok(error instanceof SandboxValidationError, `${error}`);
    assert.equal(error.issues[0].code, 'duplicate');
    assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'import' });
    assert.deepEqual(readdirSync(setup.spillDirectory), [], 'spill files are unlinked at creation');
    await sandbox.destroy();
  });

  test('a short body never reaches the driver as complete, and the entry is named', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const error = await sandbox.importTree([{ kind: 'file', path: 'x', byteLength: 10, executable: false, open: () => [Buffer.from('abc')] }]).catch((e) => e);
    assert.ok(error instanceof SandboxValidationError);
    assert.deepEqual(error.issues[0].path, [0, 'byteLength']);
    await sandbox.destroy();
  });

  test('onProgress on a driver transfer ends at the totals; a callback that throws fails it', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const seen = [];
    const summary = await sandbox.importTree([fileFromBytes('a', Buffer.from('12')), fileFromBytes('d/b', Buffer.from('345'))], { onProgress: (progress) => seen.push(progress) });
    assert.deepEqual({ ...seen.at(-1) }, { files: 2n, bytes: 5n });
    assert.deepEqual({ files: summary.files, bytes: summary.fileBytes }, { files: 2n, bytes: 5n });
    await sandbox.stop();
    const broke = new Error('progress consumer broke');
    const error = await sandbox
      .exportTree({ kind: 'workspace' }, async (entry) => {
        if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      }, {
        onProgress: () => {
          throw broke;
        },
      })
      .catch((e) => e);
    assert.equal(error, broke);
    await sandbox.destroy();
  });

  test('quotas apply to driver imports', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const error = await sandbox.importTree([fileFromBytes('a', Buffer.from('1')), fileFromBytes('b', Buffer.from('2'))], { quotas: { maxFiles: 1 } }).catch((e) => e);
    assert.deepEqual(error.issues[0].path, ['quotas', 'maxFiles']);
    await sandbox.destroy();
  });

  test('what the driver delivers is checked: outside the selection, a repeated root, unread bytes', async () => {
    for (const [deliver, pattern] of [
      [() => [['elsewhere.txt', { kind: 'file', bytes: Buffer.from('x'), executable: false }]], /outside the selection/],
      [() => [['src', { kind: 'directory' }], ['src', { kind: 'directory' }]], /appears more than once|2 times/],
    ]) {
      const setup = memoryDriver({ deliver });
      const sandbox = await ready(setup);
      await sandbox.stop();
      const error = await sandbox.exportTree({ kind: 'subtree', path: 'src' }, async () => {}).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError || error instanceof SandboxValidationError, `${error}`);
      assert.match(error instanceof SandboxValidationError ? error.issues.map((issue) => issue.message).join('; ') : error.message, pattern);
      await sandbox.destroy();
    }
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    await sandbox.importTree([fileFromBytes('f', Buffer.from('data'))]);
    await sandbox.stop();
    const unread = await sandbox.exportTree({ kind: 'workspace' }, () => {}).catch((e) => e);
    assert.match(unread.message, /before reading all bytes of f/);
    await sandbox.destroy();
  });

  test('state rules hold for driver transfers too', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError);
    await sandbox.destroy();
  });

  test('an exact final chunk needs no EOF pull; a second concurrent read rejects', async () => {
    let pulledAfterLast = false;
    const setup = memoryDriver({
      deliver: () => [
        ['exact.bin', { kind: 'file', executable: false, bytes: Buffer.from('exact') }],
      ],
    });
    const sandbox = await ready(setup);
    await sandbox.stop();
    // The driver's body hangs after its last chunk: only a reader that pulls for EOF would wait.
    setup.bodyOf = (bytes) => ({
      async *[Symbol.asyncIterator]() {
        yield bytes;
        pulledAfterLast = true;
        await new Promise(() => {});
      },
    });
    const got = [];
    const summary = await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      const reader = entry.bytes[Symbol.asyncIterator]();
      const [first, second] = await Promise.allSettled([reader.next(), reader.next()]);
      assert.equal(first.status, 'fulfilled');
      assert.ok(second.reason instanceof SandboxStateError, String(second.reason));
      got.push(Buffer.from(first.value.value).toString());
      // No further pull: the declared bytes were all delivered.
    });
    assert.deepEqual(got, ['exact']);
    assert.equal(summary.files, 1n);
    assert.equal(pulledAfterLast, false);
    await sandbox.destroy();
  });

  test('a refused transfer never releases the one in progress', async () => {
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    await sandbox.importTree([fileFromBytes('a.txt', Buffer.from('a'), { chunkBytes: 1024 })]);
    await sandbox.stop();
    let release;
    const held = new Promise((resolve) => (release = resolve));
    const first = sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      await held;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError);
    // The refusal above released nothing: the first export still holds the sandbox.
    assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError);
    release();
    assert.equal((await first).files, 1n);
    assert.equal((await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
    })).files, 1n);
    await sandbox.destroy();
  });
});

describe("an interrupted transfer owns the driver's work until it settles", () => {
  /** A memory driver whose importTree and exportTree ignore their signal until released. */
  function heldDriver() {
    const setup = memoryDriver();
    const reserve = setup.driver.reserve;
    setup.active = 0;
    setup.most = 0;
    setup.holds = [];
    const hold = (work) => async (...args) => {
      setup.active += 1;
      setup.most = Math.max(setup.most, setup.active);
      try {
        const summary = await work(...args);
        await new Promise((resolve) => setup.holds.push(resolve));
        return summary;
      } finally {
        setup.active -= 1;
      }
    };
    setup.stops = 0;
    setup.driver.reserve = (request) => {
      const reserved = reserve(request);
      const stop = reserved.stop;
      reserved.stop = () => {
        setup.stops += 1;
        return stop();
      };
      const start = reserved.start;
      reserved.start = async (...args) => {
        const ready = await start(...args);
        return { ...ready, importTree: hold(ready.importTree), exportTree: hold(ready.exportTree) };
      };
      return reserved;
    };
    setup.releaseAll = () => {
      for (const release of setup.holds.splice(0)) release();
    };
    return setup;
  }
  const until = async (check) => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  };

  test('an aborted export rejects at once; no second export enters while the driver still runs', async () => {
    const setup = heldDriver();
    const sandbox = await ready(setup);
    const imported = sandbox.importTree([fileFromBytes('a.txt', Buffer.from('a'), { chunkBytes: 1024 })]);
    await until(() => setup.holds.length === 1);
    setup.releaseAll();
    await imported;
    await sandbox.stop();
    const controller = new AbortController();
    const pending = sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
    }, { signal: controller.signal });
    await until(() => setup.holds.length === 1);
    controller.abort();
    assert.equal((await pending.catch((e) => e))?.code, 'cancelled');
    assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError, 'the slot is held while the driver runs');
    setup.releaseAll();
    await until(() => setup.active === 0);
    await new Promise((resolve) => setImmediate(resolve));
    const next = sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
    });
    await until(() => setup.holds.length === 1);
    setup.releaseAll();
    assert.equal((await next).files, 1n);
    assert.equal(setup.most, 1, 'the driver never had two transfers at once');
    await sandbox.destroy();
  });

  test("a stop during an import waits for the driver's importTree: the state never reads stopped while it still writes", async () => {
    const setup = heldDriver();
    const sandbox = await ready(setup);
    const pending = sandbox.importTree([fileFromBytes('a.txt', Buffer.from('a'), { chunkBytes: 1024 })]).catch((e) => e);
    await until(() => setup.holds.length === 1);
    const stopped = sandbox.stop();
    assert.equal((await pending)?.code, 'cancelled', 'the import is answered when the stop begins');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(sandbox.state.kind, 'stopping', "the stop waits for the driver's import");
    assert.equal(setup.stops, 1, "the driver's stop began without waiting for the import");
    assert.equal(setup.active, 1);
    setup.releaseAll();
    await stopped;
    assert.equal(sandbox.state.kind, 'stopped');
    assert.equal(setup.active, 0);
    await sandbox.destroy();
  });
});

describe('the spill ledger of JavaScript drivers', () => {
  test('merging is tiered: each path is rewritten once per level, not once per spill', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'native-sandbox-ledger-'));
    const store = await createSandboxSpillStore(directory);
    const ledger = new SpillLedger(store, { metadataBatchBytes: 4096, mergeFanIn: 2 });
    const count = 40_000;
    for (let i = 0; i < count; i++) await ledger.add(`d${i % 97}/f${String(i).padStart(7, '0')}`, 'file');
    await ledger.check();
    const runs = Math.ceil((count * 19) / 4096);
    const levels = Math.ceil(Math.log2(runs)) + 2;
    assert.ok(ledger.written <= count * levels, `${ledger.written} records written for ${count} paths`);
    await store.close();
    assert.deepEqual(readdirSync(directory), []);
  });
});

describe('the /node directory helpers with any sandbox', () => {
  test('files a driver never reads hold no descriptor of the host walk once its import settled', async () => {
    const source = mkdtempSync(join(tmpdir(), 'native-sandbox-unread-'));
    for (let i = 0; i < 20; i += 1) {
      mkdirSync(join(source, `d${i}`));
      writeFileSync(join(source, `d${i}`, 'f'), `file ${i}`);
    }
    const held = () => readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(source);
      } catch {
        return false;
      }
    }).length;
    const setup = memoryDriver({ skipBodies: true });
    const sandbox = await ready(setup);
    const summary = await importSandboxDirectory(sandbox, source);
    assert.equal(summary.files, 20n);
    // The descriptors close on a blocking thread: a moment for it, far below garbage collection.
    for (let waited = 0; held() > 0 && waited < 2_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(held(), 0, 'a directory descriptor of the walk is still open');
    await sandbox.destroy();
    rmSync(source, { recursive: true, force: true });
  });

  test('a JavaScript driver sandbox imports a host directory and exports into a new one, byte for byte', async () => {
    const source = mkdtempSync(join(tmpdir(), 'native-sandbox-any-src-'));
    mkdirSync(join(source, 'src/deep'), { recursive: true });
    writeFileSync(join(source, 'src/deep/a.txt'), 'alpha');
    writeFileSync(join(source, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
    writeFileSync(join(source, 'empty'), '');
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const summary = await importSandboxDirectory(sandbox, source, { chunkBytes: 1024 });
    assert.equal(summary.files, 3n);
    assert.equal(setup.workspace.get('src/deep/a.txt').bytes.toString(), 'alpha');
    assert.equal(setup.workspace.get('run.sh').executable, true);
    await sandbox.stop();
    const destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-any-dst-')), 'out');
    const exported = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination);
    assert.equal(exported.directory, join(destination, 'files'));
    assert.equal(readFileSync(join(exported.directory, 'src/deep/a.txt'), 'utf8'), 'alpha');
    assert.equal(readFileSync(join(exported.directory, 'empty'), 'utf8'), '');
    assert.equal(statSync(join(exported.directory, 'run.sh')).mode & 0o700, 0o700);
    assert.deepEqual(readdirSync(destination), ['files'], 'only the published tree remains');
    await sandbox.destroy();
  });

  test('a symbolic link fails the import of any sandbox; a failed export leaves no destination', async () => {
    const source = mkdtempSync(join(tmpdir(), 'native-sandbox-any-link-'));
    symlinkSync('/etc/passwd', join(source, 'passwd'));
    const setup = memoryDriver();
    const sandbox = await ready(setup);
    const error = await importSandboxDirectory(sandbox, source).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, String(error));
    assert.match(error.message, /symbolic links are not imported/);
    await sandbox.stop();
    const destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-any-fail-')), 'out');
    const failed = await exportSandboxDirectory(sandbox, { kind: 'subtree', path: 'missing' }, destination).catch((e) => e);
    assert.ok(failed instanceof Error);
    assert.throws(() => statSync(destination), /ENOENT/);
    await sandbox.destroy();
  });

  test('a failed export removes only what it owns', async () => {
    const setup = memoryDriver({
      deliver: () => {
        // Someone else's file lands in the namespace while the export runs, then the export fails.
        writeFileSync(join(setup.destination, 'not-ours.txt'), 'keep me');
        throw new Error('the driver lost its workspace');
      },
    });
    const sandbox = await ready(setup);
    await sandbox.stop();
    setup.destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-owned-')), 'out');
    const error = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, setup.destination).catch((e) => e);
    assert.match(error?.message ?? '', /the driver lost its workspace/, 'the export fails with its own error');
    assert.deepEqual(readdirSync(setup.destination), ['not-ours.txt'], 'the staging and records went; the foreign file stayed');
    await sandbox.destroy();
  });

  test('a failed export whose cleanup fails too keeps both errors, and its retry finishes the cleanup', async () => {
    let pinned;
    const setup = memoryDriver({
      deliver: () => {
        // An entry in the export's staging that cannot be removed (immutable), then the failure.
        const staging = join(setup.destination, readdirSync(setup.destination).find((name) => name.startsWith('.staging-')));
        pinned = join(staging, 'pinned');
        writeFileSync(pinned, '');
        execFileSync('chattr', ['+i', pinned]);
        throw new Error('the driver lost its workspace');
      },
    });
    const sandbox = await ready(setup);
    await sandbox.stop();
    setup.destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-owned-')), 'out');
    try {
      const error = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, setup.destination).catch((e) => e);
      assert.ok(error instanceof SandboxDirectoryCleanupError, String(error));
      assert.match(error.exportError?.message ?? '', /the driver lost its workspace/);
      assert.ok(error.cause instanceof Error, 'the cause is the cleanup failure');
      assert.match(error.message, /the driver lost its workspace/);
      assert.equal(error.publishedDirectory, undefined);
      execFileSync('chattr', ['-i', pinned]);
      await error.retryCleanup();
      assert.throws(() => statSync(setup.destination), /ENOENT/);
    } finally {
      if (pinned) spawnSync('chattr', ['-i', pinned]);
      await sandbox.destroy();
    }
  });

  test('a cleanup that fails after publication names the published directory, and its retry keeps it', async () => {
    let records;
    const setup = memoryDriver({
      deliver: (_selection, workspace) => {
        // An entry in the export's private records that cannot be removed (immutable).
        records = join(setup.destination, readdirSync(setup.destination).find((name) => name.startsWith('.identities-')));
        writeFileSync(join(records, 'pinned'), '');
        execFileSync('chattr', ['+i', join(records, 'pinned')]);
        return [...workspace];
      },
    });
    const sandbox = await ready(setup);
    await sandbox.importTree([fileFromBytes('d/a.txt', Buffer.from('alpha'), { chunkBytes: 1024 })]);
    await sandbox.stop();
    setup.destination = join(mkdtempSync(join(tmpdir(), 'native-sandbox-published-')), 'out');
    try {
      const error = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, setup.destination).catch((e) => e);
      assert.ok(error instanceof SandboxDirectoryCleanupError, String(error));
      assert.equal(error.publishedDirectory, join(setup.destination, 'files'));
      assert.equal(readFileSync(join(error.publishedDirectory, 'd/a.txt'), 'utf8'), 'alpha');
      execFileSync('chattr', ['-i', join(records, 'pinned')]);
      await error.retryCleanup();
      assert.deepEqual(readdirSync(setup.destination), ['files']);
      assert.equal(readFileSync(join(setup.destination, 'files/d/a.txt'), 'utf8'), 'alpha');
    } finally {
      if (records) spawnSync('chattr', ['-i', join(records, 'pinned')]);
      await sandbox.destroy();
    }
  });
});

