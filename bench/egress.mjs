// `npm run bench:egress` (also the last step of `npm run bench`): what egress by hostname costs,
// against an `outbound` sandbox, interleaved in NATIVE_SANDBOX_BENCH_ROUNDS (5) rounds whose order
// alternates. Everything runs on this machine, against a world the benchmark makes
// (__test__/egress-world.mjs: a network of its own with a resolver, an HTTP bulk server and an
// HTTPS server). Per round and contender, a Node.js guest downloads NATIVE_SANDBOX_BENCH_EGRESS_BYTES
// (1 GiB) over plain HTTP and then makes NATIVE_SANDBOX_BENCH_EGRESS_CONNECTIONS (200) sequential
// HTTPS requests, each on a new connection (TCP and TLS handshakes, one request); then busybox's
// `wget` downloads the same bytes into /dev/null (a client that spends far less CPU per byte than
// Node.js, so the gateway's own ceiling shows; timed by /proc/uptime, 10 ms steps). The allowlist
// guest goes by name through its gateway (each connection looks its name up, through the
// gateway); the outbound guest by address, the servers joined to its network for the run. Also
// start to first stdout byte of an allowlist sandbox against an isolated and an outbound one
// (NATIVE_SANDBOX_BENCH_START_RUNS, 5, per round). Writes bench/egress-results.json.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { startWorld } from '../__test__/egress-world.mjs';

const env = (name, fallback) => Number(process.env[`NATIVE_SANDBOX_BENCH_${name}`] ?? fallback);
const config = {
  rounds: env('ROUNDS', 5),
  bytes: env('EGRESS_BYTES', 1024 ** 3),
  connections: env('EGRESS_CONNECTIONS', 200),
  startRuns: env('START_RUNS', 5),
};
const NODE_IMAGE = 'native-sandbox/node-agent:1';
const BUSYBOX_IMAGE = 'native-sandbox/busybox:1';
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const round2 = (n) => Math.round(n * 100) / 100;
const docker = (args) => execFileSync('docker', args, { encoding: 'utf8' }).trim();

// The guest: one download, then `connections` HTTPS requests on fresh connections.
const CLIENT = `
const http = require('node:http');
const https = require('node:https');
const { performance } = require('node:perf_hooks');
const { BULK, SECURE, BYTES, CONNECTIONS, CA } = process.env;
const download = () => new Promise((resolve, reject) => {
  const started = performance.now();
  let got = 0;
  http.get({ host: BULK, path: '/' + BYTES, headers: { host: 'bulk.test' } }, (res) => {
    res.on('data', (d) => (got += d.length));
    res.on('end', () => (got === Number(BYTES) ? resolve(performance.now() - started) : reject(new Error('short: ' + got))));
  }).on('error', reject);
});
const once = () => new Promise((resolve, reject) => {
  const started = performance.now();
  https.get({ host: SECURE, servername: 'secure.test', headers: { host: 'secure.test' }, ca: CA, agent: false }, (res) => {
    res.resume();
    res.on('end', () => resolve(performance.now() - started));
  }).on('error', reject);
});
(async () => {
  const downloadMs = await download();
  const each = [];
  for (let i = 0; i < Number(CONNECTIONS); i++) each.push(await once());
  each.sort((a, b) => a - b);
  console.log(JSON.stringify({ downloadMs, connectionMs: each[each.length >> 1], connectionsMs: each.reduce((a, b) => a + b, 0) }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

function policy(network, { memoryBytes = 256 * 1024 ** 2 } = {}) {
  return {
    policy: {
      resources: { cpus: 1, memoryBytes, pids: 64 },
      temporaryStorage: { homeBytes: 16 * 1024 ** 2, tempBytes: 16 * 1024 ** 2 },
      network,
      deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
      transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
      streams: SANDBOX_DEFAULT_STREAM_LIMITS,
    },
  };
}

async function output(sandbox, executable, args, envs) {
  const process = sandbox.reserveProcess({ executable, args, env: envs, cwd: sandbox.workspace });
  const streams = await process.start();
  const out = [];
  const err = [];
  streams.stdout.on('data', (c) => out.push(c));
  streams.stderr.on('data', (c) => err.push(c));
  streams.stdin.end();
  const exit = await streams.exit;
  if (exit.kind !== 'exited' || exit.code !== 0) throw new Error(`guest failed: ${JSON.stringify(exit)} ${Buffer.concat(err)}`);
  return Buffer.concat(out).toString();
}

// busybox's wget: the same download, the seconds read from /proc/uptime around it.
const WGET = 'a=$(cut -d" " -f1 /proc/uptime); wget -q -O /dev/null --header "Host: bulk.test" "http://$BULK/$BYTES" || exit 1; b=$(cut -d" " -f1 /proc/uptime); echo "$a $b"';

/** One contender's traffic: the Node.js guest's download and connections, then wget's download. */
async function traffic(world, backends, kind) {
  const node = await onTheWire(world, backends.node, kind, async (sandbox, bulk, secure) => {
    const text = await output(sandbox, '/usr/local/bin/node', ['-e', CLIENT], {
      BULK: bulk,
      SECURE: secure,
      BYTES: String(config.bytes),
      CONNECTIONS: String(config.connections),
      CA: world.cert,
    });
    return JSON.parse(text.trim().split('\n').pop());
  });
  const wgetDownloadMs = await onTheWire(world, backends.busybox, kind, async (sandbox, bulk) => {
    const [before, after] = (await output(sandbox, '/bin/sh', ['-c', WGET], { BULK: bulk, BYTES: String(config.bytes) })).trim().split(' ').map(Number);
    return (after - before) * 1000;
  });
  return { ...node, wgetDownloadMs };
}

/**
 * Runs `client(sandbox, bulk, secure)` in a `kind` sandbox of `backend` that reaches the bulk and
 * HTTPS servers: by name through its gateway (allowlist), or by address with the servers joined
 * to the sandbox's own network for the run (outbound: one bridge hop, as the gateway's path has
 * one on each side).
 */
async function onTheWire(world, backend, kind, client) {
  const allowlist = kind === 'allowlist';
  const network = allowlist ? { kind: 'allowlist', hosts: ['bulk.test:80', 'secure.test:443'] } : { kind: 'outbound' };
  const sandbox = await backend.reserve(policy(network), { kind: 'in_process' }).start();
  const joined = [];
  try {
    let bulk = 'bulk.test';
    let secure = 'secure.test';
    if (!allowlist) {
      const own = sandbox.recoveryRecord.resources.find((r) => r.role === 'network').name;
      for (const label of ['bulk', 'https']) {
        docker(['network', 'connect', own, world.container(label)]);
        joined.push([own, world.container(label)]);
      }
      const address = (label) => docker(['inspect', '--format', `{{(index .NetworkSettings.Networks "${own}").IPAddress}}`, world.container(label)]);
      bulk = address('bulk');
      secure = address('https');
    }
    return await client(sandbox, bulk, secure);
  } finally {
    for (const [own, container] of joined) docker(['network', 'disconnect', '--force', own, container]);
    await sandbox.destroy();
  }
}

async function firstByte(backends, kind) {
  const network = kind === 'allowlist' ? { kind: 'allowlist', hosts: ['bulk.test'] } : { kind };
  const started = performance.now();
  const sandbox = await backends.busybox.reserve(policy(network, { memoryBytes: 64 * 1024 ** 2 }), { kind: 'in_process' }).start();
  try {
    const process = sandbox.reserveProcess({ executable: '/bin/echo', args: ['x'], env: {}, cwd: sandbox.workspace });
    const streams = await process.start();
    streams.stdin.end();
    streams.stderr.resume();
    await new Promise((resolve) => streams.stdout.once('data', resolve));
    const ms = performance.now() - started;
    streams.stdout.resume();
    await streams.exit;
    return ms;
  } finally {
    await sandbox.destroy();
  }
}

const world = startWorld();
try {
  const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-spill-'));
  const options = { namespace: `bench-egress-${process.pid}`, spillDirectory: spill, ...world.backendOptions };
  const backends = {
    node: createDockerSandboxBackend({ image: NODE_IMAGE, ...options }),
    busybox: createDockerSandboxBackend({ image: BUSYBOX_IMAGE, ...options }),
  };
  const rounds = [];
  for (let round = 0; round < config.rounds; round++) {
    const order = round % 2 ? ['allowlist', 'outbound'] : ['outbound', 'allowlist'];
    const sample = { order };
    for (const kind of order) sample[kind] = await traffic(world, backends, kind);
    const starts = { allowlist: [], isolated: [], outbound: [] };
    const kinds = Object.keys(starts);
    for (let run = 0; run < config.startRuns; run++) {
      for (const kind of [...kinds.slice(run % 3), ...kinds.slice(0, run % 3)]) starts[kind].push(await firstByte(backends, kind));
    }
    sample.firstByteMs = Object.fromEntries(kinds.map((kind) => [kind, median(starts[kind])]));
    const mbps = (ms) => config.bytes / 1e6 / (ms / 1000);
    sample.throughputRatio = round2(mbps(sample.allowlist.downloadMs) / mbps(sample.outbound.downloadMs));
    sample.wgetThroughputRatio = round2(mbps(sample.allowlist.wgetDownloadMs) / mbps(sample.outbound.wgetDownloadMs));
    sample.addedPerConnectionMs = round2((sample.allowlist.connectionsMs - sample.outbound.connectionsMs) / config.connections);
    rounds.push(sample);
    console.log(`round ${round + 1}: throughput ${round2(mbps(sample.allowlist.downloadMs))} vs ${round2(mbps(sample.outbound.downloadMs))} MB/s (${sample.throughputRatio}; wget ${round2(mbps(sample.allowlist.wgetDownloadMs))} vs ${round2(mbps(sample.outbound.wgetDownloadMs))}, ${sample.wgetThroughputRatio}), per connection ${round2(sample.allowlist.connectionMs)} vs ${round2(sample.outbound.connectionMs)} ms (+${sample.addedPerConnectionMs} ms mean), first byte ${round2(sample.firstByteMs.allowlist)} vs ${round2(sample.firstByteMs.isolated)} ms isolated, ${round2(sample.firstByteMs.outbound)} ms outbound`);
  }
  const out = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, kernel: release() },
    engine: docker(['version', '--format', '{{.Server.Version}}']),
    config,
    goals: {
      throughputRatio: { goal: '>= 0.8', median: median(rounds.map((r) => r.throughputRatio)), rounds: rounds.map((r) => r.throughputRatio) },
      wgetThroughputRatio: { goal: '>= 0.8', median: median(rounds.map((r) => r.wgetThroughputRatio)), rounds: rounds.map((r) => r.wgetThroughputRatio) },
      addedPerConnectionMs: { goal: '<= 2', median: median(rounds.map((r) => r.addedPerConnectionMs)), rounds: rounds.map((r) => r.addedPerConnectionMs) },
    },
    firstByteMs: {
      allowlist: round2(median(rounds.map((r) => r.firstByteMs.allowlist))),
      isolated: round2(median(rounds.map((r) => r.firstByteMs.isolated))),
      outbound: round2(median(rounds.map((r) => r.firstByteMs.outbound))),
    },
    rounds,
  };
  writeFileSync(fileURLToPath(new URL('./egress-results.json', import.meta.url)), `${JSON.stringify(out, null, 2)}\n`);
  console.log(JSON.stringify(out.goals), JSON.stringify(out.firstByteMs));
} finally {
  world.stop();
}
