// One measurement by one contender, in its own process (its memory and CPU are its own). Prints
// one JSON line. `bench/run.mjs` calls it in interleaved rounds; nothing here asserts anything.
//   node bench/one.mjs transfer <native|dockerode|limit|download> <sourceDirectory>
//   node bench/one.mjs exact <files>
//   node bench/one.mjs iterable native <files>
//   node bench/one.mjs stdout <native|dockerode|raw> <bytes> [runtime]
//   node bench/one.mjs stdin <native|dockerode|raw|blocking> <bytes> [writeBytes, 64 KiB]
//   node bench/one.mjs start <native|docker-run|dockerode> <runs> [runtime]
//   node bench/one.mjs concurrent <native|docker-run> <count>
//   node bench/one.mjs cleanup <keepFile>
// With NATIVE_SANDBOX_BENCH_KEEP=<file>, transfer and exact runs leave what they wrote (sandboxes,
// containers, volumes, host directories) in place and list it in that file, one JSON line each;
// `cleanup` removes it all at the end of the bench. Deleting thousands of files makes the next
// thousands of file creations slow on an ext4 file system without a journal (the kernel skips
// every recently freed inode, for up to 6 minutes), which would land on whichever contender runs
// next.
import { execFile, spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import tarFs from 'tar-fs';
import { fileFromBytes, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';

const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const SOCKET = '/var/run/docker.sock';
const USER = '65532:65532';
const docker = new Docker({ socketPath: SOCKET });
const [measurement, contender, ...rest] = process.argv.slice(2);

const request = (network = 'isolated') => ({
  policy: {
    resources: { cpus: 2, memoryBytes: 512 * 1024 ** 2, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 ** 2, tempBytes: 64 * 1024 ** 2 },
    network: { kind: network },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
});
/** The same hardening the native backend applies, for the containers other contenders make. */
const hardening = (runtime) => ({
  NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], ReadonlyRootfs: true, Init: true,
  LogConfig: { Type: 'none', Config: {} }, Memory: 512 * 1024 ** 2, MemorySwap: 512 * 1024 ** 2, PidsLimit: 128, NanoCpus: 2e9,
  ...(runtime ? { Runtime: runtime } : {}),
});

function nativeBackend(runtime, namespace = `bench-${process.pid}`) {
  const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-spill-'));
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spill, ...(runtime ? { runtime } : {}) });
  return { backend, close: () => rmSync(spill, { recursive: true, force: true }) };
}

const KEEP = process.env.NATIVE_SANDBOX_BENCH_KEEP;
/** Removes what a run wrote now, or lists it for `cleanup` when the bench keeps it. */
const leave = {
  async sandbox(sandbox) {
    if (KEEP) appendFileSync(KEEP, `${JSON.stringify({ sandbox: sandbox.recoveryRecord, namespace: `bench-${process.pid}` })}\n`);
    else await sandbox.destroy();
  },
  async container(container, volume) {
    if (KEEP) appendFileSync(KEEP, `${JSON.stringify({ container: container.id, volume })}\n`);
    else {
      await container.remove({ force: true });
      await docker.getVolume(volume).remove();
    }
  },
  directory(path) {
    if (KEEP) appendFileSync(KEEP, `${JSON.stringify({ directory: path })}\n`);
    else rmSync(path, { recursive: true, force: true });
  },
};

/**
 * Removes everything listed in `keepFile`: sandboxes by reconciling their records, then
 * destroying. Every line is tried; the failures are reported together at the end.
 */
async function cleanup(keepFile) {
  const lines = readFileSync(keepFile, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
  const failures = [];
  for (const line of lines) {
    try {
      if (line.sandbox) {
        const { backend, close } = nativeBackend(undefined, line.namespace);
        try {
          const found = await backend.reconcile(line.sandbox);
          if (found.kind === 'matched') await found.owner.destroy();
          else if (found.kind !== 'absent') throw new Error(`sandbox ${line.sandbox.sandboxId}: ${found.kind} ${found.reason ?? ''}`);
        } finally {
          close();
        }
      } else if (line.container) {
        await docker.getContainer(line.container).remove({ force: true });
        await docker.getVolume(line.volume).remove();
      } else rmSync(line.directory, { recursive: true, force: true });
    } catch (error) {
      failures.push(`${JSON.stringify(line).slice(0, 200)}: ${error.message}`);
    }
  }
  if (failures.length > 0) throw new Error(`cleanup left ${failures.length} of ${lines.length} behind:\n${failures.join('\n')}`);
  return { removed: lines.length };
}

const seconds = (t0) => (performance.now() - t0) / 1000;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
const firstData = (stream) => new Promise((resolve, reject) => { stream.once('data', resolve); stream.once('error', reject); });

/** Samples this process's RSS every 5 ms while `work` runs: the peak above the RSS before it. */
async function withRss(work) {
  const idle = process.memoryUsage.rss();
  let peak = idle;
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 5);
  try {
    const value = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, rssAboveIdleMiB: (peak - idle) / 1024 ** 2 };
  } finally {
    clearInterval(timer);
  }
}

function sh(script) {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${script}: exit ${code}: ${stderr}`))));
  });
}

/** Import `source` into a fresh workspace, then export the workspace to a fresh host directory. */
async function transfer(source) {
  const out = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-out-'));
  const destination = join(out, 'dest');
  try {
    if (contender === 'native') {
      const { backend, close } = nativeBackend();
      const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
      try {
        let t0 = performance.now();
        const imported = await withRss(() => importSandboxDirectory(sandbox, source));
        const importSeconds = seconds(t0);
        await sandbox.stop();
        t0 = performance.now();
        const exported = await withRss(() => exportSandboxDirectory(sandbox, { kind: 'workspace' }, destination));
        return { importSeconds, exportSeconds: seconds(t0), importRssMiB: imported.rssAboveIdleMiB, exportRssMiB: exported.rssAboveIdleMiB };
      } finally {
        await leave.sandbox(sandbox);
        close();
      }
    }
    const volume = `bench-${process.pid}`;
    const container = await docker.createContainer({
      Image: IMAGE, Entrypoint: ['/never-started'], User: USER,
      HostConfig: { ReadonlyRootfs: true, Mounts: [{ Type: 'volume', Source: volume, Target: '/sandbox/workspace' }] },
    });
    try {
      const archive = `http://engine/containers/${container.id}/archive?path=/sandbox/workspace`;
      let t0 = performance.now();
      let imported;
      if (contender === 'dockerode') {
        imported = await withRss(() => container.putArchive(tarFs.pack(source), { path: '/sandbox/workspace' }));
      } else {
        // The host-inclusive limit: the host's tar piped into curl's upload.
        await sh(`tar -cf - -C '${source}' . | curl -sf --unix-socket ${SOCKET} -X PUT -H 'Content-Type: application/x-tar' -T - '${archive}'`);
      }
      const importSeconds = seconds(t0);
      t0 = performance.now();
      let exported;
      if (contender === 'dockerode') {
        exported = await withRss(async () => pipeline(await container.getArchive({ path: '/sandbox/workspace' }), tarFs.extract(destination)));
      } else if (contender === 'download') {
        // The archive endpoint's delivery to curl alone: the same archive read and thrown away,
        // tar and disk left out (imported as the limit imports).
        await sh(`curl -sf --unix-socket ${SOCKET} '${archive}' > /dev/null`);
      } else {
        await sh(`mkdir '${destination}' && curl -sf --unix-socket ${SOCKET} '${archive}' | tar -xf - -C '${destination}'`);
      }
      return { importSeconds, exportSeconds: seconds(t0), importRssMiB: imported?.rssAboveIdleMiB, exportRssMiB: exported?.rssAboveIdleMiB };
    } finally {
      await leave.container(container, volume);
    }
  } finally {
    leave.directory(out);
  }
}

/** Exact-file exports (`{ kind: 'files', paths }`) of `files` files of 4 KiB. */
async function exact(files) {
  const { backend, close } = nativeBackend();
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const body = Buffer.alloc(4096, 7);
    const paths = Array.from({ length: files }, (_, i) => `d${i % 20}/f${i}.bin`);
    await sandbox.importTree(paths.map((path) => fileFromBytes(path, body)));
    await sandbox.stop();
    const t0 = performance.now();
    let read = 0;
    await sandbox.exportTree({ kind: 'files', paths }, async (entry) => {
      for await (const chunk of entry.bytes) void chunk;
      read += 1;
    });
    if (read !== files) throw new Error(`exported ${read} of ${files}`);
    return { seconds: seconds(t0), filesPerSecond: files / seconds(t0) };
  } finally {
    await leave.sandbox(sandbox);
    close();
  }
}

/**
 * `files` files of 4 KiB through the JavaScript-facing calls: `importTree` from an iterable of
 * `fileFromBytes` entries, then a workspace `exportTree` whose consumer reads every byte.
 */
async function iterable(files) {
  const { backend, close } = nativeBackend();
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const body = Buffer.alloc(4096, 7);
    function* entries() {
      for (let d = 0; d < 20; d += 1) {
        yield { kind: 'directory', path: `d${d}` };
        for (let i = d; i < files; i += 20) yield fileFromBytes(`d${d}/f${i}.bin`, body);
      }
    }
    const t0 = performance.now();
    const imported = await sandbox.importTree(entries(), { quotas: { maxFiles: files } });
    const importSeconds = seconds(t0);
    if (imported.files !== BigInt(files)) throw new Error(`imported ${imported.files} of ${files}`);
    await sandbox.stop();
    const t1 = performance.now();
    let read = 0;
    await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind !== 'file') return;
      for await (const chunk of entry.bytes) void chunk;
      read += 1;
    });
    const exportSeconds = seconds(t1);
    if (read !== files) throw new Error(`exported ${read} of ${files}`);
    return { importSeconds, exportSeconds };
  } finally {
    await leave.sandbox(sandbox);
    close();
  }
}

/** Reads a stream to its end, counting bytes; CPU of this whole process while it ran. */
async function drain(stream, expected, what) {
  let received = 0;
  for await (const chunk of stream) received += chunk.length;
  if (expected !== undefined && received !== expected) throw new Error(`${what} received ${received} of ${expected}`);
  return received;
}

function cpuSeconds(since) {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}

/** The attach socket of container `id` for `streams` (a query), upgraded by hand. */
function rawAttach(id, streams) {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath: SOCKET, method: 'POST', path: `/containers/${id}/attach?stream=1&${streams}`, headers: { Connection: 'Upgrade', Upgrade: 'tcp' } });
    req.on('upgrade', (_res, upgraded, head) => {
      if (head.length > 0) upgraded.unshift(head);
      resolve(upgraded);
    });
    req.on('response', (res) => reject(new Error(`raw attach answered ${res.statusCode}`)));
    req.on('error', reject);
    req.end();
  });
}

/** `bytes` of stdout from `head -c`, from start to the last byte. */
async function stdout(bytes, runtime) {
  const command = ['sh', '-c', `head -c ${bytes} /dev/zero`];
  if (contender === 'native') {
    const { backend, close } = nativeBackend(runtime);
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const child = sandbox.reserveProcess({ executable: '/bin/sh', args: command.slice(1), env: {}, cwd: sandbox.workspace });
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      const streams = await child.start();
      streams.stdin.end();
      streams.stderr.resume();
      await drain(streams.stdout, bytes, 'native');
      return { seconds: seconds(t0), cpuSeconds: cpuSeconds(cpu) };
    } finally {
      await sandbox.destroy();
      close();
    }
  }
  // As for native (whose process start creates, attaches and starts its container), the clock
  // runs from before the container's creation.
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const container = await docker.createContainer({ Image: IMAGE, Cmd: command, User: USER, AttachStdout: true, AttachStderr: true, HostConfig: hardening(runtime) });
  try {
    if (contender === 'dockerode') {
      const stream = await container.attach({ stream: true, stdout: true, stderr: true });
      const out = new PassThrough();
      container.modem.demuxStream(stream, out, new PassThrough().resume());
      stream.on('end', () => out.end());
      await container.start();
      await drain(out, bytes, 'dockerode');
      return { seconds: seconds(t0), cpuSeconds: cpuSeconds(cpu) };
    }
    // The raw attach socket, read and counted without demultiplexing: the engine's own rate.
    const socket = await rawAttach(container.id, 'stdout=1&stderr=1');
    await container.start();
    const received = await drain(socket);
    // Every 8-byte frame header counted too: at least `bytes` arrived.
    if (received < bytes) throw new Error(`raw received ${received} of ${bytes}`);
    return { seconds: seconds(t0), cpuSeconds: cpuSeconds(cpu) };
  } finally {
    await container.remove({ force: true });
  }
}

/**
 * Writes `bytes` into `cat > /dev/null` in writes of `writeBytes`, waiting for 'drain' whenever a
 * write says so, from the first write to the exit. `raw` writes the attach socket itself: HTTP
 * upgrade by hand, no client library (the same socket dockerode's hijacked attach hands back).
 * `blocking` is a writer outside Node (bench/stdin-blocking-writer.py, python3): blocking writes
 * of the same size on the same socket, no event loop; its CPU is its own process's.
 */
async function stdin(bytes, writeBytes) {
  const block = Buffer.alloc(writeBytes, 1);
  const feed = async (writable) => {
    for (let sent = 0; sent < bytes; sent += block.length) {
      if (!writable.write(block.subarray(0, Math.min(block.length, bytes - sent)))) await new Promise((resolve) => writable.once('drain', resolve));
    }
    writable.end();
  };
  const command = ['sh', '-c', 'cat > /dev/null'];
  if (contender === 'native') {
    const { backend, close } = nativeBackend();
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const child = sandbox.reserveProcess({ executable: '/bin/sh', args: command.slice(1), env: {}, cwd: sandbox.workspace });
      const streams = await child.start();
      streams.stdout.resume();
      streams.stderr.resume();
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      await feed(streams.stdin);
      const exit = await streams.exit;
      if (exit.kind !== 'exited' || exit.code !== 0) throw new Error(`native cat ended ${JSON.stringify(exit)}`);
      return { seconds: seconds(t0), cpuSeconds: cpuSeconds(cpu) };
    } finally {
      await sandbox.destroy();
      close();
    }
  }
  if (contender === 'blocking') {
    const config = { socket: SOCKET, image: IMAGE, user: USER, cmd: command, hostConfig: hardening(), bytes, writeBytes };
    const out = await new Promise((resolve, reject) =>
      execFile('python3', [fileURLToPath(new URL('./stdin-blocking-writer.py', import.meta.url)), JSON.stringify(config)], { encoding: 'utf8' }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    );
    return JSON.parse(out.trim().split('\n').at(-1));
  }
  const container = await docker.createContainer({ Image: IMAGE, Cmd: command, User: USER, AttachStdin: true, AttachStdout: true, AttachStderr: true, OpenStdin: true, StdinOnce: true, HostConfig: hardening() });
  try {
    const stream = contender === 'dockerode' ? await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true }) : await rawAttach(container.id, 'stdin=1&stdout=1&stderr=1');
    stream.resume();
    await container.start();
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    await feed(stream);
    const { StatusCode } = await container.wait();
    if (StatusCode !== 0) throw new Error(`${contender} cat ended ${StatusCode}`);
    return { seconds: seconds(t0), cpuSeconds: cpuSeconds(cpu) };
  } finally {
    await container.remove({ force: true });
  }
}

/** One start to the first stdout byte of `echo x`, in milliseconds. */
async function firstByte(kind, backend, runtime) {
  const t0 = performance.now();
  if (kind === 'native') {
    const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
    try {
      const streams = await sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'echo x'], env: {}, cwd: sandbox.workspace }).start();
      streams.stderr.resume();
      streams.stdin.end();
      await firstData(streams.stdout);
      const elapsed = performance.now() - t0;
      streams.stdout.resume();
      await streams.exit;
      return elapsed;
    } finally {
      await sandbox.destroy();
    }
  }
  if (kind === 'docker-run') {
    const args = ['run', '--rm', '-i', '--network', 'none', '--log-driver', 'none', ...(runtime ? ['--runtime', runtime] : []), IMAGE, 'sh', '-c', 'echo x'];
    const child = spawn('docker', args, { stdio: ['pipe', 'pipe', 'ignore'] });
    child.stdin.end();
    await firstData(child.stdout);
    const elapsed = performance.now() - t0;
    child.stdout.resume();
    await new Promise((resolve) => child.on('close', resolve));
    return elapsed;
  }
  const container = await docker.createContainer({ Image: IMAGE, Cmd: ['sh', '-c', 'echo x'], User: USER, AttachStdin: true, AttachStdout: true, AttachStderr: true, OpenStdin: true, StdinOnce: true, HostConfig: hardening(runtime) });
  const stream = await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
  const out = new PassThrough();
  container.modem.demuxStream(stream, out, new PassThrough().resume());
  await container.start();
  stream.end();
  await firstData(out);
  const elapsed = performance.now() - t0;
  await container.wait();
  await container.remove({ force: true });
  return elapsed;
}

async function start(runs, runtime) {
  const { backend, close } = nativeBackend(runtime);
  try {
    await firstByte(contender, backend, runtime); // warm-up, not counted
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push(await firstByte(contender, backend, runtime));
    return { medianMs: median(samples), samplesMs: samples };
  } finally {
    close();
  }
}

/** `count` starts at once: each one's first byte from the common start, and the wall time. */
async function concurrent(count) {
  const { backend, close } = nativeBackend();
  try {
    const t0 = performance.now();
    const samples = await Promise.all(Array.from({ length: count }, () => firstByte(contender, backend).then(() => performance.now() - t0)));
    return { p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), wallMs: performance.now() - t0 };
  } finally {
    close();
  }
}

const measurements = {
  transfer: () => transfer(rest[0]),
  exact: () => exact(Number(rest[0])),
  iterable: () => iterable(Number(rest[0])),
  stdout: () => stdout(Number(rest[0]), rest[1]),
  stdin: () => stdin(Number(rest[0]), Number(rest[1] ?? 64 * 1024)),
  start: () => start(Number(rest[0]), rest[1]),
  concurrent: () => concurrent(Number(rest[0])),
  cleanup: () => cleanup(contender),
};
if (!measurements[measurement]) throw new Error(`unknown measurement ${measurement}`);
const result = await measurements[measurement]();
console.log(JSON.stringify({ measurement, contender, ...result }));
