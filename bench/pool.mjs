// Warm pools against the cold path and `docker run`, interleaved in one run (this machine is
// noisy: only ratios inside a run count):
//   - claim → first stdout byte of `echo ready` (exec on the claimed sandbox), with the pool kept
//     full (each claim waits until the pool is full again), NATIVE_SANDBOX_BENCH_CLAIMS claims
//     (default 200) on runc;
//   - the cold path every fourth iteration: reserve + start + the reserved process's first byte;
//   - `docker run --rm -i` of the same command every eighth iteration;
//   - 16 claims at once from a full pool of 16;
//   - runsc and an allowlist pool (its gateway started with each member), 50 claims each;
//   - the cost: host RSS and engine objects per ready member, and the refill rate from empty.
// `npm run bench:pool`. Writes bench/pool-results.json and prints what docs/performance.md shows.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSandboxPool, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { ms, percentiles, round } from './stats.mjs';

const CLAIMS = Number(process.env.NATIVE_SANDBOX_BENCH_CLAIMS ?? 200);
const OTHER_CLAIMS = 50;
const SIZE = 4;
const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const policy = (network = { kind: 'isolated' }) => ({
  resources: { cpus: 1, memoryBytes: 128 * 1024 ** 2, pids: 64 },
  temporaryStorage: { homeBytes: 8 * 1024 ** 2, tempBytes: 8 * 1024 ** 2 },
  network,
  deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
  transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
  streams: SANDBOX_DEFAULT_STREAM_LIMITS,
});
const ECHO = { executable: '/bin/echo', args: ['ready'], env: {}, cwd: '/' };

const summary = (samples) => ({ samples: samples.length, ...percentiles(samples) });
const sleep = (t) => new Promise((resolve) => setTimeout(resolve, t));

function firstByte(stream) {
  return new Promise((resolve, reject) => {
    stream.once('data', resolve);
    stream.once('error', reject);
    stream.once('end', () => reject(new Error('no output')));
  });
}

async function untilFull(pool, size) {
  while (pool.ready < size) await sleep(5);
}

/** Claim → first stdout byte of ECHO; the claimed sandbox is destroyed in the background. */
async function warmClaim(pool, settling) {
  const start = process.hrtime.bigint();
  const sandbox = await pool.claim();
  const command = await sandbox.exec(ECHO, { stdin: false });
  command.stderr.resume();
  await firstByte(command.stdout);
  const took = ms(start);
  command.stdout.resume();
  settling.push(command.exit.then(() => sandbox.stop()).then(() => sandbox.destroy()));
  return took;
}

async function coldStart(backend, network) {
  const start = process.hrtime.bigint();
  const sandbox = await backend.reserve({ policy: policy(network) }, { kind: 'in_process' }).start();
  try {
    const streams = await sandbox.reserveProcess(ECHO).start();
    streams.stdin.end();
    streams.stderr.resume();
    await firstByte(streams.stdout);
    const took = ms(start);
    streams.stdout.resume();
    await streams.exit;
    return took;
  } finally {
    await sandbox.stop();
    await sandbox.destroy();
  }
}

function dockerRun() {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['run', '--rm', '-i', '--network', 'none', IMAGE, '/bin/echo', 'ready'], { stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdin.end();
    let took;
    child.stdout.once('data', () => (took = ms(start)));
    child.stdout.resume();
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 && took !== undefined ? resolve(took) : reject(new Error(`docker run exited ${code}`))));
  });
}

function census(namespace) {
  const filter = `label=dev.native-sandbox.namespace=${namespace}`;
  const count = (args) => execFileSync('docker', [...args, '--filter', filter], { encoding: 'utf8' }).split('\n').filter(Boolean).length;
  return { containers: count(['ps', '-aq']), volumes: count(['volume', 'ls', '-q']), networks: count(['network', 'ls', '-q']) };
}

const spill = mkdtempSync(join(os.tmpdir(), 'bench-pool-'));
const backendOf = (label, extra = {}) => {
  const namespace = `bench-pool-${label}-${process.pid}`;
  return { namespace, backend: createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spill, ...extra }) };
};

const out = { date: new Date().toISOString(), machine: { cpus: os.cpus().length, memoryBytes: os.totalmem() }, config: { claims: CLAIMS, size: SIZE } };

/** A pool of `size`, its fill timed from empty; then `claims` warm claims kept full. */
async function measurePool({ label, extra, network, claims, cold, docker }) {
  const { namespace, backend } = backendOf(label, extra);
  globalThis.gc?.();
  const rssEmpty = process.memoryUsage().rss;
  const fillStart = process.hrtime.bigint();
  const pool = createSandboxPool(backend, { request: { policy: policy(network) }, size: SIZE });
  const samples = { warm: [], cold: [], dockerRun: [] };
  const settling = [];
  let result;
  try {
    await untilFull(pool, SIZE);
    const fillMs = ms(fillStart);
    globalThis.gc?.();
    const objects = census(namespace);
    const rssFull = process.memoryUsage().rss;
    for (let i = 0; i < claims; i += 1) {
      await untilFull(pool, SIZE);
      samples.warm.push(await warmClaim(pool, settling));
      if (cold && i % 4 === 0) samples.cold.push(await coldStart(backend, network));
      if (docker && i % 8 === 0) samples.dockerRun.push(await dockerRun());
    }
    result = {
      warm: summary(samples.warm),
      ...(cold ? { cold: summary(samples.cold) } : {}),
      ...(docker ? { dockerRun: summary(samples.dockerRun) } : {}),
      cost: {
        rssPerMemberBytes: Math.round((rssFull - rssEmpty) / SIZE),
        containersPerMember: objects.containers / SIZE,
        volumesPerMember: objects.volumes / SIZE,
        networksPerMember: objects.networks / SIZE,
        fillMs: round(fillMs),
        refillPerSecond: round(SIZE / (fillMs / 1000)),
      },
    };
  } finally {
    await Promise.allSettled(settling);
    await pool.close();
  }
  return result;
}

out.runc = await measurePool({ label: 'runc', claims: CLAIMS, cold: true, docker: true });

// 16 claims at once from a full pool of 16.
{
  const { backend } = backendOf('burst');
  const pool = createSandboxPool(backend, { request: { policy: policy() }, size: 16 });
  const settling = [];
  try {
    await untilFull(pool, 16);
    const burst = await Promise.all(Array.from({ length: 16 }, () => warmClaim(pool, settling)));
    out.burst16 = summary(burst);
  } finally {
    await Promise.allSettled(settling);
    await pool.close();
  }
}

out.runsc = await measurePool({ label: 'runsc', extra: { runtime: 'runsc' }, claims: OTHER_CLAIMS, cold: true, docker: false });
out.allowlist = await measurePool({ label: 'allowlist', network: { kind: 'allowlist', hosts: ['example.invalid'] }, claims: OTHER_CLAIMS, cold: true, docker: false });

out.ratios = {
  warmP50OverCold: round(out.runc.warm.p50Ms / out.runc.cold.p50Ms),
  warmP50OverDockerRun: round(out.runc.warm.p50Ms / out.runc.dockerRun.p50Ms),
};
writeFileSync(fileURLToPath(new URL('./pool-results.json', import.meta.url)), `${JSON.stringify(out, null, 2)}\n`);
console.log(JSON.stringify(out, null, 2));
