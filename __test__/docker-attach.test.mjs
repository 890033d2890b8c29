// A process's attached streams, read through the owner's own attach connection: every byte, in
// each stream's order, however the engine frames it, over every way of naming a local engine.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { collect, IMAGE, leftovers, NOTHING, request, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { described } from './helpers.mjs';
import { startEngineFront } from './engine-front.mjs';

const namespaces = [];
// A socket in front of the engine's own, counting the attach requests that come through it: a
// backend that used another address for its attach connections would leave the count unchanged.
const front = await startEngineFront();
const aliased = front.path;

after(() => {
  front.close();
  for (const namespace of namespaces) assert.deepEqual(leftovers(namespace), NOTHING, namespace);
});

function backend(label, engine) {
  const namespace = uniqueNamespace(label);
  namespaces.push(namespace);
  return createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), ...(engine ? { engine } : {}) });
}

/** Runs `script` with `input` on stdin; stdout and stderr as Buffers, and the exit. */
async function run(sandbox, script, input) {
  const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: sandbox.workspace });
  const streams = await process.start();
  const stdout = collect(streams.stdout);
  const stderr = collect(streams.stderr);
  streams.stdin.end(input);
  const [out, err, exit] = await Promise.all([stdout, stderr, streams.exit]);
  return { out, err, exit };
}

async function withSandbox(label, engine, use) {
  const sandbox = await backend(label, engine).reserve(request(), { kind: 'in_process' }).start();
  try {
    return await use(sandbox);
  } finally {
    await sandbox.destroy();
  }
}

test('binary stdin comes back byte for byte on stdout over each way of naming a local engine', async () => {
  const input = randomBytes(3 * 1024 * 1024 + 7);
  const ways = [
    ['socket-path', { socketPath: aliased }],
    ['unix-url', { url: `unix://${aliased}` }],
  ];
  for (const [label, engine] of ways) {
    const before = front.counts.attaches;
    const { out, err, exit } = await withSandbox(label, engine, (sandbox) => run(sandbox, 'cat; echo done >&2', input));
    assert.ok(front.counts.attaches > before, `${label}: the process was attached through the address given`);
    assert.deepEqual(exit, { kind: 'exited', code: 0 }, label);
    assert.ok(out.equals(input), `${label}: stdout is stdin (${out.length} of ${input.length} bytes)`);
    assert.equal(err.toString(), 'done\n', label);
  }
  const saved = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = `unix://${aliased}`;
  let docker;
  try {
    docker = backend('docker-host');
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
  const sandbox = await docker.reserve(request(), { kind: 'in_process' }).start();
  try {
    const before = front.counts.attaches;
    const { out, exit } = await run(sandbox, 'cat', input);
    assert.ok(front.counts.attaches > before, 'DOCKER_HOST: the process was attached through it');
    assert.deepEqual(exit, { kind: 'exited', code: 0 });
    assert.ok(out.equals(input), 'DOCKER_HOST: stdout is stdin');
  } finally {
    await sandbox.destroy();
  }
});

test('interleaved stdout and stderr, small writes and large ones, each arrive whole and in order', async () => {
  // Thousands of small frames of both streams, close together, then one large run of stdout.
  const script = 'i=0; while [ $i -lt 3000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; head -c 5000000 /dev/zero; echo end';
  const { out, err, exit } = await withSandbox('interleaved', undefined, (sandbox) => run(sandbox, script, ''));
  assert.deepEqual(exit, { kind: 'exited', code: 0 });
  const lines = (prefix) => Array.from({ length: 3000 }, (_, i) => `${prefix} ${i}\n`).join('');
  const expectedOut = Buffer.concat([Buffer.from(lines('out')), Buffer.alloc(5_000_000), Buffer.from('end\n')]);
  assert.equal(out.length, expectedOut.length);
  assert.ok(out.equals(expectedOut), 'stdout whole and in order');
  assert.equal(err.toString(), lines('err'));
});

test('an engine name no client can reach is refused at the backend, naming where it came from', () => {
  assert.throws(() => backend('bad-url', { url: 'ssh://engine.example' }), (e) => e.name === 'SandboxValidationError' && /engine\.url: must start with/.test(described(e)));
  const saved = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = 'ssh://engine.example';
  try {
    assert.throws(() => backend('bad-docker-host'), /DOCKER_HOST ssh:\/\/engine\.example/);
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
});

test('an attach connection that ends while the process still runs fails its streams, never a clean end with output missing', async () => {
  await withSandbox('cut-attach', { socketPath: aliased }, async (sandbox) => {
    const process = sandbox.reserveProcess({
      executable: '/bin/sh',
      args: ['-c', 'i=0; while [ $i -lt 30 ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done'],
      env: {},
      cwd: sandbox.workspace,
    });
    const { stdin, stdout, stderr, exit } = await process.start();
    stdin.end();
    const failures = [stdout, stderr].map((stream) => {
      stream.resume();
      return new Promise((resolve) => {
        stream.on('error', resolve);
        stream.on('end', () => resolve(null));
      });
    });
    let seen = '';
    await new Promise((resolve) => {
      stdout.on('data', function lines(chunk) {
        seen += chunk;
        if (seen.split('\n').length > 5) {
          stdout.off('data', lines);
          resolve();
        }
      });
    });
    front.cutAttaches();
    for (const failure of await Promise.all(failures)) {
      assert.ok(failure, 'the stream failed instead of ending');
      assert.equal(failure.code, 'stream_failure');
      assert.match(failure.message, /attach connection ended while the process was still running/);
    }
    // The guest went on: its own fate still arrives.
    assert.deepEqual(await exit, { kind: 'exited', code: 0 });
  });
});
