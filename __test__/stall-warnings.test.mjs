// Stalls said aloud: a guest held back by a stream nobody reads, or by a stdin the host never
// ends, gets one warning per stream (a code of its own, the sandbox, the stream and the remedy)
// and a NODE_DEBUG line; what the streams do is unchanged.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const helpers = new URL('./docker-helpers.mjs', import.meta.url).href;

/** Runs `source` as a module in a child with NODE_DEBUG=native-sandbox: its status and output. */
function runChild(source) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      env: { ...process.env, NODE_DEBUG: 'native-sandbox' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

test('unread stderr and an open stdin each get one warning and a debug line; the streams still deliver everything', async () => {
  const { status, stdout, stderr } = await runChild(`
    import { dockerBackend, request, uniqueNamespace, leftovers } from ${JSON.stringify(helpers)};
    const warnings = [];
    process.on('warning', (w) => String(w.code).startsWith('NATIVE_SANDBOX_') && warnings.push({ code: w.code, message: w.message }));
    const namespace = uniqueNamespace('stall');
    const backend = dockerBackend(namespace);
    const text = (stream) => new Promise((resolve, reject) => {
      let n = 0;
      stream.on('data', (c) => (n += c.length));
      stream.on('end', () => resolve(n));
      stream.on('error', reject);
    });
    // Counts until \`bytes\` arrived (the guest then sleeps on, so its output never ends).
    const count = (stream, bytes) => new Promise((resolve, reject) => {
      let n = 0;
      stream.on('data', (c) => (n += c.length) >= bytes && resolve(n));
      stream.on('error', reject);
    });
    const waitFor = async (code) => {
      while (!warnings.some((w) => w.code === code)) await new Promise((r) => setTimeout(r, 100));
    };
    // 32 MB to stderr while the host reads only stdout (far past the staging and what the
    // engine's connection buffers, so the guest blocks). The guest goes on running: the engine
    // may take its output faster than the staging (the guest then never blocks), and drops what
    // an attached client has not read 2 s after the process exited.
    const one = await backend.reserve(request(), { kind: 'in_process' }).start();
    const loud = await one.reserveProcess({ executable: '/bin/sh', args: ['-c', 'head -c 32000000 /dev/zero >&2; echo done; exec sleep 600'], env: {}, cwd: one.workspace }).start();
    loud.stdin.end();
    const out = count(loud.stdout, 5);
    // A guest that reads stdin to EOF, given one line and never the end.
    const two = await backend.reserve(request(), { kind: 'in_process' }).start();
    const reader = await two.reserveProcess({ executable: '/bin/sh', args: ['-c', 'wc -c'], env: {}, cwd: two.workspace }).start();
    reader.stdin.write('one line\\n');
    const counted = text(reader.stdout);
    reader.stderr.resume();
    await Promise.all([waitFor('NATIVE_SANDBOX_OUTPUT_STALLED'), waitFor('NATIVE_SANDBOX_STDIN_OPEN')]);
    // The remedies work: nothing was lost.
    const [err, outBytes] = await Promise.all([count(loud.stderr, 32000000), out]);
    reader.stdin.end();
    await counted;
    await one.destroy();
    console.log(JSON.stringify({ err, outBytes, exits: [await loud.exit, await reader.exit], warnings, ids: [one.id, two.id] }));
    await two.destroy();
    console.log(JSON.stringify(leftovers(namespace)));
  `);
  assert.equal(status, 0, stderr);
  const [report, left] = stdout.trim().split('\n').map((line) => JSON.parse(line));
  assert.deepEqual(left, { containers: [], volumes: [], networks: [] });
  assert.equal(report.err, 32_000_000, 'all of stderr is delivered once read');
  assert.equal(report.outBytes, 5);
  assert.deepEqual(report.exits, [{ kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' }, { kind: 'exited', code: 0 }]);
  const [loudId, readerId] = report.ids;
  assert.deepEqual(
    report.warnings.map((w) => w.code).sort(),
    ['NATIVE_SANDBOX_OUTPUT_STALLED', 'NATIVE_SANDBOX_STDIN_OPEN'],
    'one warning per stalled stream, and none for a stream that was read',
  );
  const output = report.warnings.find((w) => w.code === 'NATIVE_SANDBOX_OUTPUT_STALLED');
  assert.equal(
    output.message,
    `native-sandbox: sandbox ${loudId}: the process's stderr has been full and unread for 10 s, so the process waits to write more: read both streams at once (Promise.all), or stderr.resume() to drop it (see native-sandbox's docs/process-streams.md#read-both-streams)`,
  );
  const input = report.warnings.find((w) => w.code === 'NATIVE_SANDBOX_STDIN_OPEN');
  assert.match(input.message, new RegExp(`^native-sandbox: sandbox ${readerId}: the process has been quiet for 10 s while its stdin is open; .*stdin\\.end\\(\\)`));
  assert.match(stderr, new RegExp(`NATIVE-SANDBOX \\d+: ${loudId} process stderr stalled`));
  assert.match(stderr, new RegExp(`NATIVE-SANDBOX \\d+: ${readerId} process stdin stalled`));
});
