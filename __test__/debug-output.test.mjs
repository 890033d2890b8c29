// NODE_DEBUG=native-sandbox: one line per lifecycle step, process start and exit and transfer
// (outcome, duration, counts), and never a file's contents, an environment value or a path.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { leftovers, NOTHING, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('debug');
const child = fileURLToPath(new URL('./fixtures/debug-child.mjs', import.meta.url));
after(() => assert.deepEqual(leftovers(namespace), NOTHING));

function run(debug) {
  const env = { ...process.env, DEBUG_NAMESPACE: namespace };
  delete env.NODE_DEBUG;
  if (debug) env.NODE_DEBUG = 'native-sandbox';
  const ran = spawnSync(process.execPath, [child], { env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(ran.status, 0, ran.stderr);
  return ran.stderr;
}

test('without NODE_DEBUG nothing is printed', () => {
  assert.equal(run(false), '');
});

test('with NODE_DEBUG=native-sandbox: one line per step, in order, with counts and no caller value', () => {
  const all = run(true).trim().split('\n');
  // The engine requests behind the steps: method, path (never its query), status, duration.
  const requests = all.filter((line) => /^NATIVE-SANDBOX \d+: engine /.test(line));
  assert.ok(requests.length >= 10, all.join('\n'));
  for (const line of requests) assert.match(line, /^NATIVE-SANDBOX \d+: engine (GET|POST|PUT|DELETE|HEAD) \/[^\s?]* (\d{3}|failed) \d+ ms$/);
  for (const [method, path] of [['POST', '/containers/create'], ['POST', '/volumes/create'], ['DELETE', '/volumes/']]) {
    assert.ok(requests.some((line) => new RegExp(`engine ${method} (/v[0-9.]+)?${path}`).test(line)), `${method} ${path}`);
  }
  const lines = all.filter((line) => !requests.includes(line));
  const steps = lines.map((line) => line.replace(/^NATIVE-SANDBOX \d+: (sbx-[0-9a-f]+ )?/, '').replace(/ \d+ ms$/, '').replace(/\(pid \d+\)$/, '(pid)').replace(/\(told \d+ lines\)$/, '(told N lines)'));
  assert.deepEqual(steps, [
    // The Rust core's line: the reaper starts with the first in_process sandbox's first record.
    'reaper started (pid)',
    'reaper ready (told N lines)',
    'start ok',
    'import ok 1 files, 0 directories, 20 bytes',
    'process start ok',
    'process exit exited 0',
    'stop ok',
    'export ok 1 files, 1 directories, 20 bytes',
    'destroy ok',
    // importSandboxDirectory and exportSandboxDirectory: the same lines.
    'start ok',
    'import ok 1 files, 1 directories, 20 bytes',
    'stop ok',
    'export ok 1 files, 1 directories, 20 bytes',
    'destroy ok',
  ]);
  const text = all.join('\n');
  for (const secret of ['file-secret-contents', 'tok-secret-123', 'API_TOKEN', 'secret-dir', 'notes.txt', 'debug-child-', 'project']) assert.ok(!text.includes(secret), secret);
});
