// A TLS endpoint in front of the engine's unix socket that demands a client certificate signed by
// the test CA, as `dockerd --tlsverify` does. It runs in a process of its own because backend
// creation resolves the image synchronously, which would stall an endpoint on the caller's event
// loop. Listens on the port given (default: any free one) with the engine identity given (default
// `server`, see fixtures/tls) and speaks to its parent over IPC: `{ port }` once listening, `{ authorized, refused }` when asked.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createServer } from 'node:tls';
import { join } from 'node:path';

const [fixtures, engineSocket, port = '0', identity = 'server'] = process.argv.slice(2);
const pem = (name) => readFileSync(join(fixtures, name), 'utf8');
const counts = { authorized: 0, refused: 0 };

const server = createServer(
  {
    key: pem(`${identity}-key.pem`),
    cert: pem(`${identity}.pem`),
    ca: pem('ca.pem'),
    requestCert: true,
    rejectUnauthorized: true,
    // The client half-closes an attach connection to deliver stdin EOF and keeps reading output.
    allowHalfOpen: true,
  },
  (tls) => {
    if (tls.authorized) counts.authorized += 1;
    const engine = connect(engineSocket);
    tls.pipe(engine).pipe(tls);
    const close = () => {
      tls.destroy();
      engine.destroy();
    };
    tls.on('error', close);
    engine.on('error', close);
  },
);
server.on('tlsClientError', () => {
  counts.refused += 1;
});
server.listen(Number(port), '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('message', () => process.send({ ...counts }));
process.on('disconnect', () => process.exit(0));
