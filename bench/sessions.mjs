// Sessions against the engine's own ways of running a command in the same container, measured
// interleaved in one run (this machine is noisy: only ratios inside a run count):
//   - `sandbox.run` of /bin/true, `docker exec` of it (the CLI), and an engine exec through the
//     API (create + start, attached), one of each per iteration; p50 and p99 of each;
//   - 64 `run`s at once;
//   - `files.read` of a 4 KiB file against `docker cp` of it out of the container;
//   - stdout throughput of a command against the reserved process's, in rounds interleaved
//     (NATIVE_SANDBOX_BENCH_ROUNDS, default 9; the
//     ratio is the median of each round's pair, taken back to back), with the host's CPU per GiB;
//   - host RSS over NATIVE_SANDBOX_BENCH_SOAK commands after a warm-up, then the guest's zombies
//     and the supervisor's descriptors.
// `npm run bench:sessions` (NATIVE_SANDBOX_BENCH_CALLS, default 1,000). Writes
// bench/sessions-results.json and prints the table docs/performance.md shows.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { ms, percentiles, quantile, round } from './stats.mjs';

const CALLS = Number(process.env.NATIVE_SANDBOX_BENCH_CALLS ?? 1000);
const SOAK = Number(process.env.NATIVE_SANDBOX_BENCH_SOAK ?? 10_000);
const THROUGHPUT_BYTES = 256 * 1024 * 1024;
const ROUNDS = Number(process.env.NATIVE_SANDBOX_BENCH_ROUNDS ?? 9);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new RangeError('NATIVE_SANDBOX_BENCH_ROUNDS must be a positive integer');
const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const SOCKET = '/var/run/docker.sock';

const policy = {
  resources: { cpus: 1, memoryBytes: 256 * 1024 ** 2, pids: 256 },
  temporaryStorage: { homeBytes: 64 * 1024 ** 2, tempBytes: 64 * 1024 ** 2 },
  network: { kind: 'isolated' },
  deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
  transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
  streams: SANDBOX_DEFAULT_STREAM_LIMITS,
};
const TRUE = { executable: '/bin/true', args: [], env: {}, cwd: '/' };
const sh = (script) => ({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: '/sandbox/workspace' });

const summary = (samples) => ({ calls: samples.length, ...percentiles(samples) });

/** One engine request over the socket; resolves with the status and the whole body. */
function engine(method, path, body) {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ socketPath: SOCKET, method, path, headers: { 'content-type': 'application/json' } }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode, body: Buffer.concat(chunks) }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** An engine exec of /bin/true in `container` through the API: create, then start attached to its end. */
async function apiExec(container) {
  const created = await engine('POST', `/containers/${container}/exec`, { Cmd: ['/bin/true'], AttachStdout: true, AttachStderr: true });
  const { Id } = JSON.parse(created.body.toString());
  const started = await engine('POST', `/exec/${Id}/start`, { Detach: false, Tty: false });
  if (started.status !== 200) throw new Error(`exec start: ${started.status}`);
}

function cli(args) {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(Buffer.concat(chunks)) : reject(new Error(`docker ${args[0]} exited ${code}`))));
  });
}

function computeOf(sandbox) {
  const id = execFileSync('docker', ['ps', '-q', '--no-trunc', '--filter', `label=dev.native-sandbox.sandbox=${sandbox.id}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
  if (!id) throw new Error('no process container');
  return id;
}

async function drain(stream) {
  let bytes = 0;
  for await (const chunk of stream) bytes += chunk.length;
  return bytes;
}

const backend = createDockerSandboxBackend({ image: IMAGE, namespace: `bench-sessions-${process.pid}`, spillDirectory: mkdtempSync(join(os.tmpdir(), 'bench-sessions-')) });
const sandbox = await backend.reserve({ policy }, { kind: 'in_process' }).start();
const out = { date: new Date().toISOString(), machine: { cpus: os.cpus().length, memoryBytes: os.totalmem() }, engine: {}, config: { calls: CALLS, soak: SOAK, throughputBytes: THROUGHPUT_BYTES } };
try {
  out.engine.version = execFileSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).trim();
  out.versions = { node: process.version };
  await sandbox.run(TRUE);
  const container = computeOf(sandbox);

  // 1. run against docker exec (CLI) against an API exec, interleaved; the order turns each
  // iteration, so each contender follows each other one as often (an engine exec leaves the
  // engine work to do after it answers, which the next call meets).
  const samples = { run: [], dockerExecCli: [], engineExecApi: [] };
  const contenders = [
    ['run', () => sandbox.run(TRUE)],
    ['dockerExecCli', () => cli(['exec', container, '/bin/true'])],
    ['engineExecApi', () => apiExec(container)],
  ];
  for (let i = 0; i < CALLS; i += 1) {
    for (let k = 0; k < contenders.length; k += 1) {
      const [name, call] = contenders[(i + k) % contenders.length];
      const start = process.hrtime.bigint();
      await call();
      samples[name].push(ms(start));
    }
  }
  out.commands = Object.fromEntries(Object.entries(samples).map(([name, list]) => [name, summary(list)]));

  // 2. 64 at once.
  const concurrentStart = process.hrtime.bigint();
  const all = await Promise.all(Array.from({ length: 64 }, () => sandbox.run(TRUE)));
  out.concurrent = { commands: all.length, allExited: all.every((r) => r.exit.kind === 'exited' && r.exit.code === 0), totalMs: round(ms(concurrentStart)) };

  // 3. files.read of 4 KiB against docker cp.
  await sandbox.files.write('four.bin', Buffer.alloc(4096, 7));
  const reads = { filesRead: [], dockerCp: [] };
  const readCalls = Math.min(CALLS, 200);
  for (let i = 0; i < readCalls; i += 1) {
    let start = process.hrtime.bigint();
    await sandbox.files.read('four.bin');
    reads.filesRead.push(ms(start));
    start = process.hrtime.bigint();
    await cli(['cp', `${container}:/sandbox/workspace/four.bin`, '-']);
    reads.dockerCp.push(ms(start));
  }
  out.files = Object.fromEntries(Object.entries(reads).map(([name, list]) => [name, summary(list)]));

  // 4. stdout throughput: a command's against the reserved process's (its own sandbox), interleaved.
  // Each timed from its start's answer to its last byte; the order turns each round.
  const throughput = { command: [], reserved: [], commandCpuSecondsPerGiB: [], reservedCpuSecondsPerGiB: [] };
  const cpuSecondsPerGiB = (cpu, bytes) => ((cpu.user + cpu.system) / 1e6) / (bytes / 1024 ** 3);
  const commandRound = async () => {
    const command = await sandbox.exec(sh(`head -c ${THROUGHPUT_BYTES} /dev/zero`), { stdin: false });
    const start = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    command.stderr.resume();
    const got = await drain(command.stdout);
    await command.exit;
    throughput.command.push((got / 1024 ** 2) / (ms(start) / 1000));
    throughput.commandCpuSecondsPerGiB.push(cpuSecondsPerGiB(process.cpuUsage(cpu), got));
  };
  const reservedRound = async () => {
    const other = await backend.reserve({ policy }, { kind: 'in_process' }).start();
    try {
      const streams = await other.reserveProcess(sh(`head -c ${THROUGHPUT_BYTES} /dev/zero`)).start();
      streams.stdin.end();
      streams.stderr.resume();
      const start = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      const bytes = await drain(streams.stdout);
      await streams.exit;
      throughput.reserved.push((bytes / 1024 ** 2) / (ms(start) / 1000));
      throughput.reservedCpuSecondsPerGiB.push(cpuSecondsPerGiB(process.cpuUsage(cpu), bytes));
    } finally {
      await other.stop();
      await other.destroy();
    }
  };
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const one of round % 2 === 0 ? [commandRound, reservedRound] : [reservedRound, commandRound]) await one();
  }
  // Each round's two contenders ran back to back: their ratio sees the same moment of the machine.
  const pairRatios = throughput.command.map((mibps, i) => mibps / throughput.reserved[i]);
  out.throughput = {
    commandMiBps: round(quantile(throughput.command, 0.5)),
    reservedMiBps: round(quantile(throughput.reserved, 0.5)),
    commandRoundsMiBps: throughput.command.map(round),
    reservedRoundsMiBps: throughput.reserved.map(round),
    roundRatios: pairRatios.map(round),
    medianRoundRatio: round(quantile(pairRatios, 0.5)),
    commandHostCpuSecondsPerGiB: round(quantile(throughput.commandCpuSecondsPerGiB, 0.5)),
    reservedHostCpuSecondsPerGiB: round(quantile(throughput.reservedCpuSecondsPerGiB, 0.5)),
  };

  // 5. RSS over many commands, after a warm-up; then what the guest holds.
  for (let i = 0; i < 1000; i += 1) await sandbox.run(TRUE);
  globalThis.gc?.();
  const hostPidEarly = execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim();
  const supervisorFdsBefore = readdirSync(`/proc/${hostPidEarly}/fd`).length;
  const before = process.memoryUsage().rss;
  for (let i = 0; i < SOAK; i += 1) await sandbox.run(TRUE);
  globalThis.gc?.();
  const after = process.memoryUsage().rss;
  const guest = await sandbox.run(sh("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l"));
  const zombies = Number(guest.stdout.toString().trim());
  // The supervisor is the container's PID 1 here, out of the guest's reach: counted from the host.
  const hostPid = execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim();
  const supervisorFds = readdirSync(`/proc/${hostPid}/fd`).length;
  out.soak = { commands: SOAK, rssBeforeBytes: before, rssAfterBytes: after, rssGrowthBytes: after - before, guestZombies: zombies, supervisorDescriptorsBefore: supervisorFdsBefore, supervisorDescriptorsAfter: supervisorFds };

  out.ratios = {
    runP50OverCli: round(out.commands.run.p50Ms / out.commands.dockerExecCli.p50Ms),
    runP99OverCli: round(out.commands.run.p99Ms / out.commands.dockerExecCli.p99Ms),
    runP50OverApi: round(out.commands.run.p50Ms / out.commands.engineExecApi.p50Ms),
    runP99OverApi: round(out.commands.run.p99Ms / out.commands.engineExecApi.p99Ms),
    readP50OverCp: round(out.files.filesRead.p50Ms / out.files.dockerCp.p50Ms),
    commandOverReservedThroughput: out.throughput.medianRoundRatio,
    commandOverReservedMedians: round(out.throughput.commandMiBps / out.throughput.reservedMiBps),
  };
} finally {
  await sandbox.stop();
  await sandbox.destroy();
}
writeFileSync(fileURLToPath(new URL('./sessions-results.json', import.meta.url)), `${JSON.stringify(out, null, 2)}\n`);
console.log(JSON.stringify({ commands: out.commands, concurrent: out.concurrent, files: out.files, throughput: out.throughput, soak: out.soak, ratios: out.ratios }, null, 2));
