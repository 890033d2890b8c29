// A front in front of the engine's unix socket, as a remote engine would be reached. With an
// identity from fixtures/tls (default `server`) it is TLS demanding a client certificate signed by
// the test CA, as `dockerd --tlsverify` does; with `plain` it is plain TCP, as `dockerd -H tcp://`.
// It runs in a process of its own so a test can make the engine vanish at once (SIGKILL) and come
// back on the same port, independent of the test's event loop. Listens on the port given (default: any
// free one) and speaks to its parent over IPC: `{ port }` once listening, `{ authorized,
// refused, connections }` when asked.
import { readFileSync } from 'node:fs';
import { connect, createServer as createPlainServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { join } from 'node:path';

const [fixtures, engineSocket, port = '0', identity = 'server'] = process.argv.slice(2);
const pem = (name) => readFileSync(join(fixtures, name), 'utf8');
const counts = { authorized: 0, refused: 0, connections: 0 };

function relay(client) {
  counts.connections += 1;
  if (client.authorized) counts.authorized += 1;
  const engine = connect(engineSocket);
  client.pipe(engine).pipe(client);
  const close = () => {
    client.destroy();
    engine.destroy();
  };
  client.on('error', close);
  engine.on('error', close);
}

// The client half-closes an attach connection to deliver stdin EOF and keeps reading output.
const server =
  identity === 'plain'
    ? createPlainServer({ allowHalfOpen: true }, relay)
    : createTlsServer(
        {
          key: pem(`${identity}-key.pem`),
          cert: pem(`${identity}.pem`),
          ca: pem('ca.pem'),
          requestCert: true,
          rejectUnauthorized: true,
          allowHalfOpen: true,
        },
        relay,
      );
server.on('tlsClientError', () => {
  counts.refused += 1;
});
server.listen(Number(port), '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('message', () => process.send({ ...counts }));
process.on('disconnect', () => process.exit(0));
