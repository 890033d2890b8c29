// `npm run bench:reaper`: what the reaper costs a sandbox's start. Two contenders, `reaper: true`
// (the default) and `reaper: false`, interleaved in rounds (the order alternates), each run in a
// fresh process that measures its first start (the reaper is started then, and waited for until
// it says it runs) and then NATIVE_SANDBOX_BENCH_START_RUNS (10) more starts (each record written
// to the reaper's pipe before its effect). A start is `reserve().start()` to ready; every sandbox
// is destroyed before the next. Writes bench/reaper-results.json and prints the per-round ratios
// (reaper on over off); only ratios inside a round count on a noisy machine.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const env = (name, fallback) => Number(process.env[`NATIVE_SANDBOX_BENCH_${name}`] ?? fallback);
const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const round1 = (n) => Math.round(n * 10) / 10;

if (process.argv[2] === '--one') {
  const { createDockerSandboxBackend } = await import('native-sandbox/docker');
  const { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } = await import('native-sandbox');
  const reaper = process.argv[3] === 'on';
  const runs = Number(process.argv[4]);
  const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-spill-'));
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace: `bench-reaper-${process.pid}`, spillDirectory: spill, reaper });
  const request = {
    policy: {
      resources: { cpus: 1, memoryBytes: 256 * 1024 ** 2, pids: 64 },
      temporaryStorage: { homeBytes: 16 * 1024 ** 2, tempBytes: 16 * 1024 ** 2 },
      network: { kind: 'isolated' },
      deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
      transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
      streams: SANDBOX_DEFAULT_STREAM_LIMITS,
    },
  };
  const startOnce = async () => {
    const t0 = performance.now();
    const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
    const elapsed = performance.now() - t0;
    await sandbox.destroy();
    return elapsed;
  };
  try {
    const firstMs = await startOnce();
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push(await startOnce());
    console.log(JSON.stringify({ firstMs, startMs: median(samples), samplesMs: samples }));
  } finally {
    rmSync(spill, { recursive: true, force: true });
  }
} else {
  const rounds = env('ROUNDS', 5);
  const runs = env('START_RUNS', 10);
  const self = fileURLToPath(import.meta.url);
  const contenders = ['on', 'off'];
  const results = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? [...contenders].reverse() : contenders;
    const sample = {};
    for (const contender of order) {
      sample[contender] = JSON.parse(execFileSync(process.execPath, [self, '--one', contender, String(runs)], { encoding: 'utf8' }));
      console.log(`round ${round + 1} reaper ${contender}: first start ${round1(sample[contender].firstMs)} ms, then median ${round1(sample[contender].startMs)} ms`);
    }
    results.push(sample);
  }
  const ratios = (field) => results.map((r) => r.on[field] / r.off[field]);
  const summary = {
    firstStart: { onMs: median(results.map((r) => r.on.firstMs)), offMs: median(results.map((r) => r.off.firstMs)), ratio: median(ratios('firstMs')), ratios: ratios('firstMs') },
    laterStarts: { onMs: median(results.map((r) => r.on.startMs)), offMs: median(results.map((r) => r.off.startMs)), ratio: median(ratios('startMs')), ratios: ratios('startMs') },
  };
  const out = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, kernel: release() },
    node: process.versions.node,
    config: { rounds, runs, image: IMAGE },
    summary,
    rounds: results,
  };
  writeFileSync(fileURLToPath(new URL('./reaper-results.json', import.meta.url)), `${JSON.stringify(out, null, 2)}\n`);
  for (const [name, s] of Object.entries(summary)) {
    console.log(`${name}: reaper on ${round1(s.onMs)} ms, off ${round1(s.offMs)} ms; on/off ${s.ratio.toFixed(2)} (rounds ${s.ratios.map((r) => r.toFixed(2)).join(', ')})`);
  }
}
