// onProgress on the four transfer entry points of the Docker backend: 200 MB each way reports
// monotonic progress at least three times and ends at the summary's totals; a callback that
// throws fails the transfer cleanly, with nothing left.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileFromBytes } from 'native-sandbox';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';
import { dockerBackend, leftovers, MiB, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('progress');
const backend = dockerBackend(namespace);
const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-progress-'));
after(() => {
  rmSync(scratch, { recursive: true, force: true });
  assert.deepEqual(leftovers(namespace), NOTHING);
});

const FILES = 50;
const body = Buffer.alloc(4 * MiB, 7);

/** A recorder for onProgress and the checks every report must pass. */
function recorder() {
  const seen = [];
  return {
    onProgress: (progress) => seen.push(progress),
    check(summary, what) {
      assert.ok(seen.length >= 3, `${what}: ${seen.length} reports`);
      for (const [i, progress] of seen.entries()) {
        assert.equal(typeof progress.files, 'bigint');
        assert.equal(typeof progress.bytes, 'bigint');
        if (i > 0) assert.ok(progress.files >= seen[i - 1].files && progress.bytes >= seen[i - 1].bytes, `${what}: monotonic`);
      }
      assert.deepEqual({ ...seen.at(-1) }, { files: summary.files, bytes: summary.fileBytes }, `${what}: ends at the totals`);
    },
  };
}

test('importTree and exportTree report monotonic progress and end at the totals', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const imported = recorder();
    const summary = await sandbox.importTree(
      Array.from({ length: FILES }, (_, i) => fileFromBytes(`big/f${i}`, body)),
      { onProgress: imported.onProgress },
    );
    assert.equal(summary.fileBytes, BigInt(FILES * body.length));
    imported.check(summary, 'importTree');
    await sandbox.stop();
    const exported = recorder();
    const out = await sandbox.exportTree(
      { kind: 'workspace' },
      async (entry) => {
        if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      },
      { onProgress: exported.onProgress },
    );
    exported.check(out, 'exportTree');
  } finally {
    await sandbox.destroy();
  }
});

test('importSandboxDirectory and exportSandboxDirectory report progress the same way', async () => {
  const source = join(scratch, 'source');
  mkdirSync(source);
  for (let i = 0; i < FILES; i++) writeFileSync(join(source, `f${i}`), body);
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const imported = recorder();
    const summary = await importSandboxDirectory(sandbox, source, { onProgress: imported.onProgress });
    imported.check(summary, 'importSandboxDirectory');
    await sandbox.stop();
    const exported = recorder();
    const result = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, join(scratch, 'out'), { onProgress: exported.onProgress });
    exported.check(result.summary, 'exportSandboxDirectory');
  } finally {
    await sandbox.destroy();
  }
});

test('a callback that throws fails the transfer with its error; nothing is left', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const failing = new Error('progress consumer broke');
    const error = await sandbox
      .importTree(
        Array.from({ length: FILES }, (_, i) => fileFromBytes(`big/f${i}`, body)),
        {
          onProgress: () => {
            throw failing;
          },
        },
      )
      .catch((e) => e);
    assert.equal(error, failing);
  } finally {
    await sandbox.destroy();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});
