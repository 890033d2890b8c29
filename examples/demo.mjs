// The main job: a sandbox on the local Docker engine, end to end. Start an owned, hardened
// sandbox, import a small project directory, run one process that reads it and stdin and writes
// results, stdout and stderr, stop, export the results to a new host directory, destroy, and
// check that nothing was left on the engine.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS, withSandbox } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';

const image = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const namespace = `demo-${process.pid}`;
const spillDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-demo-'));
const hostRoot = mkdtempSync(join(tmpdir(), 'native-sandbox-demo-host-'));
const project = join(hostRoot, 'project');
mkdirSync(join(project, 'src'), { recursive: true });
writeFileSync(join(project, 'src', 'words.txt'), 'sandbox\nnative\nrust\nnode\n');
writeFileSync(join(project, 'README'), 'a tiny project to work on\n');

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
    const imported = await importSandboxDirectory(sandbox, project);
    console.log(`imported ${imported.files} files, ${imported.fileBytes} bytes`);
    const process = sandbox.reserveProcess({
      executable: '/bin/sh',
      args: ['-c', 'echo "uid=$(id -u) cwd=$(pwd) net=$(ls /sys/class/net)"; tr a-z A-Z; mkdir -p results; sort src/words.txt > results/sorted.txt; wc -l < src/words.txt > results/count.txt; echo "done reading stdin" >&2; exit 3'],
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
    const results = await exportSandboxDirectory(sandbox, { kind: 'subtree', path: 'results' }, join(hostRoot, 'output'));
    return { ...result, results };
  },
  { recovery: { kind: 'in_process' } },
);

console.log('stdout:', JSON.stringify(report.stdout));
console.log('stderr:', JSON.stringify(report.stderr));
console.log('exit:  ', JSON.stringify(report.exit));
console.log(`exported to ${report.results.directory}: sorted.txt = ${JSON.stringify(readFileSync(join(report.results.directory, 'results', 'sorted.txt'), 'utf8'))}`);

const label = `label=dev.native-sandbox.namespace=${namespace}`;
const count = (/** @type {string[]} */ args) => execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean).length;
const left = {
  containers: count(['ps', '-aq', '--filter', label]),
  volumes: count(['volume', 'ls', '-q', '--filter', label]),
  networks: count(['network', 'ls', '-q', '--filter', label]),
};
rmSync(spillDirectory, { recursive: true, force: true });
rmSync(hostRoot, { recursive: true, force: true });
console.log('left on the engine:', JSON.stringify(left));
if (left.containers + left.volumes + left.networks > 0) {
  console.error('demo: engine objects were left behind');
  process.exit(1);
}
