// `npm run bench`: every contender of every measurement, interleaved in rounds (the order rotates
// each round, so machine noise hits every contender alike), each run in its own process
// (bench/one.mjs). Writes bench/results.json (date, machine, engine, versions, every sample, the
// goals as ratios inside each round) and regenerates docs/performance.md and the README headline from it (bench/report.mjs).
// Sizes: NATIVE_SANDBOX_BENCH_ROUNDS (3), _SMALL_FILES (20,000 of 4 KiB), _LARGE_BYTES (1 GiB),
// _STDOUT_BYTES (1 GiB), _STDIN_BYTES (1 GiB, written in 64 KiB and again in 1 KiB writes; the raw
// writer also in 1 MiB writes; at this engine's ~400 MB/s, 256 MiB lasted 0.6 s, too short to
// separate the contenders from the machine's noise), _START_RUNS (10),
// _CONCURRENT (16), _EXACT_FILES (4,200).
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { cpus, release, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { goalsOf, writeReadme } from './report.mjs';

const env = (name, fallback) => Number(process.env[`NATIVE_SANDBOX_BENCH_${name}`] ?? fallback);
const config = {
  rounds: env('ROUNDS', 3),
  smallFiles: env('SMALL_FILES', 20_000),
  largeBytes: env('LARGE_BYTES', 1024 ** 3),
  stdoutBytes: env('STDOUT_BYTES', 1024 ** 3),
  stdinBytes: env('STDIN_BYTES', 1024 ** 3),
  stdinWriteBytes: 64 * 1024,
  stdinSmallWriteBytes: 1024,
  stdinLargeWriteBytes: 1024 ** 2,
  startRuns: env('START_RUNS', 10),
  concurrent: env('CONCURRENT', 16),
  exactFiles: env('EXACT_FILES', 4_200),
  image: process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1',
};
const one = fileURLToPath(new URL('./one.mjs', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-src-'));
// Runs that write thousands of files leave them until the end (see bench/one.mjs): on an ext4
// file system without a journal, creating files soon after deleting many is several times slower
// in the kernel, and that cost would fall on whichever contender runs next.
const keepFile = join(root, 'kept.jsonl');

function smallTree() {
  const dir = join(root, 'small');
  const body = randomBytes(4096);
  for (let i = 0; i < config.smallFiles; i++) {
    const sub = join(dir, `d${i % 100}`);
    if (i < 100) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}`), body);
  }
  return dir;
}

function largeTree() {
  const dir = join(root, 'large');
  mkdirSync(dir);
  const fd = openSync(join(dir, 'big.bin'), 'w');
  const block = randomBytes(1024 * 1024);
  for (let written = 0; written < config.largeBytes; written += block.length) writeSync(fd, block, 0, Math.min(block.length, config.largeBytes - written));
  closeSync(fd);
  return dir;
}

/**
 * One contender's run in its own process, after the host's disk settled: the previous run's
 * deletions and written files are flushed first, so they do not land on the next contender.
 */
function runOne(args, keep) {
  execFileSync('sync');
  execFileSync('sleep', ['2']);
  const env = { ...process.env, NATIVE_SANDBOX_GUEST_IMAGE: config.image, ...(keep ? { NATIVE_SANDBOX_BENCH_KEEP: keepFile } : {}) };
  const out = execFileSync(process.execPath, [one, ...args], { encoding: 'utf8', maxBuffer: 1 << 20, env });
  return JSON.parse(out.trim().split('\n').at(-1));
}

const quiet = (command, args) => {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
};
const engine = JSON.parse(quiet('docker', ['version', '--format', '{{json .Server}}']) ?? '{}');
const runtimes = Object.keys(JSON.parse(quiet('docker', ['info', '--format', '{{json .Runtimes}}']) ?? '{}'));
const runsc = runtimes.includes('runsc');
// The blocking stdin writer needs python3 ≥ 3.6 (f-strings); an older one is left out like none.
const python = quiet('python3', ['-c', 'import sys; assert sys.version_info >= (3, 6); print("Python " + sys.version.split()[0])']);
const packageVersion = (name) => JSON.parse(readFileSync(join(here, '..', 'node_modules', name, 'package.json'), 'utf8')).version;

const small = smallTree();
const large = largeTree();
// name → { contenders, args(contender) }: each round runs every contender of every measurement.
const measurements = {
  'transfer-small': { contenders: ['native', 'dockerode', 'limit'], args: (c) => ['transfer', c, small], keep: true },
  'transfer-large': { contenders: ['native', 'dockerode', 'limit', 'download'], args: (c) => ['transfer', c, large] },
  exact: { contenders: ['native'], args: (c) => ['exact', c, config.exactFiles], keep: true },
  iterable: { contenders: ['native'], args: (c) => ['iterable', c, config.smallFiles], keep: true },
  stdout: { contenders: ['native', 'dockerode', 'raw'], args: (c) => ['stdout', c, config.stdoutBytes] },
  // `raw-large`: the raw writer in writes 16 times larger, to show whether the client or its write
  // size changes the engine's stdin rate; `blocking` (when python3 is here): a writer outside Node
  // in the same writes, to show the rate when the client spends little CPU per write.
  stdin: {
    contenders: ['native', 'dockerode', 'raw', 'raw-large', ...(python ? ['blocking'] : [])],
    args: (c) => (c === 'raw-large' ? ['stdin', 'raw', config.stdinBytes, config.stdinLargeWriteBytes] : ['stdin', c, config.stdinBytes, config.stdinWriteBytes]),
  },
  'stdin-small': { contenders: ['native', 'dockerode', 'raw'], args: (c) => ['stdin', c, config.stdinBytes, config.stdinSmallWriteBytes] },
  start: { contenders: ['native', 'docker-run', 'dockerode'], args: (c) => ['start', c, config.startRuns] },
  concurrent: { contenders: ['native', 'docker-run'], args: (c) => ['concurrent', c, config.concurrent] },
  ...(runsc
    ? {
        'start-runsc': { contenders: ['native', 'docker-run'], args: (c) => ['start', c, config.startRuns, 'runsc'] },
        'stdout-runsc': { contenders: ['native', 'raw'], args: (c) => ['stdout', c, config.stdoutBytes, 'runsc'] },
      }
    : {}),
};

const rounds = [];
try {
  for (let round = 0; round < config.rounds; round++) {
    const results = {};
    for (const [name, { contenders, args, keep }] of Object.entries(measurements)) {
      const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]);
      results[name] = {};
      for (const contender of order) {
        // Stored under this run's own contender name (`raw-large` runs one.mjs's `raw`).
        results[name][contender] = { ...runOne(args(contender), keep), contender };
        console.log(`round ${round + 1} ${name} ${contender}: ${JSON.stringify(results[name][contender])}`);
      }
    }
    rounds.push(results);
  }
} finally {
  try {
    if (existsSync(keepFile)) execFileSync(process.execPath, [one, 'cleanup', keepFile], { stdio: 'inherit' });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const results = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryBytes: totalmem(), kernel: release() },
  engine: { version: engine.Version, apiVersion: engine.ApiVersion, runtimes },
  versions: {
    node: process.versions.node,
    nativeSandbox: JSON.parse(readFileSync(join(here, '..', 'package.json'), 'utf8')).version,
    dockerode: packageVersion('dockerode'),
    tarFs: packageVersion('tar-fs'),
    curl: quiet('curl', ['--version'])?.split('\n')[0],
    tar: quiet('tar', ['--version'])?.split('\n')[0],
    ...(python ? { python } : {}),
  },
  config,
  rounds,
};
results.goals = goalsOf(results);
writeFileSync(join(here, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
writeReadme(results);
for (const goal of results.goals) console.log(`${goal.met ? 'met ' : 'MISS'} ${goal.name}: ${goal.shown} (goal ${goal.goal})`);
