// Starts and controls the TLS front (`tls-front.mjs`) from a test: a front in a process of its
// own before the real engine's socket, whose `kill()` makes the engine vanish at once.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const fixtures = join(here, 'fixtures', 'tls');
export const pem = (name) => readFileSync(join(fixtures, name), 'utf8');
export const CA = pem('ca.pem');
export const CLIENT = { ca: CA, cert: pem('client.pem'), key: pem('client-key.pem') };
export const engineSocket = (process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '');

/** A TLS front in a process of its own, on `port` (0: any free one), presenting `identity`. */
export async function startFront(port = 0, identity = 'server') {
  const child = fork(join(here, 'tls-front.mjs'), [fixtures, engineSocket, String(port), identity], { stdio: 'inherit' });
  const replies = [];
  child.on('message', (message) => replies.shift()?.(message));
  const nextReply = () => new Promise((resolve) => replies.push(resolve));
  // A front that cannot listen (a port in use) fails the test instead of hanging it.
  const exited = new Promise((_, reject) => child.once('exit', (code) => reject(new Error(`the front exited (${code}) before listening`))));
  exited.catch(() => {});
  const listening = await Promise.race([nextReply(), exited]);
  return {
    port: listening.port,
    /** What the front has seen so far. */
    counts() {
      const reply = nextReply();
      child.send('counts');
      return reply;
    },
    /** The engine becomes unreachable at once: every connection through the front drops. */
    kill() {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      return gone;
    },
    close: () => {
      if (child.connected) child.disconnect();
    },
  };
}
