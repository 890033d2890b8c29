// Soak benchmark (not a test): whole lifecycles, each with one process, to show that throughput
// holds and memory stays flat. Every lifecycle: reserve, start, run the process (`echo`, or one
// writing `_OUTPUT_BYTES` to stdout), read stdout to its end, wait for exit, stop, destroy.
// Reports lifecycles per second, p50/p99 of start-to-first-byte (reserve to the first stdout
// byte), and every 100 lifecycles (after a forced GC) the host's RSS, the V8 heap, the native
// owners alive and the C heap as glibc sees it (bytes in use, held, free: a leak grows the bytes
// in use, fragmentation only those held).
// Usage: node --expose-gc bench/soak.mjs [--sequential | --pool]
//   (NATIVE_SANDBOX_SOAK_LIFECYCLES, _CONCURRENCY, _OUTPUT_BYTES, _REPORT_EVERY, _POOL_SIZE)
// --sequential: one lifecycle after another, each process writing 100 KB (the defaults of the
// concurrent mode are 16 at a time and `echo`).
// --pool: each lifecycle is a claim from a warm pool (NATIVE_SANDBOX_SOAK_POOL_SIZE, default 16,
// filled before the clock starts), one command (`exec`), stop, destroy: 2,000 by default, 16 at a
// time; first byte is claim to the command's first stdout byte.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSandboxPool, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { native } from '../js/native.js';

const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const SEQUENTIAL = process.argv.includes('--sequential');
const POOL = process.argv.includes('--pool');
const POOL_SIZE = Number(process.env.NATIVE_SANDBOX_SOAK_POOL_SIZE ?? 16);
const LIFECYCLES = Number(process.env.NATIVE_SANDBOX_SOAK_LIFECYCLES ?? (POOL ? 2000 : 1000));
const CONCURRENCY = SEQUENTIAL ? 1 : Number(process.env.NATIVE_SANDBOX_SOAK_CONCURRENCY ?? 16);
const OUTPUT_BYTES = Number(process.env.NATIVE_SANDBOX_SOAK_OUTPUT_BYTES ?? (SEQUENTIAL ? 100 * 1024 : 0));
const REPORT_EVERY = Number(process.env.NATIVE_SANDBOX_SOAK_REPORT_EVERY ?? 100);
const SCRIPT = OUTPUT_BYTES > 0 ? `head -c ${OUTPUT_BYTES} /dev/zero` : 'echo soak';

if (typeof globalThis.gc !== 'function') {
  console.error('soak: run with node --expose-gc, so memory is read after a full collection');
  process.exit(2);
}

const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-soak-'));
const namespace = `soak-${process.pid}`;
const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spill });
const request = {
  policy: {
    resources: { cpus: 1, memoryBytes: 64 * 1024 ** 2, pids: 32 },
    temporaryStorage: { homeBytes: 8 * 1024 ** 2, tempBytes: 8 * 1024 ** 2 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};

const pool = POOL ? createSandboxPool(backend, { request, size: POOL_SIZE }) : undefined;

/** A claim, one command read to its end, stop, destroy; claim to first byte. */
async function pooled() {
  const t0 = performance.now();
  const sandbox = await pool.claim();
  try {
    const command = await sandbox.exec({ executable: '/bin/sh', args: ['-c', SCRIPT], env: {}, cwd: sandbox.workspace }, { stdin: false });
    command.stderr.resume();
    let firstByte;
    let bytes = 0;
    for await (const chunk of command.stdout) {
      firstByte ??= performance.now() - t0;
      bytes += chunk.length;
    }
    if (bytes !== Math.max(OUTPUT_BYTES, 5)) throw new Error(`read ${bytes} bytes of stdout`);
    await command.exit;
    await sandbox.stop();
    return firstByte;
  } finally {
    await sandbox.destroy();
  }
}

async function lifecycle() {
  if (POOL) return pooled();
  const t0 = performance.now();
  const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
  try {
    const child = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', SCRIPT], env: {}, cwd: sandbox.workspace });
    const { stdin, stdout, stderr, exit } = await child.start();
    stdin.end();
    stderr.resume();
    let firstByte;
    let bytes = 0;
    for await (const chunk of stdout) {
      firstByte ??= performance.now() - t0;
      bytes += chunk.length;
    }
    if (bytes !== Math.max(OUTPUT_BYTES, 5)) throw new Error(`read ${bytes} bytes of stdout`);
    await exit;
    await sandbox.stop();
    return firstByte;
  } finally {
    await sandbox.destroy();
  }
}

const mib = (bytes) => Math.round((bytes / 1024 ** 2) * 10) / 10;
async function memory() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await sleep(20);
  }
  const usage = process.memoryUsage();
  const heap = native.nativeHeap();
  return {
    rssMiB: mib(usage.rss),
    heapMiB: mib(usage.heapUsed),
    liveOwners: native.liveOwnerCount(),
    ...(heap ? { cInUseMiB: mib(heap.inUseBytes), cHeldMiB: mib(heap.heldBytes), cFreeMiB: mib(heap.freeBytes) } : {}),
  };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

if (POOL) while (pool.ready < POOL_SIZE) await sleep(20);
const firstBytes = [];
const samples = [{ lifecycles: 0, ...(await memory()) }];
console.log(JSON.stringify(samples[0]));
let started = 0;
let done = 0;
let failures = 0;
const t0 = performance.now();
let nextReport = REPORT_EVERY;
async function worker() {
  while (started < LIFECYCLES) {
    started += 1;
    try {
      firstBytes.push(await lifecycle());
    } catch (error) {
      failures += 1;
      console.error(`lifecycle failed: ${error.message}`);
    }
    done += 1;
    if (done >= nextReport) {
      nextReport += REPORT_EVERY;
      const sample = { lifecycles: done, ...(await memory()) };
      samples.push(sample);
      console.log(JSON.stringify(sample));
    }
  }
}
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const seconds = (performance.now() - t0) / 1000;
await pool?.close();
const sorted = [...firstBytes].sort((a, b) => a - b);
const afterWarmup = samples.filter((s) => s.lifecycles >= 200);
const summary = {
  lifecycles: done,
  mode: POOL ? `pool of ${POOL_SIZE}` : SEQUENTIAL ? 'sequential' : 'concurrent',
  concurrency: CONCURRENCY,
  outputBytes: OUTPUT_BYTES,
  mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null,
  failures,
  seconds: Math.round(seconds * 10) / 10,
  lifecyclesPerSecond: Math.round((done / seconds) * 100) / 100,
  firstByteMs: { p50: Math.round(percentile(sorted, 50)), p99: Math.round(percentile(sorted, 99)) },
  rssMiB: { first: samples[0].rssMiB, warm: afterWarmup[0]?.rssMiB, last: samples.at(-1).rssMiB },
  rssGrowthAfterWarmupMiB: afterWarmup.length ? mib((samples.at(-1).rssMiB - afterWarmup[0].rssMiB) * 1024 ** 2) : null,
  heapMiB: { first: samples[0].heapMiB, last: samples.at(-1).heapMiB },
  cInUseMiB: { warm: afterWarmup[0]?.cInUseMiB, last: samples.at(-1).cInUseMiB },
  cHeldMiB: { warm: afterWarmup[0]?.cHeldMiB, last: samples.at(-1).cHeldMiB },
  liveOwnersAtEnd: native.liveOwnerCount(),
  spillFilesLeft: readdirSync(spill).length,
};
console.log(JSON.stringify(summary, null, 2));
rmSync(spill, { recursive: true, force: true });
