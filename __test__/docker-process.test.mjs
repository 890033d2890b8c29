// The Docker backend's process: exit codes, exact binary streams, EOF, limits, deadlines.
import assert from 'node:assert/strict';
import { randomBytes, createHash } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SandboxOperationError, SandboxValidationError } from 'native-sandbox';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, dockerBackend, IMAGE, leftovers, MiB, NOTHING, request, runOnce, runProcess, runShell, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('proc');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the process suite leaves no engine objects behind');
});

describe('docker process: exits and streams', () => {
  test('exit code 0 with stdout and stderr kept apart', async () => {
    const result = await runOnce(backend, 'echo out; echo err >&2; echo more');
    assert.deepEqual(result.exit, { kind: 'exited', code: 0 });
    assert.equal(result.stdout, 'out\nmore\n');
    assert.equal(result.stderr, 'err\n');
  });

  test('exit code 7', async () => {
    assert.deepEqual((await runOnce(backend, 'exit 7')).exit, { kind: 'exited', code: 7 });
  });

  test('a signal exit is reported as the signal', async () => {
    assert.deepEqual((await runOnce(backend, 'kill -TERM $$')).exit, { kind: 'signaled', signal: 'SIGTERM' });
  });

  test('ending stdin delivers EOF', async () => {
    const result = await runOnce(backend, 'wc -c', { input: 'twelve bytes' });
    assert.equal(result.stdout.trim(), '12');
  });

  test('64 MiB round trip through cat, byte for byte, with backpressure', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const payload = randomBytes(64 * MiB);
      const expected = createHash('sha256').update(payload).digest('hex');
      const hash = createHash('sha256');
      let received = 0;
      streams.stdout.on('data', (chunk) => {
        hash.update(chunk);
        received += chunk.length;
      });
      const ended = new Promise((resolve, reject) => {
        streams.stdout.on('end', resolve);
        streams.stdout.on('error', reject);
      });
      for (let offset = 0; offset < payload.length; offset += 256 * 1024) {
        if (!streams.stdin.write(payload.subarray(offset, offset + 256 * 1024))) {
          await new Promise((resolve) => streams.stdin.once('drain', resolve));
        }
      }
      streams.stdin.end();
      await ended;
      assert.equal(received, payload.length);
      assert.equal(hash.digest('hex'), expected);
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    } finally {
      await sandbox.destroy();
    }
  });

  test('empty writes between chunks and last before end are no failure', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const payload = randomBytes(8 * MiB);
      const chunks = [];
      streams.stdout.on('data', (chunk) => chunks.push(chunk));
      const ended = new Promise((resolve, reject) => {
        streams.stdout.on('end', resolve);
        streams.stdout.on('error', reject);
      });
      const failed = new Promise((resolve) => streams.stdin.once('error', resolve));
      // Written without waiting for drain, so the empty writes also land behind staged bytes.
      for (let offset = 0; offset < payload.length; offset += 64 * 1024) {
        streams.stdin.write(payload.subarray(offset, offset + 64 * 1024));
        streams.stdin.write(Buffer.alloc(0));
        if (offset % (1024 * 1024) === 0 && streams.stdin.writableNeedDrain) await new Promise((resolve) => streams.stdin.once('drain', resolve));
      }
      streams.stdin.write('');
      streams.stdin.end();
      const outcome = await Promise.race([ended.then(() => 'ended'), failed]);
      assert.equal(outcome, 'ended');
      assert.ok(Buffer.concat(chunks).equals(payload), 'cat echoed every byte in order');
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    } finally {
      await sandbox.destroy();
    }
  });

  test('a stalled consumer does not grow host memory past the staging bound', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: ['/dev/zero'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      global.gc?.();
      const before = globalThis.process.memoryUsage().rss;
      await sleep(1500);
      const grown = globalThis.process.memoryUsage().rss - before;
      // Unbounded, 1.5 s of /dev/zero would be hundreds of MiB.
      assert.ok(grown < 48 * MiB, `rss grew by ${grown} bytes while nobody read stdout`);
      const first = await new Promise((resolve) => streams.stdout.once('data', resolve));
      assert.ok(first.length > 0 && first.every((b) => b === 0));
      await sandbox.stop();
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' });
    } finally {
      await sandbox.destroy();
    }
  });

  // An engine holds a killed container for as long as its attached output is unread: the
  // stop must read on itself, or it waits for ever.
  test('a stop settles while stdout is unread: its staged bytes come first, then cancelled for what did not fit', async () => {
    const sandbox = await backend.reserve(request((p) => (p.deadlines.cleanupMs = 10_000)), { kind: 'in_process' }).start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: ['/dev/zero'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      streams.stdin.end();
      // Long enough for the staging, the connection and the guest's pipe to fill.
      await sleep(1000);
      await sandbox.stop();
      assert.equal(sandbox.state.kind, 'stopped');
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'stop' });
      let read = 0;
      const error = await new Promise((resolve, reject) => {
        streams.stdout.on('data', (chunk) => {
          assert.ok(chunk.every((b) => b === 0));
          read += chunk.length;
        });
        streams.stdout.on('error', resolve);
        streams.stdout.on('end', () => reject(new Error(`stdout ended after ${read} bytes without saying that bytes were discarded`)));
      });
      assert.ok(error instanceof SandboxOperationError, String(error));
      assert.equal(error.code, 'cancelled');
      assert.match(error.message, /stdout was unread/);
      // The staging (1 MiB) was full when the stop came: full but for less than one piece (64 KiB
      // and its bookkeeping), each staged piece also counting its bookkeeping (128).
      assert.ok(read > MiB - 80 * 1024, `what the staging held was delivered first (${read} bytes)`);
      // stderr lost nothing: it ends as usual.
      assert.equal((await collect(streams.stderr)).length, 0);
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('docker process: an executable that cannot run', () => {
  test('missing, a directory or without execute permission: the start fails naming executable; a link to a program runs', async () => {
    const cases = [
      ['/no/such/program', /^\/no\/such\/program does not exist in the sandbox's image or workspace: /],
      ['/tmp', /^\/tmp is a directory: /],
      ['/etc/passwd', /^\/etc\/passwd is not executable \(no execute permission bit is set\): /],
    ];
    for (const [executable, message] of cases) {
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      try {
        const error = await sandbox.reserveProcess({ executable, args: [], env: {}, cwd: sandbox.workspace }).start().catch((e) => e);
        assert.ok(error instanceof SandboxValidationError, `${executable}: ${error}`);
        assert.deepEqual(error.issues.map((issue) => issue.path), [['executable']], executable);
        assert.match(error.issues[0].message, message);
      } finally {
        await sandbox.destroy();
      }
    }
    // A symbolic link to a program is followed (an image of its own holds one; busybox picks
    // its applet by the link's name).
    const linked = `${namespace}-links:1`;
    const context = mkdtempSync(join(tmpdir(), 'native-sandbox-links-'));
    try {
      writeFileSync(join(context, 'Dockerfile'), `FROM ${IMAGE}\nRUN ["/bin/mkdir", "-p", "/opt/linked"]\nRUN ["/bin/ln", "-s", "/bin/echo", "/opt/linked/echo"]\n`);
      execFileSync('docker', ['build', '-q', '-t', linked, context], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DOCKER_BUILDKIT: '0' } });
      const sandbox = await dockerBackend(namespace, { image: linked }).reserve(request(), { kind: 'in_process' }).start();
      try {
        const { stdout, exit } = await runProcess(sandbox, '/opt/linked/echo', ['through the link']);
        assert.equal(stdout, 'through the link\n');
        assert.deepEqual(exit, { kind: 'exited', code: 0 });
      } finally {
        await sandbox.destroy();
      }
    } finally {
      rmSync(context, { recursive: true, force: true });
      execFileSync('docker', ['image', 'rm', '-f', linked], { stdio: 'ignore' });
    }
  });
});

describe('docker process: stream limits', () => {
  test('a fast writer past maxOutputBytes: the owned stop settles', async () => {
    const sandbox = await backend
      .reserve(request((p) => Object.assign(p.streams, { maxOutputBytes: 4096 })), { kind: 'in_process' })
      .start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: ['/dev/zero'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      streams.stdin.end();
      streams.stderr.on('error', () => {}).resume();
      const error = await collect(streams.stdout).catch((e) => e);
      assert.equal(error.code, 'output_limit');
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'output_limit' });
      // Joins the owned stop (within cleanupMs): it succeeded.
      await sandbox.stop();
      assert.equal(sandbox.state.kind, 'stopped');
    } finally {
      await sandbox.destroy();
    }
  });

  test('maxOutputBytes 0 fails the output with output_limit and stops the sandbox', async () => {
    const sandbox = await backend
      .reserve(request((p) => (p.streams.maxOutputBytes = 0)), { kind: 'in_process' })
      .start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo x; sleep 30'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      // Both output streams fail: a reader of either one learns that output was cut off.
      const stderrError = collect(streams.stderr).catch((e) => e);
      const error = await collect(streams.stdout).catch((e) => e);
      assert.equal((await stderrError).code, 'output_limit');
      assert.ok(error instanceof SandboxOperationError, `got ${error}`);
      assert.equal(error.code, 'output_limit');
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'output_limit' });
      for (let i = 0; i < 50 && sandbox.state.kind !== 'stopped'; i++) await sleep(20);
      assert.equal(sandbox.state.kind, 'stopped');
    } finally {
      await sandbox.destroy();
    }
  });

  test('maxOutputBytes counts stdout and stderr together', async () => {
    const sandbox = await backend
      .reserve(request((p) => (p.streams.maxOutputBytes = 10)), { kind: 'in_process' })
      .start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'printf 123456; printf 78901 >&2; sleep 30'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const [out, err] = await Promise.allSettled([collect(streams.stdout), collect(streams.stderr)]);
      assert.ok([out, err].some((r) => r.status === 'rejected' && r.reason.code === 'output_limit'));
    } finally {
      await sandbox.destroy();
    }
  });

  test('maxStdinBytes rejects the write that crosses it with input_limit', async () => {
    const sandbox = await backend
      .reserve(request((p) => (p.streams.maxStdinBytes = 8)), { kind: 'in_process' })
      .start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      streams.stdout.resume();
      const failed = new Promise((resolve) => streams.stdin.once('error', resolve));
      streams.stdin.write('12345');
      streams.stdin.write('67890');
      const error = await failed;
      assert.equal(error.code, 'input_limit');
      assert.deepEqual(await streams.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'input_limit' });
    } finally {
      await sandbox.destroy();
    }
  });

  test('maxBufferedInputBytes rejects a write that would queue past it, even ignoring backpressure', async () => {
    const sandbox = await backend
      .reserve(request((p) => Object.assign(p.streams, { maxBufferedInputBytes: 64 * 1024, highWaterMark: 16 * 1024 })), { kind: 'in_process' })
      .start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 30'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const failed = new Promise((resolve) => streams.stdin.once('error', resolve));
      for (let i = 0; i < 16; i++) streams.stdin.write(Buffer.alloc(16 * 1024));
      const error = await failed;
      assert.ok(error instanceof SandboxOperationError);
      assert.equal(error.code, 'input_limit');
    } finally {
      await sandbox.destroy();
    }
  });

  test('the execution deadline stops a sleep and the whole workload, and what came before is kept', async () => {
    const sandbox = await backend
      .reserve(request((p) => (p.execution = { kind: 'deadline', timeoutMs: 1_000 })), { kind: 'in_process' })
      .start();
    try {
      const result = await runShell(sandbox, 'echo before; echo err-before >&2; echo kept > out.txt; sleep 60 & sleep 60');
      assert.deepEqual(result.exit, { kind: 'unavailable', reason: 'sandbox_stopped', cause: 'deadline_exceeded' });
      assert.equal(result.stdout, 'before\n', 'output written before the deadline is delivered');
      assert.equal(result.stderr, 'err-before\n');
      assert.ok(['stopping', 'stopped'].includes(sandbox.state.kind), `state ${sandbox.state.kind}`);
      await sandbox.stop();
      assert.equal(sandbox.state.kind, 'stopped');
      const files = {};
      await sandbox.exportTree({ kind: 'files', paths: ['out.txt'] }, async (entry) => {
        const chunks = [];
        for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
        files[entry.path] = Buffer.concat(chunks).toString();
      });
      assert.deepEqual(files, { 'out.txt': 'kept\n' }, 'the workspace outlives the deadline');
    } finally {
      await sandbox.destroy();
    }
  });

  test('one process per sandbox, started once', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const process = sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: sandbox.workspace });
      assert.equal(process.stopScope, 'sandbox');
      assert.ok(Object.isFrozen(process));
      assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: '/' }), { name: 'SandboxStateError' });
      const streams = await process.start();
      await assert.rejects(process.start(), { name: 'SandboxStateError' });
      streams.stdout.resume();
      streams.stderr.resume();
      assert.deepEqual(await streams.exit, { kind: 'exited', code: 0 });
    } finally {
      await sandbox.destroy();
    }
  });

  test('a process recipe with a relative path is refused by the parser', async () => {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      assert.throws(() => sandbox.reserveProcess({ executable: 'sh', args: [], env: {}, cwd: sandbox.workspace }), { name: 'SandboxValidationError' });
    } finally {
      await sandbox.destroy();
    }
  });
});

describe('docker process: out of memory', () => {
  test('a leader killed by the memory limit exits as SIGKILL with reason out_of_memory', async () => {
    // busybox tail keeps its one endless line (no newline in /dev/zero) in memory until the
    // kernel kills it at the 32 MiB limit.
    const result = await runOnce(backend, 'exec tail < /dev/zero', { edit: (p) => (p.resources.memoryBytes = 32 * MiB) });
    assert.deepEqual(result.exit, { kind: 'signaled', signal: 'SIGKILL', reason: 'out_of_memory' });
  });

  test('an ordinary SIGKILL carries no reason', async () => {
    assert.deepEqual((await runOnce(backend, 'kill -KILL $$')).exit, { kind: 'signaled', signal: 'SIGKILL' });
  });
});
