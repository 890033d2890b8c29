// The upstream world of the egress tests, made by the test and removed by it: a network of its
// own (198.18.N.0/24, outside the private ranges, so the gateway treats it as the internet), a
// resolver that answers the test's names and logs every query it gets, a plain HTTP server and an
// HTTPS server with a test certificate, and an address of the host's own on an interface of the
// test's (a veth pair, one end with a 198.19.255.N address, in the benchmarking range the gateway
// counts as public, outside the world's 198.18 subnets: the host's uplink address as a public
// host would have it). No traffic ever goes to an address the test
// did not make.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUN } from './docker-helpers.mjs';

export const NODE_IMAGE = 'native-sandbox/node-agent:1';
export const BUSYBOX_IMAGE = 'native-sandbox/busybox:1';

const docker = (args) => execFileSync('docker', args, { encoding: 'utf8' }).trim();

// A resolver: A records from NAMES (JSON: name -> address), NXDOMAIN for the rest; one log line
// per query, `query <name>`.
const RESOLVER = `
const dgram = require('node:dgram');
const names = JSON.parse(process.env.NAMES);
const socket = dgram.createSocket('udp4');
socket.on('message', (m, from) => {
  let at = 12; const labels = [];
  while (m[at]) { labels.push(m.subarray(at + 1, at + 1 + m[at]).toString()); at += m[at] + 1; }
  const name = labels.join('.').toLowerCase();
  const qtype = m.readUInt16BE(at + 1);
  console.log('query ' + name);
  const question = m.subarray(12, at + 5);
  const address = names[name];
  const answer = address && qtype === 1;
  const head = Buffer.from([m[0], m[1], 0x81, address ? 0x80 : 0x83, 0, 1, 0, answer ? 1 : 0, 0, 0, 0, 0]);
  const record = answer ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...address.split('.').map(Number)]) : Buffer.alloc(0);
  socket.send(Buffer.concat([head, question, record]), from.port, from.address);
});
socket.bind(53);
`;

// An HTTPS server that says which server name it was asked for.
// OpenSSL's default security level refuses every signature algorithm busybox's `wget` offers:
// level 0 lets the test's busybox guests speak HTTPS too.
const HTTPS = `
const https = require('node:https');
https.createServer({ key: process.env.KEY, cert: process.env.CERT, ciphers: 'ALL:@SECLEVEL=0' }, (req, res) => {
  res.end('secure ' + req.socket.servername + ' ' + req.headers.host + '\\n');
}).listen(443);
`;

// A plain HTTP server that sends `/<n>` bytes (for the benchmark's downloads); on 8080, a raw
// one that answers each connection, 500 ms after its first bytes, with every byte it received
// (what the gateway passed on, exactly) and `<FIN>` if the gateway's half close came before
// that; on 8081, one that stops reading at a request's first bytes and a second later answers
// 413 and half closes, never reading again (an upstream refusing an upload early: it does not
// close, which would reset the gateway's write of the body instead of leaving it blocked).
const BULK = `
require('node:net').createServer((socket) => {
  socket.on('error', () => {});
  socket.once('data', () => {
    socket.pause();
    setTimeout(() => socket.end('HTTP/1.1 413 Payload Too Large\\r\\nContent-Length: 4\\r\\nConnection: close\\r\\n\\r\\nbig\\n'), 1000);
  });
}).listen(8081);
require('node:net').createServer({ allowHalfOpen: true }, (socket) => {
  const got = [];
  socket.on('error', () => {});
  socket.on('end', () => got.push(Buffer.from('<FIN>')));
  socket.on('data', (d) => {
    if (got.push(d) > 1) return;
    setTimeout(() => {
      const body = Buffer.concat(got);
      socket.end(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\\r\\nContent-Length: ' + body.length + '\\r\\n\\r\\n'), body]));
    }, 500);
  });
}).listen(8080);
const http = require('node:http');
const block = Buffer.alloc(256 * 1024, 120);
http.createServer((req, res) => {
  let left = Number(req.url.slice(1)) || 0;
  res.writeHead(200, { 'content-length': String(left) });
  const more = () => {
    while (left > 0) {
      const piece = block.subarray(0, Math.min(block.length, left));
      left -= piece.length;
      if (!res.write(piece)) return res.once('drain', more);
    }
    res.end();
  };
  more();
}).listen(80);
`;

function freeSubnet() {
  for (let attempt = 0; attempt < 50; attempt++) {
    const third = (process.pid + attempt * 7) % 250;
    const subnet = `198.18.${third}.0/24`;
    const name = `${RUN}-egress-world-${process.pid}-${attempt}`;
    try {
      docker(['network', 'create', '--subnet', subnet, '--label', `dev.native-sandbox.test-run=${RUN}`, name]);
      return { name, prefix: `198.18.${third}` };
    } catch {
      // Taken: try the next.
    }
  }
  throw new Error('no free 198.18.N.0/24 subnet for the egress test world');
}

const UPLINK_DEVICE = /^\d+: (nsb-up(\d+))[@:]/;

/** This host's veth ends named by `hostUplink` (any run's): `[device, pid]`. */
export function uplinkDevices() {
  return execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).split('\n')
    .map((line) => UPLINK_DEVICE.exec(line)).filter(Boolean).map((m) => [m[1], Number(m[2])]);
}

/**
 * Gives this host the address `198.19.255.N` on a veth pair of its own, named by this process's
 * PID (deleting one end deletes both; root only: the tests run as root); returns it and how to
 * remove it. A pair left by a run whose process is gone is removed first.
 */
function hostUplink() {
  for (const [stale, pid] of uplinkDevices()) {
    let alive = true;
    try { process.kill(pid, 0); } catch (error) { alive = error.code !== 'ESRCH'; }
    if (!alive) {
      try { execFileSync('ip', ['link', 'del', stale], { stdio: 'ignore' }); } catch { /* gone */ }
    }
  }
  const device = `nsb-up${process.pid}`;
  const address = `198.19.255.${(process.pid % 250) + 1}`;
  const remove = () => {
    try { execFileSync('ip', ['link', 'del', device], { stdio: 'ignore' }); } catch { /* gone */ }
  };
  execFileSync('ip', ['link', 'add', device, 'type', 'veth', 'peer', 'name', `${device}p`]);
  try {
    execFileSync('ip', ['addr', 'add', `${address}/32`, 'dev', device]);
    execFileSync('ip', ['link', 'set', device, 'up']);
    execFileSync('ip', ['link', 'set', `${device}p`, 'up']);
  } catch (error) {
    remove();
    throw error;
  }
  return { address, remove };
}

/** Starts the world; `names` maps extra names to addresses (besides the servers' own). */
export function startWorld(extraNames = {}) {
  const { name: network, prefix } = freeSubnet();
  const dir = mkdtempSync(join(tmpdir(), 'native-sandbox-egress-tls-'));
  const containers = [];
  let uplink;
  try {
    uplink = hostUplink();
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=allowed.test',
      '-addext', 'subjectAltName=DNS:secure.test,DNS:allowed.test,DNS:*.wild.test,DNS:other.test',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    const key = readFileSync(join(dir, 'key.pem'), 'utf8');
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    const addresses = { resolver: `${prefix}.53`, http: `${prefix}.80`, https: `${prefix}.43`, bulk: `${prefix}.81` };
    const names = {
      'allowed.test': addresses.http,
      'secure.test': addresses.https,
      'bulk.test': addresses.bulk,
      'a.wild.test': addresses.http,
      'wild.test': addresses.http,
      'other.test': addresses.http,
      'private.test': '10.200.0.5',
      'loop.test': '127.0.0.1',
      'host.test': `${prefix}.1`,
      'uplink.test': uplink.address,
      ...extraNames,
    };
    const run = (label, ip, image, args, env = {}) => {
      const envArgs = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
      const id = docker(['run', '-d', '--name', `${network}-${label}`, '--network', network, '--ip', ip, '--label', `dev.native-sandbox.test-run=${RUN}`, ...envArgs, ...args.slice(0, 2), image, ...args.slice(2)]);
      containers.push(id);
      return id;
    };
    run('resolver', addresses.resolver, NODE_IMAGE, ['--entrypoint', 'node', '-e', RESOLVER], { NAMES: JSON.stringify(names) });
    run('http', addresses.http, BUSYBOX_IMAGE, ['--entrypoint', 'sh', '-c', 'mkdir -p /tmp/www && echo plain hello > /tmp/www/index.html && exec httpd -f -p 80 -h /tmp/www']);
    run('https', addresses.https, NODE_IMAGE, ['--entrypoint', 'node', '-e', HTTPS], { KEY: key, CERT: cert });
    run('bulk', addresses.bulk, NODE_IMAGE, ['--entrypoint', 'node', '-e', BULK]);
    return {
      network,
      prefix,
      addresses,
      /** The host's own address on the test's veth pair. */
      uplink: uplink.address,
      cert,
      /** The names the resolver was asked for, in order. */
      queries: () => docker(['logs', containers[0]]).split('\n').filter((l) => l.startsWith('query ')).map((l) => l.slice(6)),
      backendOptions: { egress: { network, resolvers: [addresses.resolver] } },
      /** The world's containers, by label (`resolver`, `http`, `https`, `bulk`). */
      container: (label) => `${network}-${label}`,
      stop() {
        for (const id of containers) {
          try { docker(['rm', '-f', id]); } catch { /* gone */ }
        }
        try { docker(['network', 'rm', network]); } catch { /* gone */ }
        uplink.remove();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    for (const id of containers) {
      try { docker(['rm', '-f', id]); } catch { /* gone */ }
    }
    try { docker(['network', 'rm', network]); } catch { /* gone */ }
    uplink?.remove();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
