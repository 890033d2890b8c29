// The main job: a sandbox on the local Docker engine, end to end. Start an owned, hardened
// sandbox, run one process that reads stdin and writes stdout and stderr, show what came back
// and how it exited, destroy, and check that nothing was left on the engine.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS, withSandbox } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';

const image = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const namespace = `demo-${process.pid}`;
const spillDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-demo-'));

const backend = createDockerSandboxBackend({ image, namespace, spillDirectory });
/** @type {import('native-sandbox').SandboxRequestInput} */
const request = {
  policy: {
    resources: { cpus: 1, memoryBytes: 256 * 1024 * 1024, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 * 1024, tempBytes: 64 * 1024 * 1024 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
    execution: { kind: 'deadline', timeoutMs: 60_000 },
  },
};

/** @param {import('node:stream').Readable} stream */
function collect(stream) {
  /** @type {Buffer[]} */
  const chunks = [];
  stream.on('data', (chunk) => chunks.push(chunk));
  return new Promise((resolve, reject) => {
    stream.on('end', () => resolve(Buffer.concat(chunks).toString()));
    stream.on('error', reject);
  });
}

const started = Date.now();
const report = await withSandbox(
  backend,
  request,
  async (sandbox) => {
    console.log(`sandbox ${sandbox.id} ready in ${Date.now() - started} ms`);
    console.log('effective policy:', JSON.stringify(sandbox.effective));
    const process = sandbox.reserveProcess({
      executable: '/bin/sh',
      args: ['-c', 'echo "uid=$(id -u) cwd=$(pwd) net=$(ls /sys/class/net)"; tr a-z A-Z; echo "done reading stdin" >&2; exit 3'],
      env: { GREETING: 'hello' },
      cwd: sandbox.workspace,
    });
    const streams = await process.start();
    const stdout = collect(streams.stdout);
    const stderr = collect(streams.stderr);
    streams.stdin.end('this line went through the sandbox\n');
    const exit = await streams.exit;
    const result = { stdout: await stdout, stderr: await stderr, exit };
    await sandbox.stop();
    return result;
  },
  { recovery: { kind: 'in_process' } },
);

console.log('stdout:', JSON.stringify(report.stdout));
console.log('stderr:', JSON.stringify(report.stderr));
console.log('exit:  ', JSON.stringify(report.exit));

const label = `label=dev.native-sandbox.namespace=${namespace}`;
const count = (/** @type {string[]} */ args) => execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean).length;
const left = {
  containers: count(['ps', '-aq', '--filter', label]),
  volumes: count(['volume', 'ls', '-q', '--filter', label]),
  networks: count(['network', 'ls', '-q', '--filter', label]),
};
rmSync(spillDirectory, { recursive: true, force: true });
console.log('left on the engine:', JSON.stringify(left));
if (left.containers + left.volumes + left.networks > 0) {
  console.error('demo: engine objects were left behind');
  process.exit(1);
}
