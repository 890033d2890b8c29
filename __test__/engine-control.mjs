// Restarts and kills the local Docker engine this test machine runs (started by
// scripts/ensure-docker.sh with nohup, root, the default socket), for the engine-fault suite.
// `live-restore` is switched in /etc/docker/daemon.json and applied by the restart; every change
// to that file is undone by `restoreEngineConfig()`.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const CONFIG = '/etc/docker/daemon.json';
const ENSURE = fileURLToPath(new URL('../scripts/ensure-docker.sh', import.meta.url));
const original = existsSync(CONFIG) ? readFileSync(CONFIG, 'utf8') : undefined;

/** Why this machine's engine cannot be restarted by a test, or `undefined` when it can. */
export function engineNotControllable() {
  if (process.env.DOCKER_HOST && !process.env.DOCKER_HOST.startsWith('unix://')) return `DOCKER_HOST=${process.env.DOCKER_HOST} is not a local engine`;
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'restarting dockerd needs root';
  if (dockerdPids().length !== 1) return 'not exactly one dockerd runs here';
  return undefined;
}

function dockerdPids() {
  const found = spawnSync('pgrep', ['-x', 'dockerd'], { encoding: 'utf8' });
  return found.stdout.split('\n').filter(Boolean).map(Number);
}

function writeConfig(liveRestore) {
  const config = original === undefined ? {} : JSON.parse(original);
  if (liveRestore) config['live-restore'] = true;
  else delete config['live-restore'];
  writeFileSync(CONFIG, `${JSON.stringify(config, null, 2)}\n`);
}

/** Puts daemon.json back as it was before this module loaded. */
export function restoreEngineConfig() {
  if (original === undefined) rmSync(CONFIG, { force: true });
  else writeFileSync(CONFIG, original);
}

/** Whether the engine answers now. */
export function engineAnswers() {
  return spawnSync('docker', ['info', '--format', '{{.ID}}'], { timeout: 5_000 }).status === 0;
}

/**
 * Stops dockerd with `signal` (`SIGTERM`: a clean shutdown, which stops every container unless
 * `live-restore` is on; `SIGKILL`: the engine dies, its containers run on) and waits until it is
 * gone. The engine stays down until `startEngine()`.
 */
export async function stopEngine(signal = 'SIGTERM') {
  const pids = dockerdPids();
  for (const pid of pids) process.kill(pid, signal);
  for (let waited = 0; dockerdPids().length > 0; waited += 100) {
    if (waited > 60_000) throw new Error('dockerd did not exit within 60 s');
    await sleep(100);
  }
}

/**
 * Starts dockerd (with `live-restore` as asked) and waits until it answers. It runs in a session
 * of its own, so a signal to this test's process group (a CI timeout) never reaches the engine.
 */
export async function startEngine({ liveRestore = false } = {}) {
  writeConfig(liveRestore);
  execFileSync('setsid', ['bash', ENSURE], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, NATIVE_SANDBOX_DOCKERD_WAIT: '60' } });
}

/** Restarts dockerd: stopped with `signal`, then started with `live-restore` as asked. */
export async function restartEngine({ liveRestore = false, signal = 'SIGTERM' } = {}) {
  await stopEngine(signal);
  await startEngine({ liveRestore });
}

/** Makes the current dockerd run with `live-restore` as asked (a restart when it differs). */
export async function engineWithLiveRestore(liveRestore) {
  const info = execFileSync('docker', ['info', '--format', '{{.LiveRestoreEnabled}}'], { encoding: 'utf8' }).trim();
  if ((info === 'true') !== liveRestore) await restartEngine({ liveRestore });
}
