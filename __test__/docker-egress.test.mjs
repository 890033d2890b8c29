// Egress by hostname against real traffic on this machine only: an allowlist sandbox's guest
// reaches the test's own servers through its gateway, by name, without proxy settings, and
// nothing else; every refusal is counted; the test's resolver sees only allowed names.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileFromBytes, SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { createDockerSandboxBackend, dockerSandboxEgress } from 'native-sandbox/docker';
import { dockerBackend, holderOf, leftovers, NOTHING, request, runProcess, runShell, spawnController, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { NODE_IMAGE, startWorld, uplinkDevices } from './egress-world.mjs';
import { described } from './helpers.mjs';

const HOSTS = ['allowed.test', 'secure.test', '*.wild.test', 'private.test', 'host.test', 'gone.test', 'solo'];
const allowlist = (p) => (p.network = { kind: 'allowlist', hosts: HOSTS });

/** The gateway's address on the sandbox's internal network (the guest's resolver). */
function gatewayOf(sandbox) {
  const networks = JSON.parse(execFileSync('docker', ['inspect', '--format', '{{json .NetworkSettings.Networks}}', holderOf(sandbox)], { encoding: 'utf8' }));
  const internal = sandbox.recoveryRecord.resources.find((r) => r.role === 'network').name;
  return networks[internal].IPAddress;
}

/** Each `key=value` line the guest printed. */
function marks(stdout) {
  return Object.fromEntries(stdout.split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

/** Waits up to 10 s for `done()`. */
async function until(done, what) {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function reasonsOf(report) {
  return report.recent.map((r) => `${r.host}:${r.port} ${r.reason}`);
}

describe('allowlist egress', () => {
  let world;
  before(() => {
    world = startWorld();
  });
  after(() => {
    world?.stop();
    assert.deepEqual(uplinkDevices().filter(([, pid]) => pid === process.pid), [], "the world's veth pair is gone");
  });

  test('by name over HTTP and HTTPS and a wildcard; unlisted names get NXDOMAIN that never reach upstream; private answers, the host, the gateway by address and a wrong Host header are refused and counted; bare IPs, other resolvers and the host bridge have no route', async () => {
    const ns = uniqueNamespace('egress-http');
    const backend = dockerBackend(ns, world.backendOptions);
    assert.deepEqual(backend.support.network, ['isolated', 'outbound', 'allowlist']);
    // A service of the host's on every address, IPv4 and IPv6: the guest must not reach it.
    const listener = createServer((socket) => socket.end('host service\n'));
    await new Promise((resolve) => listener.listen(0, '::', resolve));
    const sandbox = await backend.reserve(request(allowlist), { kind: 'in_process' }).start();
    try {
      assert.deepEqual(sandbox.effective.network, { kind: 'allowlist', hosts: HOSTS });
      const gateway = gatewayOf(sandbox);
      // The address the engine gives the host on the sandbox's internal network (none, here).
      const internal = sandbox.recoveryRecord.resources.find((r) => r.role === 'network').name;
      const hostPort = listener.address().port;
      const hostAddress = execFileSync('docker', ['network', 'inspect', '--format', '{{(index .IPAM.Config 0).Gateway}}', internal], { encoding: 'utf8' }).trim().split('/')[0];
      const fetch = (url, key) => `out=$(timeout 5 wget -q -O - ${url} 2>/dev/null); echo "${key}=$?:$out"`;
      const script = [
        fetch('http://allowed.test/', 'allowed'),
        fetch('http://a.wild.test/', 'wildcard'),
        fetch('https://secure.test/', 'https'),
        `nslookup nope.test >/dev/null 2>&1; echo "unlisted=$?"`,
        `nslookup nope.test 2>&1 | grep -q NXDOMAIN; echo "nxdomain=$?"`,
        `nslookup wild.test >/dev/null 2>&1; echo "wildcard_base=$?"`,
        // Listed, but the upstream knows no such name.
        `nslookup gone.test >/dev/null 2>&1; echo "gone=$?"`,
        // A dotless name reaches the gateway too (the engine's resolver answers those itself
        // when the container sets an ndots of its own).
        `nslookup solo >/dev/null 2>&1; echo "solo=$?"`,
        `echo "resolv=$(grep -v '^#' /etc/resolv.conf | grep . | tr '\\n' '|')"`,
        fetch('http://private.test/', 'private'),
        `echo "private_said=$(timeout 5 wget -O /dev/null http://private.test/ 2>&1 | grep -o 'HTTP/1.1 [0-9]* [A-Za-z]*' | head -n 1)"`,
        fetch('http://host.test/', 'host'),
        fetch(`http://${world.addresses.http}/`, 'bare_ip'),
        fetch(`http://${gateway}/`, 'gateway_ip'),
        `out=$(printf 'GET / HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n' | timeout 5 nc ${gateway} 80); echo "wrong_host=$?:$out"`,
        `out=$(printf 'GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n' | timeout 5 nc ${gateway} 80 | head -c 15); echo "right_host=$out"`,
        `echo "ipv6=$(cat /proc/net/if_inet6 2>/dev/null | wc -l)"`,
        // UDP straight to a test server (its resolver, by address): dropped before it, checked
        // in its log below.
        `timeout 5 nslookup direct.test ${world.addresses.resolver} >/dev/null 2>&1; echo "other_resolver=$?"`,
        `(echo nameserver ${world.addresses.resolver} > /etc/resolv.conf) 2>/dev/null; echo "resolv_write=$?"`,
        `timeout 3 nc ${hostAddress} ${hostPort} </dev/null >/dev/null 2>&1; echo "host_bridge=$?"`,
        `echo "imported=$(cat in/task.txt)"`,
        `echo fetched > out/result.txt; echo "written=$?"`,
      ].join('\n');
      // Transfers go through the gateway holder like through any other.
      await sandbox.importTree([{ kind: 'directory', path: 'out' }, fileFromBytes('in/task.txt', Buffer.from('the task'))]);
      const { stdout } = await runShell(sandbox, script);
      const seen = marks(stdout);
      assert.equal(seen.allowed, '0:plain hello', stdout);
      assert.equal(seen.wildcard, '0:plain hello', stdout);
      // busybox's wget over HTTPS (it sends the server name, and checks no certificate).
      assert.equal(seen.https, '0:secure secure.test secure.test', stdout);
      assert.notEqual(seen.unlisted, '0', stdout);
      assert.equal(seen.nxdomain, '0', stdout);
      assert.notEqual(seen.wildcard_base, '0', stdout);
      assert.notEqual(seen.gone, '0', stdout);
      // Nothing of the host's resolver settings (search domains, options) reaches the guest.
      assert.equal(seen.resolv, 'nameserver 127.0.0.11|options timeout:5 ndots:0|', stdout);
      for (const refused of ['private', 'host', 'bare_ip', 'gateway_ip']) {
        assert.match(seen[refused], /^[1-9][0-9]*:$/, `${refused}: ${stdout}`);
      }
      // Refused in HTTP, saying why; the same request with a listed Host is answered.
      assert.match(seen.wrong_host, /^0:HTTP\/1\.1 403 Forbidden\r?$/, stdout);
      assert.ok(stdout.includes('native-sandbox egress gateway: other.test:80 refused: not on the allowlist'), stdout);
      assert.equal(seen.private_said, 'HTTP/1.1 403 Forbidden', stdout);
      assert.equal(seen.right_host, 'HTTP/1.1 200 OK', stdout);
      assert.equal(seen.ipv6, '0', stdout);
      assert.notEqual(seen.other_resolver, '0', stdout);
      assert.notEqual(seen.resolv_write, '0', stdout);
      assert.notEqual(seen.host_bridge, '0', stdout);
      assert.equal(seen.imported, 'the task', stdout);
      assert.equal(seen.written, '0', stdout);


      const report = await dockerSandboxEgress(sandbox);
      assert.ok(Object.isFrozen(report));
      const reasons = reasonsOf(report);
      for (const expected of [
        'nope.test:53 not on the allowlist',
        'wild.test:53 not on the allowlist',
        'gone.test:53 the name does not exist',
        'solo:53 the name does not exist',
        'private.test:80 resolves only to private or unusable addresses',
        'host.test:80 resolves only to private or unusable addresses',
        `${gateway}:80 a malformed Host header`,
        'other.test:80 not on the allowlist',
      ]) {
        assert.ok(reasons.includes(expected), `${expected} in ${JSON.stringify(reasons)}`);
      }
      assert.equal(typeof report.allowed, 'bigint');
      assert.equal(typeof report.refused, 'bigint');
      assert.ok(report.refused >= 6n, String(report.refused));
      assert.ok(report.allowed >= 2n, String(report.allowed));
      for (const r of report.recent) assert.ok(Number.isFinite(r.at) && r.at > 0);
      assert.deepEqual(Object.keys(report.recent[0]), ['host', 'port', 'reason', 'at']);
      await sandbox.stop();
      const exported = [];
      await sandbox.exportTree({ kind: 'files', paths: ['out/result.txt'] }, async (entry) => {
        const chunks = [];
        for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
        exported.push(`${entry.path}:${Buffer.concat(chunks)}`);
      });
      assert.deepEqual(exported, ['out/result.txt:fetched\n']);
    } finally {
      listener.close();
      await sandbox.destroy();
    }
    const asked = world.queries();
    for (const name of ['nope.test', 'wild.test', 'other.test', 'direct.test']) {
      assert.ok(!asked.includes(name), `${name} reached the upstream resolver: ${asked}`);
    }
    assert.ok(asked.includes('allowed.test'), String(asked));
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  /**
   * Runs `body(sandbox, port, reached)` in an allowlist sandbox listing `hostsFor(port)`, beside
   * a service of the host's on its uplink address only, at `port` (one HTTP/1.0 answer per
   * connection; `reached()` counts them); then checks that nothing of the sandbox is left.
   */
  async function besideUplinkService(label, hostsFor, body) {
    const ns = uniqueNamespace(label);
    let reached = 0;
    const listener = createServer((socket) => {
      reached += 1;
      socket.end('HTTP/1.0 200 OK\r\n\r\nhost service\n');
    });
    await new Promise((resolve, reject) => listener.once('error', reject).listen(0, world.uplink, resolve));
    const port = listener.address().port;
    let sandbox;
    try {
      sandbox = await dockerBackend(ns, world.backendOptions).reserve(request((p) => {
        p.network = { kind: 'allowlist', hosts: hostsFor(port) };
      }), { kind: 'in_process' }).start();
      await body(sandbox, port, () => reached);
    } finally {
      listener.close();
      await sandbox?.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  }

  test("the host's own address on any of its interfaces is refused like a private one (the engine runs on this host)", async () => {
    await besideUplinkService('egress-uplink', (port) => [`uplink.test:${port}`], async (sandbox, port, reached) => {
      const { stdout } = await runShell(sandbox, `out=$(timeout 5 wget -q -O - http://uplink.test:${port}/ 2>/dev/null); echo "uplink=$?:$out"`);
      assert.match(marks(stdout).uplink, /^[1-9][0-9]*:$/, stdout);
      const reasons = reasonsOf(await dockerSandboxEgress(sandbox));
      assert.ok(reasons.includes(`uplink.test:${port} resolves only to private or unusable addresses`), JSON.stringify(reasons));
      assert.equal(reached(), 0, 'the host service was never reached');
    });
  });

  test('an entry that opts in reaches a private address (here the host\'s own); the effective policy lists hosts as strings and names the opt-in apart', async () => {
    const hostsFor = (port) => ['allowed.test', { host: `Uplink.Test:${port}`, allowPrivate: true }, 'host.test', { host: 'loop.test', allowPrivate: true }];
    await besideUplinkService('egress-private', hostsFor, async (sandbox, port, reached) => {
      assert.deepEqual(sandbox.effective.network, { kind: 'allowlist', hosts: ['allowed.test', `uplink.test:${port}`, 'host.test', 'loop.test'], allowPrivate: [`uplink.test:${port}`, 'loop.test'] });
      const { stdout } = await runShell(sandbox, [
        `out=$(timeout 5 wget -q -O - http://uplink.test:${port}/ 2>/dev/null); echo "opted=$?:$out"`,
        `out=$(timeout 5 wget -q -O - http://host.test/ 2>/dev/null); echo "not_opted=$?:$out"`,
        // Loopback would be the gateway's own: never, even opted in.
        `out=$(timeout 5 wget -q -O - http://loop.test/ 2>/dev/null); echo "loopback=$?:$out"`,
      ].join('\n'));
      const seen = marks(stdout);
      assert.equal(seen.opted, '0:host service', stdout);
      assert.match(seen.not_opted, /^[1-9][0-9]*:$/, stdout);
      assert.match(seen.loopback, /^[1-9][0-9]*:$/, stdout);
      assert.equal(reached(), 1);
      const reasons = reasonsOf(await dockerSandboxEgress(sandbox));
      assert.deepEqual(reasons, ['host.test:80 resolves only to private or unusable addresses', 'loop.test:80 resolves only to private or unusable addresses']);
    });
  });

  test('plain HTTP carries one request per connection: a second request, another host in the target, an upgrade or a tunnel never reach the upstream; bodies are passed on as framed', async () => {
    const ns = uniqueNamespace('egress-http');
    const backend = dockerBackend(ns, world.backendOptions);
    const sandbox = await backend.reserve(request((p) => {
      p.network = { kind: 'allowlist', hosts: ['bulk.test:80', 'bulk.test:8080'] };
    }), { kind: 'in_process' }).start();
    try {
      const gateway = gatewayOf(sandbox);
      // On 80 the bulk server answers `/N` with N bytes; on 8080 it answers with every byte
      // the gateway passed on to it.
      const send = (key, text, port = 80) => `out=$(printf '${text}' | timeout 8 nc ${gateway} ${port} | tr -d '\\r' | tr '\\n' '|'); echo "${key}=$?:$out"`;
      const script = [
        send('pipelined', 'GET /3 HTTP/1.1\\r\\nHost: bulk.test\\r\\nConnection: keep-alive\\r\\n\\r\\nGET /5 HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n', 8080),
        send('posted', 'POST /2 HTTP/1.1\\r\\nHost: bulk.test:8080\\r\\nContent-Length: 5\\r\\n\\r\\nhelloGET /5 HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n', 8080),
        send('chunked', 'POST /4 HTTP/1.1\\r\\nHost: bulk.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\nGET /5 HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n', 8080),
        // A body cut short: the guest's half close is passed on, nothing is added.
        send('cut', 'POST /2 HTTP/1.1\\r\\nHost: bulk.test:8080\\r\\nContent-Length: 10\\r\\n\\r\\nhello', 8080),
        // A chunk size with a space and no extension: the body is refused, its head alone went up.
        send('bad_chunk', 'POST /4 HTTP/1.1\\r\\nHost: bulk.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5 \\r\\nhello\\r\\n0\\r\\n\\r\\n', 8080),
        send('answered', 'GET /3 HTTP/1.1\\r\\nHost: bulk.test\\r\\n\\r\\nGET /5 HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n'),
        send('other_port', 'GET / HTTP/1.1\\r\\nHost: bulk.test:8080\\r\\n\\r\\n'),
        send('absolute', 'GET http://other.test/3 HTTP/1.1\\r\\nHost: bulk.test\\r\\n\\r\\n'),
        send('upgrade', 'GET /3 HTTP/1.1\\r\\nHost: bulk.test\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n'),
        // An offer of cleartext HTTP/2 (curl --http2 on http://) is dropped: HTTP/1.1 goes on.
        send('h2c', 'GET /3 HTTP/1.1\\r\\nHost: bulk.test\\r\\nConnection: Upgrade, HTTP2-Settings\\r\\nUpgrade: h2c\\r\\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\\r\\n\\r\\n', 8080),
        send('tunnel', 'CONNECT other.test:80 HTTP/1.1\\r\\nHost: bulk.test\\r\\n\\r\\n'),
        // Not HTTP: refused at its first line, not after the 10 s a host may take to be named.
        send('not_http', 'SSH-2.0-x\\r\\n'),
        `out=$(timeout 5 wget -q -O - --post-data=hello http://bulk.test/4 2>/dev/null); echo "wget=$?:$out"`,
      ].join('\n');
      const { stdout } = await runShell(sandbox, script);
      const seen = marks(stdout);
      // Exactly the one request reached the upstream (its head with `Connection: close`, its
      // body as framed), nothing after it.
      const echoed = (text) => `0:HTTP/1.1 200 OK|Content-Length: ${text.replaceAll('|', '\r\n').length}||${text}`;
      assert.equal(seen.pipelined, echoed('GET /3 HTTP/1.1|Host: bulk.test|Connection: close||'), stdout);
      assert.equal(seen.posted, echoed('POST /2 HTTP/1.1|Host: bulk.test:8080|Content-Length: 5|Connection: close||hello'), stdout);
      assert.equal(seen.chunked, echoed('POST /4 HTTP/1.1|Host: bulk.test|Transfer-Encoding: chunked|Connection: close||5|hello|0||'), stdout);
      assert.equal(seen.cut, echoed('POST /2 HTTP/1.1|Host: bulk.test:8080|Content-Length: 10|Connection: close||hello<FIN>'), stdout);
      assert.equal(seen.bad_chunk, '0:', stdout);
      assert.equal(seen.h2c, echoed('GET /3 HTTP/1.1|Host: bulk.test|Connection: close||'), stdout);
      // A keep-alive server answers the one request and closes.
      assert.equal((seen.answered.match(/HTTP\/1\.1 200 OK/g) ?? []).length, 1, stdout);
      assert.match(seen.answered, /^0:.*\|xxx$/, stdout);
      // Refused requests are told why in HTTP; what is not HTTP gets nothing.
      for (const key of ['absolute', 'upgrade', 'tunnel', 'other_port']) assert.match(seen[key], /^0:HTTP\/1\.1 400 Bad Request\|/, `${key}: ${stdout}`);
      assert.ok(seen.upgrade.endsWith(`native-sandbox egress gateway: ${gateway}:80 refused: a protocol upgrade over plain HTTP (use TLS)|`), stdout);
      assert.equal(seen.not_http, '0:', stdout);
      assert.equal(seen.wget, '0:xxxx', stdout);
      const reasons = reasonsOf(await dockerSandboxEgress(sandbox));
      for (const expected of [
        `${gateway}:80 a request target naming another host`,
        `${gateway}:80 a protocol upgrade over plain HTTP (use TLS)`,
        `${gateway}:80 CONNECT (a tunnel) over plain HTTP`,
        `${gateway}:80 neither TLS nor HTTP/1`,
        `${gateway}:80 a malformed Host header`,
        'bulk.test:8080 a chunked body with a malformed size',
      ]) {
        assert.ok(reasons.includes(expected), `${expected} in ${JSON.stringify(reasons)}`);
      }
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('an upstream that answers an upload early and stops reading gets nothing more: the guest has the answer, the relay ends, its slot comes back', async () => {
    const ns = uniqueNamespace('egress-early');
    const backend = dockerBackend(ns, world.backendOptions);
    // 24 PIDs: 3 connections at once, so three relays held forever would refuse the fourth.
    const sandbox = await backend.reserve(request((p) => {
      p.network = { kind: 'allowlist', hosts: ['bulk.test:80', 'bulk.test:8081'] };
      p.resources.pids = 24;
    }), { kind: 'in_process' }).start();
    try {
      const gateway = gatewayOf(sandbox);
      // 64 MiB announced and sent: more than every buffer between the gateway and an upstream
      // that stopped reading after its first bytes.
      const upload = (key) => `out=$({ printf 'POST /up HTTP/1.1\\r\\nHost: bulk.test:8081\\r\\nContent-Length: 67108864\\r\\n\\r\\n'; head -c 67108864 /dev/zero; } | timeout 5 nc ${gateway} 8081 | tr -d '\\r' | tr '\\n' '|'); echo "${key}=$out"`;
      const script = [
        upload('first'),
        upload('second'),
        upload('third'),
        `out=$(timeout 5 wget -q -O - http://bulk.test/4 2>/dev/null); echo "after=$?:$out"`,
      ].join('\n');
      const { stdout } = await runShell(sandbox, script);
      const seen = marks(stdout);
      for (const key of ['first', 'second', 'third']) {
        assert.equal(seen[key], 'HTTP/1.1 413 Payload Too Large|Content-Length: 4|Connection: close||big|', `${key}: ${stdout}`);
      }
      assert.equal(seen.after, '0:xxxx', stdout);
      const report = await dockerSandboxEgress(sandbox);
      assert.ok(!report.recent.some((r) => r.reason === 'the gateway is busy'), JSON.stringify(reasonsOf(report)));
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a guest with pids: 24 holding idle keep-alive connections leaves its gateway room: the gateway has a budget of its own, lookups and new connections are served', async () => {
    const ns = uniqueNamespace('egress-budget');
    const backend = dockerBackend(ns, { ...world.backendOptions, image: NODE_IMAGE });
    const sandbox = await backend.reserve(request((p) => {
      allowlist(p);
      p.resources.pids = 24;
      p.resources.memoryBytes = 256 * 1024 * 1024;
    }), { kind: 'in_process' }).start();
    try {
      assert.equal(sandbox.effective.resources.pids, 24, "the guest's own limit");
      const holder = holderOf(sandbox);
      assert.equal(execFileSync('docker', ['inspect', '--format', '{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}}', holder], { encoding: 'utf8' }).trim(), `${256 * 1024 * 1024} 1024`, "the gateway's own budget");
      const source = `
        const https = require('node:https');
        const http = require('node:http');
        const dns = require('node:dns').promises;
        const ca = process.env.CA;
        const agent = new https.Agent({ keepAlive: true, maxSockets: 8, ca });
        const get = (module, url, options) => new Promise((resolve) => {
          module.get(url, { timeout: 5000, ...options }, (res) => { let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => resolve('ok:' + body.trim())); })
            .on('error', (e) => resolve('error:' + e.code)).on('timeout', function () { this.destroy(new Error('timeout')); });
        });
        (async () => {
          // Eight connections at once, then idle in the client's pool.
          const pooled = await Promise.all(Array.from({ length: 8 }, () => get(https, 'https://secure.test/', { agent })));
          console.log('pooled=' + pooled.filter((r) => r.startsWith('ok:')).length);
          const idle = Object.values(agent.freeSockets).reduce((n, list) => n + list.length, 0);
          console.log('idle=' + idle);
          await new Promise((resolve) => setTimeout(resolve, 500));
          console.log('lookup=' + await dns.lookup('allowed.test').then((a) => 'ok', (e) => 'error:' + e.code));
          console.log('fresh=' + await get(http, 'http://allowed.test/', { agent: false }));
          const still = Object.values(agent.freeSockets).reduce((n, list) => n + list.filter((s) => !s.destroyed).length, 0);
          console.log('still_idle=' + still);
          agent.destroy();
        })();
      `;
      const { stdout, stderr } = await runProcess(sandbox, '/usr/local/bin/node', ['-e', source], { env: { CA: world.cert } });
      const seen = marks(stdout);
      const context = stdout + stderr;
      assert.equal(seen.pooled, '8', context);
      assert.equal(seen.idle, '8', context);
      assert.equal(seen.lookup, 'ok', context);
      assert.equal(seen.fresh, 'ok:plain hello', context);
      assert.equal(seen.still_idle, '8', 'idle pooled connections are kept within the idle bound');
      const report = await dockerSandboxEgress(sandbox);
      assert.ok(!report.recent.some((r) => r.reason === 'the gateway is busy'), JSON.stringify(reasonsOf(report)));
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a gateway whose 256 connection slots are all taken refuses more as busy and still answers lookups, listed ones too, on slots of their own', async () => {
    const ns = uniqueNamespace('egress-busy');
    const backend = dockerBackend(ns, world.backendOptions);
    // 300 connections that never name a host hold every connection slot (each for 10 s).
    const sandbox = await backend.reserve(request((p) => {
      allowlist(p);
      p.resources.pids = 1_024;
      p.resources.memoryBytes = 256 * 1024 * 1024;
    }), { kind: 'in_process' }).start();
    try {
      const gateway = gatewayOf(sandbox);
      const script = [
        `i=0; while [ $i -lt 300 ]; do (sleep 9 | nc ${gateway} 80 >/dev/null 2>&1 &); i=$((i+1)); done; sleep 2`,
        `nslookup allowed.test >/dev/null 2>&1; echo "listed=$?"`,
        `out=$(nslookup nope.test 2>&1); echo "unlisted=$(echo "$out" | grep -c NXDOMAIN)"`,
        // Held while the report is read: the guest's end would close every held connection.
        'echo done=1; sleep 30',
      ].join('\n');
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      streams.stdin.end();
      streams.stderr.resume();
      let stdout = '';
      streams.stdout.on('data', (chunk) => (stdout += chunk));
      await until(() => stdout.includes('done=1'), 'the guest held every slot and looked its names up');
      const seen = marks(stdout);
      assert.equal(seen.listed, '0', `a listed name is answered while every connection slot is held\n${stdout}`);
      assert.notEqual(seen.unlisted, '0', stdout);
      const report = await dockerSandboxEgress(sandbox);
      await sandbox.stop();
      assert.ok(report.recent.some((r) => r.port === 80 && r.reason === 'the gateway is busy'), JSON.stringify(reasonsOf(report)));
      assert.ok(!report.recent.some((r) => r.port === 53 && r.reason === 'the gateway is busy'), JSON.stringify(reasonsOf(report)));
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a gateway that dies says why: dockerSandboxEgress reports it stopped with its last stderr and the counts last read, transfers fail naming it', async () => {
    const ns = uniqueNamespace('egress-gone');
    const backend = dockerBackend(ns, world.backendOptions);
    const sandbox = await backend.reserve(request(allowlist), { kind: 'in_process' }).start();
    try {
      const { stdout } = await runShell(sandbox, 'nslookup allowed.test >/dev/null 2>&1; echo "listed=$?"');
      assert.equal(marks(stdout).listed, '0', stdout);
      const before = await dockerSandboxEgress(sandbox);
      assert.equal(before.stopped, undefined);
      assert.ok(before.allowed >= 1n);
      const holder = holderOf(sandbox);
      execFileSync('docker', ['kill', '--signal', 'KILL', holder]);
      await until(() => execFileSync('docker', ['inspect', '--format', '{{.State.Running}}', holder], { encoding: 'utf8' }).trim() === 'false', 'the engine has the gateway stopped');
      const after = await dockerSandboxEgress(sandbox);
      assert.equal(after.allowed, before.allowed, 'the counts as last read');
      assert.equal(after.stopped.exitCode, 137);
      assert.equal(after.stopped.outOfMemory, false);
      assert.match(after.stopped.stderr, /native-sandbox gateway: serving on/, 'its last words, kept from its start');
      await sandbox.stop();
      const error = await sandbox.exportTree({ kind: 'workspace' }, async () => {}).catch((e) => e);
      assert.equal(error?.code, 'driver_failure', described(error));
      assert.match(error.message, /the egress gateway stopped \(exit status 137\): transfers run beside it, so this sandbox has none from now on \(destroy it\); its last stderr: native-sandbox gateway: serving on /, error.message);
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('HTTPS by name with the server name checked: a verified request works, another or no server name is refused', async () => {
    const ns = uniqueNamespace('egress-tls');
    const backend = dockerBackend(ns, { ...world.backendOptions, image: NODE_IMAGE });
    const sandbox = await backend.reserve(request((p) => {
      allowlist(p);
      p.resources.memoryBytes = 256 * 1024 * 1024;
    }), { kind: 'in_process' }).start();
    try {
      const gateway = gatewayOf(sandbox);
      const source = `
        const https = require('node:https');
        const tls = require('node:tls');
        const ca = process.env.CA;
        const get = (url) => new Promise((resolve) => {
          https.get(url, { ca, timeout: 5000 }, (res) => { let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => resolve('ok:' + body.trim())); })
            .on('error', (e) => resolve('error:' + e.code)).on('timeout', function () { this.destroy(new Error('timeout')); });
        });
        const hello = (servername) => new Promise((resolve) => {
          const socket = tls.connect({ host: '${gateway}', port: 443, servername, ca, rejectUnauthorized: false, timeout: 5000 }, () => { socket.end(); resolve('connected'); });
          socket.on('error', (e) => resolve('error:' + e.code));
          socket.on('timeout', () => { socket.destroy(); resolve('timeout'); });
        });
        (async () => {
          console.log('verified=' + await get('https://secure.test/'));
          console.log('other_sni=' + await hello('other.test'));
          console.log('no_sni=' + await hello(''));
        })();
      `;
      const { stdout } = await runProcess(sandbox, '/usr/local/bin/node', ['-e', source], { env: { CA: world.cert } });
      const seen = marks(stdout);
      assert.equal(seen.verified, 'ok:secure secure.test secure.test', stdout);
      // Refused with a TLS alert, not a reset.
      assert.equal(seen.other_sni, 'error:ERR_SSL_TLSV1_ALERT_ACCESS_DENIED', stdout);
      assert.equal(seen.no_sni, 'error:ERR_SSL_TLSV1_ALERT_ACCESS_DENIED', stdout);
      const reasons = reasonsOf(await dockerSandboxEgress(sandbox));
      assert.ok(reasons.includes('other.test:443 not on the allowlist'), JSON.stringify(reasons));
      assert.ok(reasons.includes(`${gateway}:443 TLS without a server name (SNI)`), JSON.stringify(reasons));
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a controller killed with SIGKILL: reconcile proves the gateway and the internal network and removes them', async () => {
    const ns = uniqueNamespace('egress-crash');
    const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-egress-'));
    const recordFile = join(scratch, 'record.json');
    try {
      const child = spawnController(ns, recordFile, world.backendOptions, 64, { kind: 'allowlist', hosts: ['allowed.test'] });
      await new Promise((resolve, reject) => {
        child.stdout.on('data', (chunk) => chunk.toString().includes('running') && resolve());
        child.on('exit', (code) => reject(new Error(`controller exited early with ${code}`)));
      });
      child.kill('SIGKILL');
      await new Promise((resolve) => child.on('exit', resolve));
      const left = leftovers(ns);
      assert.equal(left.containers.length, 2, 'the gateway holder and the process survive the controller');
      assert.equal(left.networks.length, 1);
      const record = JSON.parse(readFileSync(recordFile, 'utf8'));
      assert.deepEqual(record.resources.map((r) => r.role).sort(), ['compute', 'export', 'network', 'storage']);
      const result = await dockerBackend(ns, world.backendOptions).reconcile(record);
      assert.equal(result.kind, 'matched');
      await result.owner.destroy();
      assert.deepEqual(leftovers(ns), NOTHING);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test('transfers through the gateway holder run the link-safe helper beside the gateway: links are never followed, imports belong to the sandbox user, an abandoned export stops its helper, the gateway serves throughout', async () => {
    const ns = uniqueNamespace('egress-transfer');
    const backend = dockerBackend(ns, world.backendOptions);
    const sandbox = await backend.reserve(request(allowlist), { kind: 'in_process' }).start();
    const holder = holderOf(sandbox);
    // The processes of the holder whose whole command line is the bare helper: transfer runs.
    const transferRuns = () =>
      execFileSync('docker', ['top', holder, '-o', 'pid,args'], { encoding: 'utf8' })
        .split('\n')
        .slice(1)
        .filter((line) => line.trim().split(/\s+/).slice(1).join(' ') === '/native-sandbox-helper');
    try {
      // A body of 16 MiB or more goes through the engine's archive endpoint beside the helper.
      const big = Buffer.alloc(17 * 1024 * 1024, 7);
      await sandbox.importTree([fileFromBytes('a.txt', Buffer.from('alpha')), fileFromBytes('big.bin', big), fileFromBytes('real/inner.txt', Buffer.from('inner'))]);
      const made = await runShell(
        sandbox,
        [
          'echo "me=$(id -u):$(id -g)"',
          'stat -c "owners=%u:%u" a.txt big.bin | sort -u',
          'echo edited >> a.txt && echo "editable=$?"',
          'ln -s /etc/passwd pw && ln -s /etc linkdir && ln -s real alias',
          'mkdir closed && i=0; while [ $i -lt 300 ]; do head -c 65536 /dev/zero > closed/f$i; i=$((i+1)); done; chmod 000 closed',
          `out=$(timeout 5 wget -q -O - http://allowed.test/ 2>/dev/null); echo "fetched=$?:$out"`,
        ].join('\n'),
      );
      const seen = marks(made.stdout);
      assert.equal(seen.owners, seen.me, made.stdout + made.stderr);
      assert.equal(seen.editable, '0', 'the guest can change what was imported');
      assert.equal(seen.fetched, '0:plain hello', made.stderr);
      await sandbox.stop();
      // Never read through a link, whatever the holder's own files are.
      for (const [path, why] of [
        ['pw', /pw is not a regular file/],
        ['linkdir/passwd', /linkdir\/passwd is not a regular file/],
        ['alias/inner.txt', /alias\/inner\.txt is not a regular file/],
      ]) {
        const error = await sandbox.exportTree({ kind: 'files', paths: [path] }, async () => {}).catch((e) => e);
        assert.ok(error instanceof SandboxValidationError, `${path}: ${error}`);
        assert.match(described(error), why);
      }
      const through = await sandbox.exportTree({ kind: 'subtree', path: 'linkdir/passwd' }, async () => {}).catch((e) => e);
      assert.ok(through instanceof SandboxValidationError, `a path through a link is never followed: ${through}`);
      const drain = async (entry) => {
        if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      };
      const linked = await sandbox.exportTree({ kind: 'workspace' }, drain).catch((e) => e);
      assert.match(described(linked), /symbolic link/);
      // An export abandoned mid-tree: its helper is told to stop, puts the mode back, and is gone.
      const abandoned = await sandbox
        .exportTree({ kind: 'subtree', path: 'closed' }, async (entry) => {
          if (entry.path === 'closed/f1') throw new Error('consumer gave up');
          if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
        })
        .catch((e) => e);
      assert.match(String(abandoned?.message), /consumer gave up/);
      await until(() => transferRuns().length === 0, 'the abandoned run is gone');
      const volume = execFileSync('docker', ['inspect', '--format', '{{range .Mounts}}{{if eq .Destination "/sandbox/workspace"}}{{.Name}}{{end}}{{end}}', holder], { encoding: 'utf8' }).trim();
      const mode = execFileSync('docker', ['run', '--rm', '--network', 'none', '--user', '0', '-v', `${volume}:/w:ro`, 'native-sandbox/busybox:1', 'stat', '-c', '%a', '/w/closed'], { encoding: 'utf8' });
      assert.equal(mode.trim(), '0', 'the helper put the mode back');
      // The stop itself, in the holder: a run waiting for its request is told to stop (SIGTERM,
      // exit status 3); another mode beside it (the gateway) is never signalled.
      const waiting = spawn('docker', ['exec', '-i', holder, '/native-sandbox-helper'], { stdio: ['pipe', 'ignore', 'ignore'] });
      const waited = new Promise((resolve) => waiting.on('exit', resolve));
      await until(() => transferRuns().length === 1, 'the waiting run is up');
      execFileSync('docker', ['exec', holder, '/native-sandbox-helper', '--stop-transfers', '2000']);
      assert.equal(await waited, 3);
      waiting.stdin.destroy();
      assert.deepEqual(transferRuns(), []);
      // The next transfers run, and the bodies came back whole.
      const exported = {};
      await sandbox.exportTree({ kind: 'files', paths: ['a.txt', 'big.bin', 'real/inner.txt'] }, async (entry) => {
        const chunks = [];
        for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
        exported[entry.path] = Buffer.concat(chunks);
      });
      assert.equal(exported['a.txt'].toString(), 'alphaedited\n');
      assert.ok(exported['big.bin'].equals(big), 'the large body round-trips');
      assert.equal(exported['real/inner.txt'].toString(), 'inner');
      assert.deepEqual(transferRuns(), []);
      // The gateway beside the transfers still runs and reports (the fetch above counted).
      assert.equal(execFileSync('docker', ['inspect', '--format', '{{.State.Running}}', holder], { encoding: 'utf8' }).trim(), 'true');
      assert.ok((await dockerSandboxEgress(sandbox)).allowed >= 1n);
      // A gateway that stopped: transfers say so (they run beside it).
      execFileSync('docker', ['stop', '-t', '1', holder]);
      const stopped = await sandbox.exportTree({ kind: 'files', paths: ['a.txt'] }, drain).catch((e) => e);
      assert.match(String(stopped?.message), /the egress gateway stopped \(exit status \d+\): transfers run beside it, so this sandbox has none from now on \(destroy it\); its last stderr: native-sandbox gateway: serving on /);
    } finally {
      await sandbox.destroy();
    }
    assert.deepEqual(leftovers(ns), NOTHING);
  });

  test('a sandbox without a gateway reports null', async () => {
    const ns = uniqueNamespace('egress-none');
    const sandbox = await dockerBackend(ns).reserve(request(), { kind: 'in_process' }).start();
    try {
      assert.equal(await dockerSandboxEgress(sandbox), null);
    } finally {
      await sandbox.destroy();
    }
    await assert.rejects(() => dockerSandboxEgress({}), (error) => error.issues?.[0]?.message === 'expected a sandbox of a Docker backend');
  });
});

test("runtime 'runsc' refuses an allowlist at reserve, before any engine object exists", () => {
  const ns = uniqueNamespace('egress-runsc');
  const gvisor = createDockerSandboxBackend({ image: 'native-sandbox/busybox:1', namespace: ns, spillDirectory: spillDirectory(), runtime: 'runsc' });
  assert.deepEqual(gvisor.support.network, ['isolated']);
  assert.throws(() => gvisor.reserve(request(allowlist), { kind: 'in_process' }), SandboxUnsupportedError);
  assert.deepEqual(leftovers(ns), NOTHING);
});

test('backend egress options are checked, naming the field', () => {
  const ns = uniqueNamespace('egress-options');
  for (const [egress, path] of [
    [{ network: '' }, 'egress.network'],
    [{ resolvers: ['1.2.3'] }, 'egress.resolvers.0'],
    [{ resolvers: ['010.0.0.1'] }, 'egress.resolvers.0'],
    [{ resolvers: ['1.1.1.1', '1.1.1.2', '1.1.1.3', '1.1.1.4'] }, 'egress.resolvers'],
    [{ other: true }, 'egress.other'],
  ]) {
    assert.throws(() => dockerBackend(ns, { egress }), (error) => error.issues?.some((i) => i.path.join('.') === path) || assert.fail(`${path}: ${JSON.stringify(error.issues ?? String(error))}`));
  }
});
