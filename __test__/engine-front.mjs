// A unix socket in front of the engine's own, counting the requests and the attach requests that
// come through it: a backend that reached the engine another way leaves the counts unchanged. It
// can also end the attach connections it relays, cleanly, as a restarted engine or a proxy's idle
// cut does, while the engine and its containers go on; and play a slow engine (each request of a
// new connection relayed late) or a hung one (a new connection accepted and never answered).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engineSocket } from './tls-front-control.mjs';

/** Listens on a fresh socket path; `close()` ends it and every connection it holds. */
export async function startEngineFront() {
  const directory = mkdtempSync(join(tmpdir(), 'native-sandbox-engine-'));
  const path = join(directory, 'engine.sock');
  const counts = { requests: 0, attaches: 0 };
  /** How new connections are served: relayed (`delayMs` late), or held unanswered (`hung`). */
  const mode = { delayMs: 0, hung: false };
  const open = new Set();
  /** The relayed attach connections: [client, engine] socket pairs. */
  const attaches = new Set();
  const server = createServer({ allowHalfOpen: true }, (client) => {
    if (mode.hung) {
      open.add(client);
      client.on('close', () => open.delete(client));
      client.on('error', () => client.destroy());
      client.resume();
      return;
    }
    const engine = connect({ path: engineSocket, allowHalfOpen: true });
    for (const socket of [client, engine]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
    }
    const cut = () => {
      client.destroy();
      engine.destroy();
    };
    client.on('error', cut);
    engine.on('error', cut);
    // Every request head seen on the connection (a pooled connection carries several).
    client.on('data', (chunk) => {
      const text = chunk.toString('latin1');
      counts.requests += (text.match(/(?:^|\r\n)(?:GET|POST|PUT|DELETE|HEAD) \/\S* HTTP\/1\.1\r\n/g) ?? []).length;
      if (/^POST \/(?:v[\d.]+\/)?containers\/[^/]+\/attach\?/.test(text)) {
        counts.attaches += 1;
        const pair = [client, engine];
        attaches.add(pair);
        client.on('close', () => attaches.delete(pair));
      }
    });
    const { delayMs } = mode;
    if (delayMs > 0) {
      // Every chunk the client sends (a request of the reaper's: no body) goes on delayMs later,
      // in order.
      let relayed = Promise.resolve();
      const later = (step) => {
        relayed = relayed.then(() => new Promise((resolve) => setTimeout(resolve, delayMs))).then(() => {
          if (!engine.destroyed) step();
        });
      };
      client.on('data', (chunk) => later(() => engine.write(chunk)));
      client.on('end', () => later(() => engine.end()));
    } else {
      client.pipe(engine);
    }
    engine.pipe(client);
  });
  await new Promise((resolve) => server.listen(path, resolve));
  return {
    path,
    counts,
    /** New connections relay each request `ms` late (0: at once again). */
    delay(ms) {
      mode.delayMs = ms;
    },
    /** New connections are accepted and never answered (`false`: relayed again). */
    hang(hung = true) {
      mode.hung = hung;
    },
    /** Ends every attach connection now: the client reads a clean end, the engine a reset. */
    cutAttaches() {
      for (const [client, engine] of attaches) {
        engine.unpipe(client);
        engine.destroy();
        client.end();
      }
      attaches.clear();
    },
    close() {
      server.close();
      // Idle pooled connections of the backends' clients would otherwise hold the test open.
      for (const socket of open) socket.destroy();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
