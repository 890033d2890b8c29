// The Kubernetes backend against kubectl on the same cluster (the test cluster, `npm run
// cluster:up`), interleaved in one run (this machine is noisy: only ratios inside a run count):
//   - reserve → the first stdout byte of `echo`: `backend.reserve().start()` then the reserved
//     process, against `kubectl run --rm -i` of the same image and command (a pod made, attached
//     and deleted);
//   - a tree of many small files imported into a sandbox and exported from it, against
//     `kubectl cp` into and out of the same pod's workspace (kubectl's tar through an exec).
// `npm run bench:kubernetes` (NATIVE_SANDBOX_BENCH_ROUNDS rounds, default 5; the tree:
// NATIVE_SANDBOX_BENCH_FILES files of 4 KiB, default 1,000). Writes bench/kubernetes-results.json
// and prints the ratios (ours / kubectl's: below 1 is faster).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileFromBytes, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from 'native-sandbox/kubernetes';
import { ms, percentiles, quantile, round } from './stats.mjs';

const ROUNDS = Number(process.env.NATIVE_SANDBOX_BENCH_ROUNDS ?? 5);
const FILES = Number(process.env.NATIVE_SANDBOX_BENCH_FILES ?? 1000);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new RangeError('NATIVE_SANDBOX_BENCH_ROUNDS must be a positive integer');
if (!Number.isInteger(FILES) || FILES < 1) throw new RangeError('NATIVE_SANDBOX_BENCH_FILES must be a positive integer');
const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const KUBECONFIG = process.env.NATIVE_SANDBOX_KUBECONFIG;
const KUBECTL = process.env.NATIVE_SANDBOX_KUBECTL;
if (!KUBECONFIG || !KUBECTL) throw new Error('run through `npm run bench:kubernetes` (it starts the test cluster and names its kubeconfig and kubectl)');
const NAMESPACE = 'default';
const scope = `bench${Date.now().toString(36)}`;

const policy = {
  resources: { cpus: 0.5, memoryBytes: 256 * 1024 ** 2, pids: 256 },
  temporaryStorage: { homeBytes: 64 * 1024 ** 2, tempBytes: 64 * 1024 ** 2 },
  network: { kind: 'outbound' },
  deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
  transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
  streams: SANDBOX_DEFAULT_STREAM_LIMITS,
};
const ECHO = { executable: '/bin/sh', args: ['-c', 'echo first'], env: {}, cwd: KUBERNETES_SANDBOX_GUEST.workspace };

const kubectl = (...args) =>
  new Promise((resolve, reject) =>
    execFile(KUBECTL, ['--kubeconfig', KUBECONFIG, '-n', NAMESPACE, ...args], { maxBuffer: 64 * 1024 ** 2 }, (error, stdout, stderr) =>
      error ? reject(new Error(`kubectl ${args[0]}: ${stderr || error.message}`)) : resolve(stdout),
    ),
  );

/** Ours: reserve, start, the process's first stdout byte (then stop and destroy, untimed). */
async function oursFirstByte(backend) {
  const start = process.hrtime.bigint();
  const sandbox = await backend.reserve({ policy }, { kind: 'in_process' }).start();
  try {
    const streams = await sandbox.reserveProcess(ECHO).start();
    streams.stdin.end();
    await new Promise((resolve, reject) => {
      streams.stdout.once('data', resolve);
      streams.stdout.once('error', reject);
    });
    const elapsed = ms(start);
    streams.stdout.resume();
    streams.stderr.resume();
    await streams.exit;
    return elapsed;
  } finally {
    await sandbox.destroy();
  }
}

/** kubectl's: `kubectl run --rm -i` until its first stdout byte (then until it deleted the pod, untimed). */
async function kubectlFirstByte(round) {
  const start = process.hrtime.bigint();
  const child = execFile(KUBECTL, [
    '--kubeconfig', KUBECONFIG, '-n', NAMESPACE, 'run', `${scope}-k${round}`, '--rm', '-i', '--restart=Never', '--quiet',
    `--image=${IMAGE}`, '--image-pull-policy=Never', '--labels', `native-sandbox.dev/scope=${scope}`, '--', '/bin/sh', '-c', 'echo first',
  ]);
  child.stdin.end();
  const elapsed = await new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve(ms(start)));
    child.once('exit', (code) => reject(new Error(`kubectl run exited ${code} before any output`)));
  });
  await new Promise((resolve) => child.once('exit', resolve));
  return elapsed;
}

const files = Array.from({ length: FILES }, (_, i) => ({ path: `tree/d${i % 10}/f${i}.txt`, bytes: Buffer.alloc(4096, i % 251) }));

async function transfers(backend, local) {
  const sandbox = await backend.reserve({ policy }, { kind: 'in_process' }).start();
  const pod = (await kubectl('get', 'pods', '-l', `native-sandbox.dev/sandbox=${sandbox.id}`, '-o', 'name')).trim().replace('pod/', '');
  const out = { ours: {}, kubectl: {} };
  try {
    let start = process.hrtime.bigint();
    await sandbox.importTree(files.map((f) => fileFromBytes(f.path, f.bytes)));
    out.ours.importMs = ms(start);
    start = process.hrtime.bigint();
    await kubectl('cp', '-c', 'workspace', join(local, 'tree'), `${pod}:${KUBERNETES_SANDBOX_GUEST.workspace}/copied`);
    out.kubectl.importMs = ms(start);
    await sandbox.stop();
    start = process.hrtime.bigint();
    let exported = 0;
    await sandbox.exportTree({ kind: 'subtree', path: 'tree' }, async (entry) => {
      if (entry.kind !== 'file') return;
      for await (const chunk of entry.bytes) exported += chunk.length;
    });
    out.ours.exportMs = ms(start);
    if (exported !== FILES * 4096) throw new Error(`the export had ${exported} bytes, not ${FILES * 4096}`);
    const target = mkdtempSync(join(os.tmpdir(), 'nsbx-bench-cp-'));
    try {
      start = process.hrtime.bigint();
      await kubectl('cp', '-c', 'workspace', `${pod}:${KUBERNETES_SANDBOX_GUEST.workspace}/tree`, join(target, 'tree'));
      out.kubectl.exportMs = ms(start);
      const copied = readdirSync(join(target, 'tree'), { recursive: true }).filter((name) => name.endsWith('.txt')).length;
      if (copied !== FILES) throw new Error(`kubectl cp copied ${copied} files, not ${FILES}`);
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  } finally {
    await sandbox.destroy();
  }
  return out;
}

const backend = await createKubernetesSandboxBackend({ kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 });
const local = mkdtempSync(join(os.tmpdir(), 'nsbx-bench-tree-'));
for (const file of files) {
  mkdirSync(join(local, file.path, '..'), { recursive: true });
  writeFileSync(join(local, file.path), file.bytes);
}
const firstByte = { ours: [], kubectl: [] };
const transfer = [];
try {
  // One of each first, untimed: images and caches warm for both.
  await oursFirstByte(backend);
  await kubectlFirstByte('warm');
  for (let round = 0; round < ROUNDS; round += 1) {
    // Interleaved, the order alternating, so drift hits both alike.
    if (round % 2 === 0) {
      firstByte.ours.push(await oursFirstByte(backend));
      firstByte.kubectl.push(await kubectlFirstByte(round));
    } else {
      firstByte.kubectl.push(await kubectlFirstByte(round));
      firstByte.ours.push(await oursFirstByte(backend));
    }
    transfer.push(await transfers(backend, local));
  }
} finally {
  rmSync(local, { recursive: true, force: true });
}

const p50 = (samples) => quantile(samples, 0.5);
const of = (side, key) => transfer.map((t) => t[side][key]);
const results = {
  recordedAt: new Date().toISOString(),
  machine: { cpus: os.cpus().length, memoryBytes: os.totalmem() },
  rounds: ROUNDS,
  files: FILES,
  firstByte: { ours: percentiles(firstByte.ours), kubectl: percentiles(firstByte.kubectl), ratioP50: round(p50(firstByte.ours) / p50(firstByte.kubectl)) },
  import: { ours: percentiles(of('ours', 'importMs')), kubectl: percentiles(of('kubectl', 'importMs')), ratioP50: round(p50(of('ours', 'importMs')) / p50(of('kubectl', 'importMs'))) },
  export: { ours: percentiles(of('ours', 'exportMs')), kubectl: percentiles(of('kubectl', 'exportMs')), ratioP50: round(p50(of('ours', 'exportMs')) / p50(of('kubectl', 'exportMs'))) },
};
writeFileSync(new URL('./kubernetes-results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
console.log(`| measured (${ROUNDS} rounds, p50) | native-sandbox | kubectl | ratio |`);
console.log('| --- | --- | --- | --- |');
console.log(`| reserve → first stdout byte vs \`kubectl run --rm -i\` | ${results.firstByte.ours.p50Ms} ms | ${results.firstByte.kubectl.p50Ms} ms | ${results.firstByte.ratioP50} |`);
console.log(`| import of ${FILES} files of 4 KiB vs \`kubectl cp\` in | ${results.import.ours.p50Ms} ms | ${results.import.kubectl.p50Ms} ms | ${results.import.ratioP50} |`);
console.log(`| export of them vs \`kubectl cp\` out | ${results.export.ours.p50Ms} ms | ${results.export.kubectl.p50Ms} ms | ${results.export.ratioP50} |`);
