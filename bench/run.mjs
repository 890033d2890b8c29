// Benchmarks (numbers go in the README; nothing here is asserted by the tests):
//   1. start to first stdout byte, median of N, against `docker run --rm -i` and against
//      dockerode create+attach+start of the same image and command;
//   2. stdout throughput of 1 GiB against dockerode's attach with demux.
// Usage: npm run bench   (NATIVE_SANDBOX_BENCH_RUNS, NATIVE_SANDBOX_BENCH_BYTES to change sizes)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';

const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const RUNS = Number(process.env.NATIVE_SANDBOX_BENCH_RUNS ?? 20);
const BYTES = Number(process.env.NATIVE_SANDBOX_BENCH_BYTES ?? 1024 ** 3);
const docker = new Docker();
const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-'));
const backend = createDockerSandboxBackend({ image: IMAGE, namespace: `bench-${process.pid}`, spillDirectory: spill });
const request = {
  policy: {
    resources: { cpus: 2, memoryBytes: 512 * 1024 ** 2, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 ** 2, tempBytes: 64 * 1024 ** 2 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};
const hardening = {
  NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], ReadonlyRootfs: true, Init: true,
  LogConfig: { Type: 'none', Config: {} }, Memory: 512 * 1024 ** 2, MemorySwap: 512 * 1024 ** 2, PidsLimit: 128, NanoCpus: 2e9,
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const firstData = (stream) => new Promise((resolve, reject) => { stream.once('data', resolve); stream.once('error', reject); });

async function nativeFirstByte(command) {
  const t0 = performance.now();
  const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
  const t1 = performance.now();
  const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', command], env: {}, cwd: sandbox.workspace });
  const streams = await process.start();
  streams.stderr.resume();
  streams.stdin.end();
  await firstData(streams.stdout);
  const t2 = performance.now();
  streams.stdout.resume();
  await streams.exit;
  await sandbox.destroy();
  return { whole: t2 - t0, process: t2 - t1 };
}

function dockerRunFirstByte(command) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('docker', ['run', '--rm', '-i', '--network', 'none', '--log-driver', 'none', IMAGE, 'sh', '-c', command], { stdio: ['pipe', 'pipe', 'ignore'] });
    child.stdin.end();
    child.stdout.once('data', () => resolve(performance.now() - t0));
    child.on('error', reject);
    child.stdout.resume();
  });
}

async function dockerodeFirstByte(command) {
  const t0 = performance.now();
  const container = await docker.createContainer({ Image: IMAGE, Cmd: ['sh', '-c', command], User: '65532:65532', AttachStdin: true, AttachStdout: true, AttachStderr: true, OpenStdin: true, StdinOnce: true, HostConfig: hardening });
  const stream = await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
  const stdout = new PassThrough();
  container.modem.demuxStream(stream, stdout, new PassThrough().resume());
  await container.start();
  stream.end();
  await firstData(stdout);
  const elapsed = performance.now() - t0;
  await container.wait();
  await container.remove({ force: true });
  return elapsed;
}

async function nativeThroughput(bytes) {
  const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
  const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', `head -c ${bytes} /dev/zero`], env: {}, cwd: sandbox.workspace });
  const t0 = performance.now();
  const streams = await process.start();
  streams.stdin.end();
  streams.stderr.resume();
  let received = 0;
  for await (const chunk of streams.stdout) received += chunk.length;
  const seconds = (performance.now() - t0) / 1000;
  await sandbox.destroy();
  if (received !== bytes) throw new Error(`native received ${received} of ${bytes}`);
  return bytes / seconds / 1e6;
}

async function dockerodeThroughput(bytes) {
  const container = await docker.createContainer({ Image: IMAGE, Cmd: ['sh', '-c', `head -c ${bytes} /dev/zero`], User: '65532:65532', AttachStdout: true, AttachStderr: true, HostConfig: hardening });
  const stream = await container.attach({ stream: true, stdout: true, stderr: true });
  const stdout = new PassThrough();
  container.modem.demuxStream(stream, stdout, new PassThrough().resume());
  stream.on('end', () => stdout.end());
  const t0 = performance.now();
  await container.start();
  let received = 0;
  for await (const chunk of stdout) received += chunk.length;
  const seconds = (performance.now() - t0) / 1000;
  await container.remove({ force: true });
  if (received !== bytes) throw new Error(`dockerode received ${received} of ${bytes}`);
  return bytes / seconds / 1e6;
}

const command = 'echo x';
const results = { native: [], nativeProcess: [], dockerRun: [], dockerode: [] };
await nativeFirstByte(command);
await dockerRunFirstByte(command);
await dockerodeFirstByte(command);
for (let i = 0; i < RUNS; i++) {
  // Interleaved, so machine noise hits every contender alike.
  const native = await nativeFirstByte(command);
  results.native.push(native.whole);
  results.nativeProcess.push(native.process);
  results.dockerRun.push(await dockerRunFirstByte(command));
  results.dockerode.push(await dockerodeFirstByte(command));
}
console.log(`start to first stdout byte, median of ${RUNS} (ms):`);
console.log(`  native-sandbox, whole sandbox (volume, holder, process container): ${median(results.native).toFixed(1)}`);
console.log(`  native-sandbox, process in a ready sandbox:                       ${median(results.nativeProcess).toFixed(1)}`);
console.log(`  docker run --rm -i:                                               ${median(results.dockerRun).toFixed(1)}`);
console.log(`  dockerode create+attach+start:                                    ${median(results.dockerode).toFixed(1)}`);

const throughput = { native: [], dockerode: [] };
for (let i = 0; i < 3; i++) {
  throughput.native.push(await nativeThroughput(BYTES));
  throughput.dockerode.push(await dockerodeThroughput(BYTES));
}
console.log(`stdout throughput of ${BYTES} bytes, median of 3 (MB/s):`);
console.log(`  native-sandbox:          ${median(throughput.native).toFixed(0)}`);
console.log(`  dockerode attach+demux:  ${median(throughput.dockerode).toFixed(0)}`);
rmSync(spill, { recursive: true, force: true });
