// Streaming transfers against the real engine: byte-exact round trips, quotas at and one past
// their bounds, bad input, state rules, aborts, and hostile guest content.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileFromBytes, SANDBOX_LIMITS, SandboxOperationError, SandboxStateError, SandboxValidationError } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { IMAGE, leftovers, NOTHING, request, runShell, uniqueNamespace } from './docker-helpers.mjs';
import { described } from './helpers.mjs';

const namespace = uniqueNamespace('xfer');
const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-xfer-spill-'));
const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spill });
const CHUNK = 4096;
const small = () => request((p) => Object.assign(p.transfers, { chunkBytes: CHUNK, metadataBatchBytes: 4096, mergeFanIn: 2 }));

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(readdirSync(spill), [], 'no spill file outlives its transfer');
});

async function withReady(fn, req = small()) {
  const sandbox = await backend.reserve(req, { kind: 'in_process' }).start();
  try {
    return await fn(sandbox);
  } finally {
    await sandbox.destroy();
  }
}

async function exported(sandbox, selection, options) {
  const entries = [];
  const summary = await sandbox.exportTree(
    selection,
    async (entry) => {
      if (entry.kind === 'file') {
        const chunks = [];
        for await (const chunk of entry.bytes) {
          assert.ok(chunk.length <= CHUNK, 'export chunks respect chunkBytes');
          chunks.push(Buffer.from(chunk));
        }
        entries.push({ kind: 'file', path: entry.path, bytes: Buffer.concat(chunks), executable: entry.executable, byteLength: entry.byteLength });
      } else {
        entries.push({ kind: 'directory', path: entry.path });
      }
    },
    options,
  );
  return { entries, summary };
}

describe('round trips, byte for byte', () => {
  test('empty, one chunk, one chunk plus one, executable, deep, long and non-ASCII paths', async () => {
    const deep = Array.from({ length: 64 }, (_, i) => `d${i % 10}`).join('/');
    const long = ['a'.repeat(255), 'b'.repeat(255), 'c'.repeat(255), 'd'.repeat(254), 'e'].join('/');
    assert.equal(Buffer.byteLength(long), 1024);
    const files = [
      ['empty.bin', Buffer.alloc(0), false],
      ['one-chunk.bin', randomBytes(CHUNK), false],
      ['one-chunk-plus-one.bin', randomBytes(CHUNK + 1), false],
      ['tools/run.sh', Buffer.from('#!/bin/sh\necho ran\n'), true],
      [deep, Buffer.from('deep'), false],
      [long, Buffer.from('long'), false],
      ['naïve/日本語/ファイル.txt', Buffer.from('unicode'), false],
    ];
    await withReady(async (sandbox) => {
      const summary = await sandbox.importTree(files.map(([path, bytes, executable]) => fileFromBytes(path, bytes, { executable, chunkBytes: CHUNK })));
      assert.deepEqual(summary.files, BigInt(files.length));
      assert.equal(summary.fileBytes, BigInt(files.reduce((n, [, b]) => n + b.length, 0)));
      assert.equal(typeof summary.archiveBytes, 'bigint');
      const ran = await runShell(sandbox, './tools/run.sh && id -u && stat -c %u "naïve/日本語/ファイル.txt"');
      assert.equal(ran.stdout, 'ran\n65532\n65532\n');
      await sandbox.stop();
      const { entries } = await exported(sandbox, { kind: 'workspace' });
      for (const [path, bytes, executable] of files) {
        const found = entries.find((e) => e.path === path);
        assert.ok(found, `${path.slice(0, 40)} came back`);
        assert.ok(found.bytes.equals(bytes), `${path.slice(0, 40)} is byte-identical`);
        assert.equal(found.executable, executable);
        assert.equal(found.byteLength, BigInt(bytes.length));
      }
    });
  });

  test('an empty subtree delivers its root exactly once; exact files keep workspace-relative paths', async () => {
    await withReady(async (sandbox) => {
      await sandbox.importTree([{ kind: 'directory', path: 'results/empty' }, fileFromBytes('results/a.txt', Buffer.from('a')), fileFromBytes('other/b.txt', Buffer.from('b'))]);
      await sandbox.stop();
      const subtree = await exported(sandbox, { kind: 'subtree', path: 'results/empty' });
      assert.deepEqual(subtree.entries, [{ kind: 'directory', path: 'results/empty' }]);
      assert.deepEqual(subtree.summary, { directories: 1n, files: 0n, fileBytes: 0n, archiveBytes: subtree.summary.archiveBytes });
      const files = await exported(sandbox, { kind: 'files', paths: ['other/b.txt', 'results/a.txt'] });
      assert.deepEqual(files.entries.map((e) => [e.path, e.bytes.toString()]), [['other/b.txt', 'b'], ['results/a.txt', 'a']]);
    });
  });
});

describe('quotas at and one past their bounds', () => {
  const tree = () => [fileFromBytes('q/a', Buffer.alloc(10)), fileFromBytes('q/b', Buffer.alloc(20))];
  const cases = [
    ['maxFiles', 2, 1],
    ['maxFileBytes', 20, 19],
    ['maxTotalBytes', 30, 29],
  ];
  for (const [quota, at, past] of cases) {
    test(`${quota}: ${at} passes, ${past} fails, on import and on export`, async () => {
      await withReady(async (sandbox) => {
        await sandbox.importTree(tree(), { quotas: { [quota]: at } });
        await sandbox.stop();
        await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { [quota]: BigInt(at) } });
        const error = await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { [quota]: past } }).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError, `${error}`);
        assert.deepEqual(error.issues[0].path, ['quotas', quota]);
      });
      await withReady(async (sandbox) => {
        const error = await sandbox.importTree(tree(), { quotas: { [quota]: past } }).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError);
        assert.deepEqual(error.issues[0].path, ['quotas', quota]);
      });
    });
  }

  test('an export failure reaches the consumer after every entry before it, each consumed in turn', async () => {
    await withReady(async (sandbox) => {
      // Small files: a batch (about chunkBytes of bodies) holds several, so the failure comes in the
      // same batch as the entries before it.
      await sandbox.importTree(['a', 'b', 'c', 'd'].map((name) => fileFromBytes(`e/${name}`, Buffer.from(name.repeat(100)))));
      await sandbox.stop();
      for (const [name, selection, options, failed] of [
        ['a missing file', { kind: 'files', paths: ['e/a', 'e/b', 'e/missing', 'e/c'] }, {}, (e) => e.issues?.[0]?.path.join('.') === 'paths.2'],
        ['one file past maxFiles', { kind: 'subtree', path: 'e' }, { quotas: { maxFiles: 2 } }, (e) => e.issues?.[0]?.path.join('.') === 'quotas.maxFiles'],
      ]) {
        const seen = [];
        let inConsumer = false;
        const error = await sandbox
          .exportTree(
            selection,
            async (entry) => {
              assert.equal(inConsumer, false, 'one entry at a time');
              inConsumer = true;
              let bytes = '';
              if (entry.kind === 'file') for await (const chunk of entry.bytes) bytes += Buffer.from(chunk).toString();
              await new Promise((resolve) => setTimeout(resolve, 5));
              seen.push(entry.kind === 'file' ? `${entry.path}:${bytes.length}:${bytes[0]}` : entry.path);
              inConsumer = false;
            },
            options,
          )
          .catch((e) => e);
        assert.ok(failed(error), `${name}: ${error} ${JSON.stringify(error.issues)}`);
        // Exact files come in their order; a subtree's in the engine's (directory) order.
        const files = seen.filter((s) => s.includes(':'));
        if (selection.kind === 'files') assert.deepEqual(files, ['e/a:100:a', 'e/b:100:b'], name);
        else {
          assert.equal(files.length, 2, `${name}: ${files}`);
          for (const file of files) assert.match(file, /^e\/([a-d]):100:\1$/, name);
        }
      }
    });
  });

  test('maxArchiveBytes counts headers and padding', async () => {
    await withReady(async (sandbox) => {
      const summary = await sandbox.importTree(tree());
      await sandbox.stop();
      const whole = await exported(sandbox, { kind: 'subtree', path: 'q' });
      const bytes = whole.summary.archiveBytes;
      assert.ok(bytes > 30n, 'archive bytes include headers and padding');
      await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { maxArchiveBytes: bytes } });
      const error = await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { maxArchiveBytes: bytes - 1n } }).catch((e) => e);
      assert.deepEqual(error.issues?.[0].path, ['quotas', 'maxArchiveBytes']);
      assert.ok(summary.archiveBytes > 30n);
    });
  });

  test('maxPaths: counts exact files and one subtree root; 0 on a subtree rejects before the engine', async () => {
    await withReady(async (sandbox) => {
      await sandbox.importTree(tree());
      await sandbox.stop();
      await exported(sandbox, { kind: 'files', paths: ['q/a', 'q/b'] }, { quotas: { maxPaths: 2 } });
      const files = await exported(sandbox, { kind: 'files', paths: ['q/a', 'q/b'] }, { quotas: { maxPaths: 1 } }).catch((e) => e);
      assert.deepEqual(files.issues[0].path, ['quotas', 'maxPaths']);
      await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { maxPaths: 1 } });
      const zero = await exported(sandbox, { kind: 'subtree', path: 'q' }, { quotas: { maxPaths: 0 } }).catch((e) => e);
      assert.deepEqual(zero.issues[0].path, ['quotas', 'maxPaths']);
      await exported(sandbox, { kind: 'workspace' }, { quotas: { maxPaths: 0 } });
    });
  });
});

describe('bad input', () => {
  const body = (chunks) => ({ kind: 'file', path: 'x.bin', byteLength: 4, executable: false, open: () => chunks });
  const cases = [
    ['a short body', body([Buffer.from('abc')]), ['0', 'byteLength'], SandboxValidationError],
    ['an excess body', body([Buffer.from('abcde')]), ['0', 'byteLength'], SandboxValidationError],
    ['a chunk larger than chunkBytes', { ...body([Buffer.alloc(CHUNK + 1)]), byteLength: CHUNK + 1 }, ['0', 'open'], SandboxValidationError],
    ['a non-Uint8Array chunk', body(['abcd']), ['0', 'open'], SandboxValidationError],
    ['an absolute path', { kind: 'directory', path: '/etc' }, ['0', 'path'], SandboxValidationError],
    ['a .. path', { kind: 'directory', path: 'a/../b' }, ['0', 'path'], SandboxValidationError],
    ['a negative byteLength', { ...body([]), byteLength: -1 }, ['0', 'byteLength'], SandboxValidationError],
    ['an unknown kind', { kind: 'symlink', path: 'a' }, ['0', 'kind'], SandboxValidationError],
  ];
  for (const [name, entry, path, Class] of cases) {
    test(name, async () => {
      await withReady(async (sandbox) => {
        const error = await sandbox.importTree([entry]).catch((e) => e);
        assert.ok(error instanceof Class, `${error}`);
        assert.deepEqual(error.issues[0].path.map(String), path);
        // Admitted, then failed (even before a byte was sent): fenced, as the original's enterFile does.
        assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'import' });
        const listing = await runShell(sandbox, 'ls -A /sandbox/workspace').catch(() => null);
        if (listing) assert.doesNotMatch(listing.stdout, /x\.bin|etc|b\b/);
      });
    });
  }

  test('each entry is checked when it is pulled: a refused file is never opened, and nothing after a failing step is pulled', async () => {
    const cases = [
      ['an escaping path', (open) => [fileFromBytes('ok', Buffer.from('1')), { kind: 'file', path: '../out', byteLength: 1, executable: false, open }], {}, ['1', 'path']],
      ['one file past maxFiles', (open) => [fileFromBytes('ok', Buffer.from('1')), { kind: 'file', path: 'two', byteLength: 1, executable: false, open }], { maxFiles: 1 }, []],
      ['a file past maxFileBytes', (open) => [{ kind: 'file', path: 'big', byteLength: 11, executable: false, open }], { maxFileBytes: 10 }, []],
    ];
    for (const [name, entries, quotas, path] of cases) {
      await withReady(async (sandbox) => {
        let opened = 0;
        let pulledAfter = 0;
        function* source() {
          yield* entries(() => {
            opened += 1;
            throw new Error('a refused entry was opened');
          });
          pulledAfter += 1;
          yield fileFromBytes('after', Buffer.from('x'));
        }
        const error = await sandbox.importTree(source(), { quotas }).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError, `${name}: ${error}`);
        if (path.length) assert.deepEqual(error.issues[0].path.map(String), path, name);
        else assert.match(error.message + JSON.stringify(error.issues), /max(Files|FileBytes)/, name);
        assert.equal(opened, 0, `${name}: the refused entry's body was opened`);
        assert.equal(pulledAfter, 0, `${name}: entries after the refused one were pulled`);
      });
    }
    // A body that ends short fails at its end, before the next entry is pulled.
    await withReady(async (sandbox) => {
      let pulledAfter = 0;
      function* source() {
        yield { kind: 'file', path: 'short', byteLength: 5, executable: false, open: () => [Buffer.from('abc')] };
        pulledAfter += 1;
        yield fileFromBytes('after', Buffer.from('x'));
      }
      const error = await sandbox.importTree(source()).catch((e) => e);
      assert.ok(error instanceof SandboxValidationError, `${error}`);
      assert.deepEqual(error.issues[0].path.map(String), ['0', 'byteLength']);
      assert.equal(pulledAfter, 0);
    });
  });

  test('duplicate paths and a file with children fail the import', async () => {
    for (const entries of [
      [fileFromBytes('d/a', Buffer.from('1')), fileFromBytes('d/a', Buffer.from('2'))],
      [fileFromBytes('d/a', Buffer.from('1')), fileFromBytes('d/a/b', Buffer.from('2'))],
    ]) {
      await withReady(async (sandbox) => {
        const error = await sandbox.importTree(entries).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError);
        assert.equal(error.issues[0].code, 'duplicate');
        assert.deepEqual(sandbox.state, { kind: 'uncertain', operation: 'import' }, 'bytes reached the guest: execution is fenced');
        assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: sandbox.workspace }), SandboxStateError);
      });
    }
  });

  test('exporting a missing path or a directory as a file names it', async () => {
    await withReady(async (sandbox) => {
      await sandbox.importTree([{ kind: 'directory', path: 'dir' }]);
      await sandbox.stop();
      const missing = await exported(sandbox, { kind: 'files', paths: ['nope.txt'] }).catch((e) => e);
      assert.deepEqual(missing.issues[0].path, ['paths', 0]);
      assert.match(described(missing), /nope\.txt/);
      const directory = await exported(sandbox, { kind: 'files', paths: ['dir'] }).catch((e) => e);
      assert.match(described(directory), /dir is not a regular file/);
      const duplicate = await exported(sandbox, { kind: 'files', paths: ['dir', 'dir'] }).catch((e) => e);
      assert.equal(duplicate.issues[0].code, 'duplicate');
    });
  });

  test('every path of a long exact-file selection is seen; one past SANDBOX_LIMITS.exportFilePaths is refused by name', async () => {
    await withReady(async (sandbox) => {
      await sandbox.stop();
      // A duplicate at index 4,199: found only if the selection was read to its end.
      const paths = Array.from({ length: 4200 }, (_, i) => `f${i}`);
      paths[4199] = 'f0';
      let consumed = 0;
      const duplicate = await sandbox.exportTree({ kind: 'files', paths }, async () => void consumed++).catch((e) => e);
      assert.ok(duplicate instanceof SandboxValidationError, `got ${duplicate}`);
      assert.equal(duplicate.issues[0].code, 'duplicate');
      assert.equal(consumed, 0, 'nothing is delivered from a refused selection');
      const tooMany = Array.from({ length: SANDBOX_LIMITS.exportFilePaths + 1 }, (_, i) => `f${i}`);
      let refused;
      try {
        sandbox.exportTree({ kind: 'files', paths: tooMany }, async () => {});
      } catch (error) {
        refused = error;
      }
      assert.ok(refused instanceof SandboxValidationError, `got ${refused}`);
      assert.deepEqual([refused.issues[0].code, [...refused.issues[0].path]], ['too_long', ['paths']]);
      assert.match(refused.issues[0].message, /262144/);
    });
  });
});

describe('state rules and aborts', () => {
  test('import after reserveProcess, export before stop, two concurrent transfers', async () => {
    await withReady(async (sandbox) => {
      // Admission follows call order: the first call holds the transfer, the second is refused.
      for (let round = 0; round < 20; round += 1) {
        const first = sandbox.importTree([fileFromBytes(`a${round}`, Buffer.alloc(100))]);
        // A state error is thrown at the call, as in the original.
        assert.throws(() => sandbox.importTree([]), SandboxStateError);
        await first;
      }
      const pending = sandbox.importTree([fileFromBytes('admitted-at-call', Buffer.alloc(1))]);
      assert.throws(
        () => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: sandbox.workspace }),
        SandboxStateError,
        'the import holds the sandbox before importTree returns',
      );
      await pending;
      assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError);
      sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: sandbox.workspace });
      assert.throws(() => sandbox.importTree([]), SandboxStateError);
      await sandbox.stop();
      for (let round = 0; round < 20; round += 1) {
        const first = sandbox.exportTree({ kind: 'files', paths: [`a${round}`] }, async (entry) => {
          for await (const _ of entry.bytes);
        });
        assert.throws(() => sandbox.exportTree({ kind: 'workspace' }, () => {}), SandboxStateError);
        await first;
      }
      const badSelection = await sandbox.exportTree({ kind: 'subtree', path: '../x' }, () => {}).catch((e) => e);
      assert.ok(badSelection instanceof SandboxValidationError, 'a bad selection is a validation error');
      assert.equal((await sandbox.exportTree({ kind: 'files', paths: ['a0'] }, async (entry) => {
        for await (const _ of entry.bytes);
      })).files, 1n, 'a refused or invalid call leaves the next one admissible');
    });
  });

  test('aborting mid-import and mid-export leaves no spill file', async () => {
    await withReady(async (sandbox) => {
      // The workspace export below needs an entry whatever part of the aborted import landed.
      await sandbox.importTree([fileFromBytes('kept', Buffer.from('k'))]);
      const controller = new AbortController();
      async function* slow() {
        for (let i = 0; i < 1000; i++) {
          if (i === 50) controller.abort();
          yield fileFromBytes(`many/f${i}`, Buffer.from(String(i)));
        }
      }
      const error = await sandbox.importTree(slow(), { signal: controller.signal }).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError);
      assert.equal(error.code, 'cancelled');
      assert.deepEqual(readdirSync(spill), []);
      await sandbox.stop();
      const exportController = new AbortController();
      const exportError = await sandbox
        .exportTree({ kind: 'workspace' }, async () => exportController.abort(), { signal: exportController.signal })
        .catch((e) => e);
      assert.equal(exportError.code, 'cancelled');
      // The interrupted export owns its work until it settled: the slot frees a moment after
      // the call was answered (a call before that is refused with SandboxStateError).
      let late;
      for (let attempt = 0; late === undefined; attempt += 1) {
        try {
          late = await sandbox.exportTree({ kind: 'workspace' }, () => {}, { deadlineAt: Date.now() - 1 }).catch((e) => e);
        } catch (error) {
          if (error?.name !== 'SandboxStateError' || attempt > 100) throw error;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
      assert.equal(late.code, 'deadline_exceeded');
      assert.deepEqual(readdirSync(spill), []);
    });
  });

  // Bounded: without a drain every so many steps, the endless body holds the event loop and the
  // deadline's timer never fires (the test then fails at its timeout instead of hanging).
  test('a deadline ends an import whose body yields empty chunks without end', { timeout: 30_000 }, async () => {
    await withReady(async (sandbox) => {
      let pulls = 0;
      const endless = {
        kind: 'file',
        path: 'never',
        byteLength: 1,
        executable: false,
        *open() {
          for (;;) {
            pulls += 1;
            yield new Uint8Array(0);
          }
        },
      };
      const started = Date.now();
      const error = await sandbox.importTree([endless], { deadlineAt: Date.now() + 3_000 }).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError, `${error}`);
      assert.equal(error.code, 'deadline_exceeded');
      assert.ok(pulls > 1_000, `the body was pulled past several drains (${pulls} pulls)`);
      assert.ok(Date.now() - started < 15_000, 'ended near its deadline');
    });
  });

  test('a consumer that leaves bytes unread fails the export', async () => {
    await withReady(async (sandbox) => {
      await sandbox.importTree([fileFromBytes('f', Buffer.alloc(10_000), { chunkBytes: CHUNK })]);
      await sandbox.stop();
      const error = await sandbox.exportTree({ kind: 'workspace' }, () => {}).catch((e) => e);
      assert.equal(error.code, 'stream_failure');
      assert.match(error.message, /before reading all bytes of f/);
    });
  });
});

describe('hostile guest content', () => {
  test('a guest symlink to /etc/passwd fails a workspace export, naming it', async () => {
    await withReady(async (sandbox) => {
      await runShell(sandbox, 'ln -s /etc/passwd /sandbox/workspace/passwd; echo safe > /sandbox/workspace/ok.txt');
      await sandbox.stop();
      const delivered = [];
      const error = await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
        delivered.push(entry.path);
        if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      }).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError, `${error}`);
      assert.match(error.message, /passwd is a symbolic link/);
      assert.ok(!delivered.includes('passwd'));
    });
  });
});
