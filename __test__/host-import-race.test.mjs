// importSandboxDirectory reads only the tree it was given, on the Docker backend (the native
// import) and on a JavaScript driver (importTree fed by the same native walk): a directory inside
// the root swapped for a link to a directory outside it while the import runs never leads the
// walk outside. The import then fails, or imports only what was inside.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';
import { localProcessBackend } from './fixtures/local-process-backend.mjs';

const namespace = uniqueNamespace('host-race');
const local = localProcessBackend();
const work = mkdtempSync(join(tmpdir(), 'native-sandbox-host-race-'));
after(async () => {
  await local.close();
  rmSync(work, { recursive: true, force: true });
  assert.deepEqual(leftovers(namespace), NOTHING);
});

const FILES = 3_000;
const INSIDE = Buffer.alloc(16 * 1024, 'i');
const OUTSIDE = Buffer.alloc(16 * 1024, 'O');
// When the swap comes, into the import (ms): spread so that some land mid-walk.
const DELAYS = [30, 80, 150, 250, 400, 550];

/** A root holding `a/` with FILES files, and beside it (outside) a directory of the same names. */
function trees(label) {
  const base = join(work, label);
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  for (const directory of [join(root, 'a'), outside]) mkdirSync(directory, { recursive: true });
  writeFileSync(join(root, 'top.txt'), 'inside\n');
  for (let i = 0; i < FILES; i += 1) {
    const name = `f${String(i).padStart(5, '0')}`;
    writeFileSync(join(root, 'a', name), INSIDE);
    writeFileSync(join(outside, name), OUTSIDE);
  }
  return { base, root, outside };
}

/** Every regular file under `directory`. */
function listFiles(directory) {
  return readdirSync(directory, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name));
}

const BACKENDS = [
  ['the Docker backend', () => dockerBackend(namespace), request()],
  ['a JavaScript driver', () => local.backend, request((policy) => (policy.network = { kind: 'outbound' }))],
];

for (const [label, makeBackend, policy] of BACKENDS) {
  test(`${label}: a directory swapped for a link mid-import never brings in what is outside the root`, { timeout: 600_000 }, async () => {
    let swappedMidImport = 0;
    for (const [round, delay] of DELAYS.entries()) {
      const { base, root, outside } = trees(`${label.replaceAll(' ', '-')}-${round}`);
      const sandbox = await makeBackend().reserve(policy, { kind: 'in_process' }).start();
      try {
        let settled = false;
        const imported = importSandboxDirectory(sandbox, root).then(
          (summary) => ({ summary }),
          (error) => ({ error }),
        );
        imported.finally(() => (settled = true));
        await new Promise((resolve) => setTimeout(resolve, delay));
        if (!settled) swappedMidImport += 1;
        renameSync(join(root, 'a'), join(base, 'moved'));
        symlinkSync(outside, join(root, 'a'));
        const outcome = await imported;
        if (outcome.error) assert.equal(outcome.error.name, 'SandboxOperationError', String(outcome.error));
        // Whatever arrived came from inside the root: the workspace, exported to the host.
        await sandbox.stop();
        const { directory } = await exportSandboxDirectory(sandbox, { kind: 'workspace' }, join(base, 'exported'));
        const files = listFiles(directory);
        const fromOutside = files.filter((file) => readFileSync(file).includes('O'));
        assert.equal(fromOutside.length, 0, `round ${round}: ${fromOutside.length} of ${files.length} files came from outside the root (${outcome.error ? 'failed' : 'succeeded'})`);
        if (!outcome.error) assert.equal(files.length, FILES + 1, `round ${round}: a successful import holds the whole tree it walked`);
      } finally {
        await sandbox.destroy();
        rmSync(base, { recursive: true, force: true });
      }
    }
    assert.ok(swappedMidImport >= 2, `the swap came while the import ran in ${swappedMidImport} of ${DELAYS.length} rounds`);
  });
}
