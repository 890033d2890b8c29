// Helpers for the tests against the real engine: a backend in a namespace of its own, request
// policies, running one process to completion, and counting what the namespace left behind.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDockerSandboxBackend } from 'native-sandbox/docker';

export const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
export const MiB = 1024 * 1024;

/** One id per test run (set by scripts/test.sh), so the last suite can find all our objects. */
export const RUN = process.env.NATIVE_SANDBOX_TEST_RUN ?? `r${process.pid}`;

export function uniqueNamespace(label) {
  return `${RUN}-${label}-${process.pid}-${Date.now().toString(36)}`;
}

export function spillDirectory() {
  return mkdtempSync(join(tmpdir(), 'native-sandbox-spill-'));
}

export function dockerBackend(namespace, extra = {}) {
  return createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory(), ...extra });
}

export function request(edit = () => {}) {
  const policy = {
    resources: { cpus: 1, memoryBytes: 128 * MiB, pids: 64 },
    temporaryStorage: { homeBytes: 8 * MiB, tempBytes: 8 * MiB },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: { chunkBytes: 65536, metadataBatchBytes: 65536, mergeFanIn: 8 },
    streams: { maxBufferedInputBytes: MiB, maxBufferedOutputBytes: MiB, highWaterMark: 64 * 1024 },
  };
  edit(policy);
  return { policy };
}

export function collect(stream) {
  const chunks = [];
  stream.on('data', (chunk) => chunks.push(chunk));
  return new Promise((resolve, reject) => {
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** Starts `sandbox`'s process with `sh -c script`, feeds `input`, and waits for everything. */
export function runShell(sandbox, script, options) {
  return runProcess(sandbox, '/bin/sh', ['-c', script], options);
}

/** Starts `sandbox`'s process `executable args`, feeds `input`, and waits for everything. */
export async function runProcess(sandbox, executable, args, { input = '', env = {} } = {}) {
  const process = sandbox.reserveProcess({ executable, args, env, cwd: sandbox.workspace });
  const streams = await process.start();
  const stdout = collect(streams.stdout);
  const stderr = collect(streams.stderr);
  streams.stdin.end(input);
  const [out, err, exit] = await Promise.all([stdout, stderr, streams.exit]);
  return { stdout: out.toString(), stderr: err.toString(), exit };
}

/** Starts a sandbox, runs `script`, destroys; returns what the process produced. */
export async function runOnce(backend, script, { edit, input, env } = {}) {
  const sandbox = await backend.reserve(request(edit), { kind: 'in_process' }).start();
  try {
    return await runShell(sandbox, script, { input, env });
  } finally {
    await sandbox.destroy();
  }
}

function listed(args) {
  return execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean);
}

/** The ID of `sandbox`'s workspace holder container. */
export function holderOf(sandbox) {
  return execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${sandbox.id}`, '--filter', 'label=dev.native-sandbox.role=export'], { encoding: 'utf8' }).trim();
}

/**
 * `sandbox`'s workspace holder once it stopped, as `{ running, exitCode }`, waiting for it up to
 * 10 s: a transfer settles as soon as its helper's work is whole, before the engine reports the
 * helper's exit (the next transfer waits for that).
 */
export async function stoppedHolder(sandbox) {
  const holder = holderOf(sandbox);
  const state = () => {
    const [running, exitCode] = execFileSync('docker', ['inspect', '--format', '{{.State.Running}} {{.State.ExitCode}}', holder], { encoding: 'utf8' }).trim().split(' ');
    return { running: running === 'true', exitCode: Number(exitCode) };
  };
  for (let waited = 0; state().running && waited < 100; waited++) await new Promise((resolve) => setTimeout(resolve, 100));
  return state();
}

/** `check()`'s first truthy value, asked every 50 ms; fails naming `what` after `ms`. */
export async function waitFor(check, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every container, volume and network labelled with `namespace`. */
export function leftovers(namespace) {
  const filter = `label=dev.native-sandbox.namespace=${namespace}`;
  return {
    containers: listed(['ps', '-aq', '--filter', filter]),
    volumes: listed(['volume', 'ls', '-q', '--filter', filter]),
    networks: listed(['network', 'ls', '-q', '--filter', filter]),
  };
}

export const NOTHING = { containers: [], volumes: [], networks: [] };

/** Every object of this test run, whatever its namespace. */
export function runLeftovers() {
  const labelled = (args) =>
    listed([...args, '--filter', 'label=dev.native-sandbox.namespace', '--format', '{{.Label "dev.native-sandbox.namespace"}}']);
  const ours = (namespaces) => namespaces.filter((ns) => ns.startsWith(`${RUN}-`));
  return {
    containers: ours(labelled(['ps', '-a'])),
    volumes: ours(listed(['volume', 'ls', '--filter', 'label=dev.native-sandbox.namespace', '--format', '{{.Label "dev.native-sandbox.namespace"}}'])),
    networks: ours(labelled(['network', 'ls'])),
  };
}

/**
 * A controller in a child process: a Docker backend of `namespace` (with `backendOptions`) whose
 * sandbox persists its record to `recordFile` and runs `sleep 600`; it prints `running` once the
 * process started, then waits to be killed. `network` is the request's (default isolated).
 * `work`: 'process' (the reserved process only), 'commands' (three commands and a file write in
 * flight, no reserved process: the supervisor is the process container's entry) or 'both' (the
 * process, then the same commands beside it).
 */
export function spawnController(namespace, recordFile, backendOptions = {}, pids = 64, network = { kind: 'isolated' }, work = 'process') {
  const helpers = new URL('./docker-helpers.mjs', import.meta.url).href;
  const source = `
    import { writeFileSync } from 'node:fs';
    import { dockerBackend, request } from ${JSON.stringify(helpers)};
    const backend = dockerBackend(${JSON.stringify(namespace)}, ${JSON.stringify(backendOptions)});
    const recovery = { kind: 'persisted', persist: async (record) => writeFileSync(${JSON.stringify(recordFile)}, JSON.stringify(record)) };
    const sandbox = await backend.reserve(request((p) => Object.assign(p, { resources: { ...p.resources, pids: ${pids} }, network: ${JSON.stringify(network)} })), recovery).start();
    const work = ${JSON.stringify(work)};
    if (work !== 'commands') {
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'sleep 600'], env: {}, cwd: sandbox.workspace });
      await process.start();
    }
    if (work !== 'process') {
      for (let i = 0; i < 3; i += 1) await sandbox.exec({ executable: '/bin/sh', args: ['-c', 'sleep 600 & sleep 600'], env: {}, cwd: sandbox.workspace });
      sandbox.files.write('in-flight.bin', (async function* () { yield new Uint8Array(1024); await new Promise(() => {}); })()).catch(() => {});
      await sandbox.files.stat('.');
    }
    console.log('running');
    setInterval(() => {}, 1000);
  `;
  return spawn(globalThis.process.execPath, ['--input-type=module', '-e', source], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}
