// native-sandbox/agentproto against the real engine, with the MCP SDK on both ends: the example
// MCP stdio daemon (SDK server) inside the Node.js guest image, the SDK's Streamable HTTP client
// on the host.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, existsSync, mkdtempSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SandboxUnsupportedError, SandboxValidationError } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { SandboxProviderError, createDockerSandboxProvider, resolveLifecyclePolicy } from 'native-sandbox/agentproto';
import { leftovers, NOTHING, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { described } from './helpers.mjs';

const IMAGE = process.env.NATIVE_SANDBOX_NODE_GUEST_IMAGE ?? 'native-sandbox/node-agent:1';
const execFileAsync = promisify(execFile);
/** A daemon that exits at its first input: it outlives the boot, then goes when asked anything. */
// Answers the first message (the provider's readiness ping), exits at the next.
const QUITTER = {
  executable: '/usr/local/bin/node',
  args: ['-e', "let n = 0; process.stdin.on('data', (d) => { if (n++ > 0) process.exit(0); const m = JSON.parse(String(d).split('\\n')[0]); process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: {} }) + '\\n'); });"],
};
const namespace = uniqueNamespace('agentproto');
const otherNamespace = uniqueNamespace('agentproto-other');
const stateDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-'));
const provider = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory });
after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(leftovers(otherNamespace), NOTHING);
});

const daemon = { executable: '/usr/local/bin/node', args: ['/opt/mcp/server.mjs'] };
const spec = (edit = (s) => s) => edit({ provider: 'docker', config: { image: IMAGE, daemon } });

// A daemon that runs but never speaks MCP: its boot is started now, in a namespace and state
// directory of its own, and observed by the file's last test, so its 60 s startup deadline passes
// while the other tests run.
const silentNamespace = uniqueNamespace('agentproto-silent');
const silentState = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-silent-'));
const SILENT = { executable: '/usr/local/bin/node', args: ['-e', "console.error('loading a model that never arrives'); setInterval(() => {}, 1000)"] };
const silentBoot = (() => {
  const started = Date.now();
  const silentProvider = createDockerSandboxProvider({ namespace: silentNamespace, spillDirectory: spillDirectory(), stateDirectory: silentState });
  return silentProvider.boot(spec((s) => ({ ...s, config: { ...s.config, daemon: SILENT } })), { env: {} }).then(
    (booted) => ({ booted, ms: Date.now() - started }),
    (error) => ({ error, ms: Date.now() - started }),
  );
})();
const inspect = (format, id) => execFileSync('docker', ['inspect', '--format', format, id], { encoding: 'utf8' }).trim();
const processContainer = (sandboxId) =>
  execFileSync('docker', ['ps', '-aq', '--filter', `label=dev.native-sandbox.sandbox=${sandboxId}`, '--filter', 'label=dev.native-sandbox.role=compute'], { encoding: 'utf8' }).trim();
const stateFiles = (directory = stateDirectory) => readdirSync(directory).filter((name) => name.endsWith('.json'));

async function mcpClient(booted, headers = booted.authHeaders) {
  const client = new Client({ name: 'native-sandbox-test-host', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(booted.mcpUrl), headers === undefined ? {} : { requestInit: { headers } }));
  return client;
}
const textOf = (result) => result.content.map((part) => part.text).join('');
const call = async (client, name, args) => textOf(await client.callTool({ name, arguments: args }));

const initialize = (url, headers = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });

/** Waits (bounded) until `check()` holds; the bound only keeps a broken run from hanging. */
async function eventually(check, what, limitMs = 30_000) {
  const until = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > until) assert.fail(`${what} did not happen within ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Boots a sandbox in a child controller (fixtures/agentproto-boot-child.mjs, with `extraEnv`),
 * kills the child with SIGKILL once it printed `{ sandboxId, token, mcpUrl, authHeaders }`, and returns that.
 */
async function bootInChildThenKill(extraEnv) {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/agentproto-boot-child.mjs', import.meta.url))], {
    env: { ...process.env, AGENTPROTO_NAMESPACE: namespace, AGENTPROTO_STATE: stateDirectory, AGENTPROTO_IMAGE: IMAGE, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let line = '';
  child.stdout.on('data', (chunk) => (line += chunk));
  await eventually(() => line.includes('\n') || child.exitCode !== null, 'the child boot', 60_000);
  child.kill('SIGKILL');
  await once(child, 'exit');
  return JSON.parse(line);
}

test('resolveLifecyclePolicy follows the 0.2.1 rule', () => {
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { destroy_on: 'workspace-close', pause_after_idle: 'idle-5' } }, true), { teardown: 'kill' });
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { pause_after_idle: 'idle-600' } }, false), { teardown: 'pause', pauseAfterIdleMs: 600_000 });
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { pause_after_idle: 'after-600' } }, false), { teardown: 'kill' });
  // Any number of seconds, as 0.2.1 reads it (boot is what refuses a window out of bounds).
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { pause_after_idle: 'idle-0' } }, false), { teardown: 'pause', pauseAfterIdleMs: 0 });
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { pause_after_idle: 'idle-9007199254740993' } }, false), { teardown: 'pause', pauseAfterIdleMs: 9007199254740993 * 1000 });
  assert.deepEqual(resolveLifecyclePolicy({ lifecycle: { pause_after_idle: `idle-${'9'.repeat(400)}` } }, false), { teardown: 'pause', pauseAfterIdleMs: Infinity });
  assert.deepEqual(resolveLifecyclePolicy({}, true), { teardown: 'pause' });
  assert.deepEqual(resolveLifecyclePolicy({}, false), { teardown: 'kill' });
});

test('every refusal is typed, names its field, and comes before any engine object exists', async () => {
  const refusals = [
    [spec((s) => ({ ...s, provider: 'e2b' })), SandboxValidationError, ['spec', 'provider']],
    [spec((s) => ({ ...s, config: { daemon } })), SandboxValidationError, ['spec', 'config', 'image']],
    [spec((s) => ({ ...s, config: { image: IMAGE } })), SandboxValidationError, ['spec', 'config', 'daemon']],
    [spec((s) => ({ ...s, config: { ...s.config, daemon: { ...daemon, args: [1] } } })), SandboxValidationError, ['spec', 'config', 'daemon', 'args', 0]],
    [spec((s) => ({ ...s, config: { ...s.config, template: 'x' } })), SandboxValidationError, ['spec', 'config', 'template']],
    [spec((s) => ({ ...s, extraPorts: [8080] })), SandboxValidationError, ['spec', 'extraPorts']],
    [spec((s) => ({ ...s, limits: { memory_mb: 0 } })), SandboxValidationError, ['spec', 'limits', 'memory_mb']],
    [spec((s) => ({ ...s, lifecycle: { pause_after_idle: '' } })), SandboxValidationError, ['spec', 'lifecycle', 'pause_after_idle']],
    [spec((s) => ({ ...s, lifecycle: { pause_after_idle: 'idle-2147484' } })), SandboxValidationError, ['spec', 'lifecycle', 'pause_after_idle']],
    [spec((s) => ({ ...s, lifecycle: { pause_after_idle: 'idle-0' } })), SandboxValidationError, ['spec', 'lifecycle', 'pause_after_idle']],
    [spec((s) => ({ ...s, lifecycle: { pause_after_idle: 'idle-9007199254740993' } })), SandboxValidationError, ['spec', 'lifecycle', 'pause_after_idle']],
    [spec((s) => ({ ...s, network: { egress: 'api.example.com' } })), SandboxValidationError, ['spec', 'network', 'egress']],
    [spec((s) => ({ ...s, config: { ...s.config, daemon: { ...daemon, executable: 'node' } } })), SandboxValidationError, ['spec', 'config', 'daemon', 'executable']],
    [spec((s) => ({ ...s, read_only: true })), SandboxProviderError, 'sandbox_read_only'],
    [spec((s) => ({ ...s, network: { egress: ['api.example.com', '10.0.0.1'] } })), SandboxValidationError, ['spec', 'network', 'egress', 1]],
    [spec((s) => ({ ...s, mounts: [{ source: 'workspace', at: '/w' }] })), SandboxUnsupportedError, /mounts/],
  ];
  for (const [input, kind, expected] of refusals) {
    const error = await provider.boot(input, { env: {} }).then(() => assert.fail('booted'), (e) => e);
    assert.ok(error instanceof kind, `${JSON.stringify(input)}: ${error}`);
    if (Array.isArray(expected)) assert.deepEqual(error.issues[0].path, expected, JSON.stringify(input));
    else if (typeof expected === 'string') assert.equal(error.code, expected);
    else assert.match(error.message, expected);
  }
  const badEnv = await provider.boot(spec(), { env: { 'A=B': 'x' } }).catch((e) => e);
  assert.ok(badEnv instanceof SandboxValidationError);
  assert.deepEqual(badEnv.issues[0].path.slice(0, 2), ['opts', 'env']);
  await assert.rejects(provider.boot(spec(), { env: {}, expose: 'secret' }), (e) => e instanceof SandboxValidationError && e.issues[0].path.join('.') === 'opts.expose');
  await assert.rejects(provider.connect('../etc/passwd', spec(), { env: {} }), (e) => e instanceof SandboxValidationError && e.issues[0].path[0] === 'sandboxId');
  assert.throws(() => createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory: 'relative/dir' }), (e) => e instanceof SandboxValidationError && e.issues[0].path[0] === 'stateDirectory');
  // The image comes from each spec: one given to the provider would be silently replaced.
  assert.throws(() => createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory, image: 'native-sandbox/busybox:1' }), (e) => e instanceof SandboxValidationError && e.issues[0].path[0] === 'image');
  const shared = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-open-'));
  chmodSync(shared, 0o777);
  const careless = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory: shared });
  await assert.rejects(careless.boot(spec(), { env: {} }), (e) => e instanceof SandboxValidationError && /written by group or others/.test(described(e)));
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('spec.network.egress hosts boot the sandbox behind its allowlist gateway, on an internal network', async () => {
  const booted = await provider.boot(spec((s) => ({ ...s, network: { egress: ['api.example.com', '*.example.org:8443'] } })), { env: {} });
  try {
    const client = await mcpClient(booted);
    try {
      assert.match(await call(client, 'write_file', { path: 'egress.txt', content: 'inside' }), /wrote 6 bytes/);
    } finally {
      await client.close();
    }
    const networks = Object.keys(JSON.parse(inspect('{{json .NetworkSettings.Networks}}', processContainer(booted.sandboxId))));
    assert.equal(networks.length, 1);
    assert.equal(execFileSync('docker', ['network', 'inspect', '--format', '{{.Internal}}', networks[0]], { encoding: 'utf8' }).trim(), 'true');
  } finally {
    await booted.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('boot serves the daemon privately: tools write and read the workspace and read the env; 401 without the exact header', async () => {
  process.env.NATIVE_SANDBOX_HOST_ONLY = 'host value';
  const booted = await provider.boot(spec((s) => ({ ...s, limits: { memory_mb: 256 } })), { env: { GREETING: 'hello from the host' }, expose: 'private' });
  try {
    assert.match(booted.mcpUrl, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.match(booted.token, /^[A-Za-z0-9_-]{43,}$/);
    assert.ok(Buffer.from(booted.token, 'base64url').length >= 32);
    assert.deepEqual(booted.authHeaders, { authorization: `Bearer ${booted.token}` });
    const file = join(stateDirectory, `${booted.sandboxId}.json`);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const id = processContainer(booted.sandboxId);
    assert.equal(inspect('{{.HostConfig.Memory}}', id), String(256 * 1024 * 1024));

    const flipped = `${booted.token.slice(0, -1)}${booted.token.endsWith('A') ? 'B' : 'A'}`;
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: `Bearer ${flipped}` }, { authorization: `bearer ${booted.token}` }, { authorization: booted.token }, { 'x-token': booted.token }]) {
      const response = await initialize(booted.mcpUrl, headers);
      assert.equal(response.status, 401, JSON.stringify(Object.keys(headers)));
      assert.doesNotMatch(await response.text(), new RegExp(booted.token));
    }
    await assert.rejects(mcpClient(booted, {}), /401|Unauthorized|unauthorized/);

    const client = await mcpClient(booted);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ['ask_host', 'read_env', 'read_file', 'sleep', 'write_file']);
      assert.match(await call(client, 'write_file', { path: 'notes/plan.md', content: 'step one' }), /wrote 8 bytes/);
      assert.equal(await call(client, 'read_file', { path: 'notes/plan.md' }), 'step one');
      assert.equal(await call(client, 'read_env', { name: 'GREETING' }), 'hello from the host');
      assert.equal(await call(client, 'read_env', { name: 'NATIVE_SANDBOX_HOST_ONLY' }), '', 'opts.env only: nothing inherited from the host');
      assert.equal(await call(client, 'read_env', { name: 'PATH' }), '/usr/local/bin:/usr/bin:/bin', "and the guest's fixed PATH");
      // Progress travels on the stream of the request that asked for it.
      const progress = [];
      const slept = await client.callTool({ name: 'sleep', arguments: { ms: 50 } }, undefined, { onprogress: (p) => progress.push(p) });
      assert.equal(textOf(slept), 'slept 50 ms');
      assert.deepEqual(progress, [{ progress: 0, total: 1 }]);
      // Two sessions at once share the daemon; each gets its own answers.
      const second = await mcpClient(booted);
      const [a, b] = await Promise.all([call(client, 'sleep', { ms: 200 }), call(second, 'read_file', { path: 'notes/plan.md' })]);
      assert.equal(a, 'slept 200 ms');
      assert.equal(b, 'step one');
      await second.close();
    } finally {
      await client.close();
    }
  } finally {
    await booted.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
  await assert.rejects(fetch(booted.mcpUrl), 'the endpoint is closed');
});

test('pause freezes the sandbox on the engine; connect resumes it with the same token and the files still there', async () => {
  const booted = await provider.boot(spec(), { env: {}, expose: 'private' });
  try {
    const client = await mcpClient(booted);
    await call(client, 'write_file', { path: 'kept.txt', content: 'still here' });
    await client.close();
    await booted.pause();
    const id = processContainer(booted.sandboxId);
    assert.equal(inspect('{{.State.Status}}', id), 'paused');
    await assert.rejects(fetch(booted.mcpUrl), 'a paused sandbox serves no endpoint');
    const again = await provider.connect(booted.sandboxId, { provider: 'docker', config: {} }, { env: {}, expose: 'private' });
    assert.equal(again.token, booted.token);
    assert.equal(again.mcpUrl, booted.mcpUrl, 'a private URL is durable: the same port after a pause');
    assert.equal(inspect('{{.State.Status}}', id), 'running');
    const resumed = await mcpClient(again);
    assert.equal(await call(resumed, 'read_file', { path: 'kept.txt' }), 'still here');
    await resumed.close();
    // Public exposure on connect after a pause (what createSandboxAgentSessionHost sends on
    // reuse): no token handed out, an ungated endpoint of its own; the private URL stays gated.
    await again.pause();
    const open = await provider.connect(booted.sandboxId, spec(), { env: {} });
    assert.notEqual(open.mcpUrl, booted.mcpUrl, 'a public endpoint never serves the private URL');
    assert.equal(open.token, undefined);
    assert.equal(open.authHeaders, undefined);
    const plain = await mcpClient(open);
    assert.equal(await call(plain, 'read_file', { path: 'kept.txt' }), 'still here');
    await plain.close();
    assert.equal((await initialize(booted.mcpUrl, {})).status, 401, 'the private URL answers nobody without its token');
    const gated = await mcpClient(again);
    assert.equal(await call(gated, 'read_file', { path: 'kept.txt' }), 'still here', 'and its token still works there');
    await gated.close();
    await assert.rejects(provider.connect(booted.sandboxId, spec((s) => ({ ...s, config: { image: 'busybox:other' } })), { env: {} }), (e) => e instanceof SandboxValidationError && e.issues[0].path.join('.') === 'spec.config.image');
  } finally {
    await booted.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('two sessions asking for progress with the same token each get their own', async () => {
  const booted = await provider.boot(spec(), { env: {} });
  try {
    const [one, two] = [await mcpClient(booted), await mcpClient(booted)];
    const progress = { one: [], two: [] };
    // Both SDK clients number their requests alike, so their progress tokens collide.
    const [a, b] = await Promise.all([
      one.callTool({ name: 'sleep', arguments: { ms: 300 } }, undefined, { onprogress: (p) => progress.one.push(p) }),
      two.callTool({ name: 'sleep', arguments: { ms: 100 } }, undefined, { onprogress: (p) => progress.two.push(p) }),
    ]);
    assert.equal(textOf(a), 'slept 300 ms');
    assert.equal(textOf(b), 'slept 100 ms');
    assert.deepEqual(progress, { one: [{ progress: 0, total: 1 }], two: [{ progress: 0, total: 1 }] });
    await one.close();
    await two.close();
  } finally {
    await booted.stop();
  }
});

test("the daemon's own requests reach a client that can answer them; with none, the daemon gets an error", async () => {
  const { CreateMessageRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const booted = await provider.boot(spec(), { env: {} });
  try {
    const host = new Client({ name: 'sampling-host', version: '1.0.0' }, { capabilities: { sampling: {} } });
    host.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
      role: 'assistant',
      model: 'test-model',
      content: { type: 'text', text: `answer to: ${request.params.messages[0].content.text}` },
    }));
    const hostTransport = new StreamableHTTPClientTransport(new URL(booted.mcpUrl));
    await host.connect(hostTransport);
    const bystander = await mcpClient(booted);
    const [asked, other] = await Promise.all([call(host, 'ask_host', { question: 'why?' }), call(bystander, 'sleep', { ms: 50 })]);
    assert.equal(asked, 'answer to: why?');
    assert.equal(other, 'slept 50 ms');
    await hostTransport.terminateSession();
    await host.close();
    // The last client to initialize declares sampling (so the daemon asks) but keeps no stream
    // open to be asked on; the one calling declared none: the daemon's request can reach nobody,
    // and the daemon is told so instead of waiting.
    const declared = await fetch(booted.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: { sampling: {} }, clientInfo: { name: 'mute', version: '1' } } }),
    });
    await declared.text();
    const refused = await bystander.callTool({ name: 'ask_host', arguments: { question: 'anyone?' } });
    assert.equal(refused.isError, true);
    assert.match(textOf(refused), /could not reach an MCP client/);
    await bystander.close();
  } finally {
    await booted.stop();
  }
});

test('an endpoint ends the least recently asked idle session to admit a new one past 64', async () => {
  const booted = await provider.boot(spec(), { env: {} });
  try {
    const listening = await mcpClient(booted); // its event stream stays open: never ended for room
    const idle = [];
    for (let i = 0; i < 63; i++) {
      const response = await initialize(booted.mcpUrl);
      assert.equal(response.status, 200);
      idle.push(response.headers.get('mcp-session-id'));
      await response.text();
    }
    const late = await mcpClient(booted);
    assert.equal(await call(late, 'read_env', { name: 'NOTHING' }), '');
    const ping = (sessionId) =>
      fetch(booted.mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
      });
    assert.equal((await ping(idle[0])).status, 404, 'the least recently asked idle session was ended');
    const kept = await ping(idle[1]);
    assert.equal(kept.status, 200, 'the next one is still served');
    await kept.text();
    assert.equal(await call(listening, 'read_env', { name: 'NOTHING' }), '');
    await late.close();
    await listening.close();
  } finally {
    await booted.stop();
  }
});

test('connects, pauses and stops of one sandbox apply in call order, leaving one live endpoint', async () => {
  const booted = await provider.boot(spec(), { env: {}, expose: 'private' });
  try {
    const id = processContainer(booted.sandboxId);
    const [first, second] = await Promise.all([
      provider.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' }),
      provider.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' }),
    ]);
    // One endpoint at a time, on the sandbox's one durable port: the second serve closed the first
    // and listened on the same port again (two listeners on it could not both exist).
    assert.deepEqual([first.mcpUrl, second.mcpUrl], [booted.mcpUrl, booted.mcpUrl]);
    const client = await mcpClient(second);
    await call(client, 'write_file', { path: 'order.txt', content: 'ordered' });
    await client.close();
    const [, third] = await Promise.all([second.pause(), provider.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' })]);
    assert.equal(inspect('{{.State.Status}}', id), 'running', 'the connect after the pause resumed it');
    const again = await mcpClient(third);
    assert.equal(await call(again, 'read_file', { path: 'order.txt' }), 'ordered');
    await again.close();
    const [paused, stopped] = await Promise.allSettled([third.pause(), booted.stop()]);
    assert.equal(paused.status, 'fulfilled');
    assert.equal(stopped.status, 'fulfilled');
    await assert.rejects(provider.connect(booted.sandboxId, spec(), { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_not_found');
  } finally {
    await booted.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('a controller killed with a request in flight: the late answer reaches nobody in the next controller', async () => {
  const booted = await bootInChildThenKill({ AGENTPROTO_INFLIGHT: '1' });
  const fresh = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory });
  const again = await fresh.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' });
  try {
    const client = await mcpClient(again);
    const until = Date.now() + 6000;
    let calls = 0;
    while (Date.now() < until) {
      assert.equal(await call(client, 'read_file', { path: 'from-child.txt' }), 'written before the crash');
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(calls > 5);
    await client.close();
  } finally {
    await again.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('a controller killed with SIGKILL: a new provider connects from the state directory; another namespace is refused', async () => {
  const booted = await bootInChildThenKill({});

  const fresh = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory });
  const foreign = createDockerSandboxProvider({ namespace: otherNamespace, spillDirectory: spillDirectory(), stateDirectory });
  await assert.rejects(foreign.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_foreign');
  await assert.rejects(fresh.connect('sbx-0000000000000000', spec(), { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_not_found');
  assert.equal(inspect('{{.State.Status}}', processContainer(booted.sandboxId)), 'paused', 'the child paused it before it died');

  const again = await fresh.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' });
  try {
    assert.equal(again.token, booted.token);
    assert.equal(again.mcpUrl, booted.mcpUrl, 'the URL stored after boot works in the new controller');
    const client = await mcpClient(again);
    assert.equal(await call(client, 'read_file', { path: 'from-child.txt' }), 'written before the crash');
    assert.equal(await call(client, 'read_env', { name: 'SECRET' }), 'child-secret');
    await call(client, 'write_file', { path: 'after.txt', content: 'after the crash' });
    assert.equal(await call(client, 'read_file', { path: 'after.txt' }), 'after the crash');
    await client.close();
    // Pause and connect again through the recovered sandbox.
    await again.pause();
    assert.equal(inspect('{{.State.Status}}', processContainer(booted.sandboxId)), 'paused');
    // Someone else takes the port meanwhile: a typed refusal, and the sandbox stays owned.
    const squatter = createServer();
    await new Promise((resolve) => squatter.listen(Number(new URL(booted.mcpUrl).port), '127.0.0.1', resolve));
    try {
      await assert.rejects(fresh.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_port_taken' && e.message.includes(new URL(booted.mcpUrl).host));
      assert.equal(inspect('{{.State.Status}}', processContainer(booted.sandboxId)), 'paused', 'a port it cannot have leaves the sandbox paused');
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
    const third = await fresh.connect(booted.sandboxId, spec(), { env: {}, expose: 'private' });
    assert.equal(third.mcpUrl, booted.mcpUrl);
    const client3 = await mcpClient({ mcpUrl: booted.mcpUrl, authHeaders: booted.authHeaders });
    assert.equal(await call(client3, 'read_file', { path: 'after.txt' }), 'after the crash');
    await client3.close();
  } finally {
    await again.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('idle pause: no traffic for the window pauses the sandbox, the next request resumes it; keepAlive never pauses', async () => {
  const idle = spec((s) => ({ ...s, lifecycle: { pause_after_idle: 'idle-1' } }));
  const booted = await provider.boot(idle, { env: {}, expose: 'private' });
  const kept = await provider.boot(idle, { env: {}, keepAlive: true });
  try {
    const id = processContainer(booted.sandboxId);
    const client = await mcpClient(booted);
    await call(client, 'write_file', { path: 'idle.txt', content: 'before the pause' });
    await eventually(() => inspect('{{.State.Status}}', id) === 'paused', 'the idle pause');
    assert.equal(await call(client, 'read_file', { path: 'idle.txt' }), 'before the pause', 'resumed transparently');
    assert.equal(inspect('{{.State.Status}}', id), 'running');
    // A request longer than the window keeps the sandbox running throughout.
    const states = new Set();
    let inFlight;
    const started = new Promise((resolve) => (inFlight = resolve));
    const long = client.callTool({ name: 'sleep', arguments: { ms: 2500 } }, undefined, { onprogress: () => inFlight() });
    let settled = false;
    long.finally(() => (settled = true)).catch(() => {});
    await started; // the daemon has the request: from here the idle clock must hold
    while (!settled) {
      const { stdout } = await execFileAsync('docker', ['inspect', '--format', '{{.State.Status}}', id]);
      if (!settled) states.add(stdout.trim());
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(textOf(await long), 'slept 2500 ms');
    assert.deepEqual([...states], ['running'], 'never paused while a request was in flight');
    await eventually(() => inspect('{{.State.Status}}', id) === 'paused', 'the second idle pause');
    await client.close();
    // A client that connects and then only listens (its event stream open) lets it pause too.
    const listener = await mcpClient(booted);
    assert.equal(inspect('{{.State.Status}}', id), 'running', 'initializing resumed it');
    await eventually(() => inspect('{{.State.Status}}', id) === 'paused', 'the pause with a listener connected');
    assert.equal(await call(listener, 'read_file', { path: 'idle.txt' }), 'before the pause');
    await listener.close();
    assert.equal(inspect('{{.State.Status}}', processContainer(kept.sandboxId)), 'running', 'keepAlive: no idle pause');
  } finally {
    await booted.stop();
    await kept.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});

/** A raw POST of an MCP initialize with exactly `headers` (Host included), as a browser or a rebinding page could send. */
function rawInitialize(url, headers) {
  const target = new URL(url);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', setHost: false, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('a forged Host or a non-loopback Origin gets 403 before anything: a paused sandbox stays paused', async () => {
  const idle = spec((s) => ({ ...s, lifecycle: { pause_after_idle: 'idle-1' } }));
  const booted = await provider.boot(idle, { env: {} });
  try {
    const id = processContainer(booted.sandboxId);
    const own = new URL(booted.mcpUrl).host;
    await eventually(() => inspect('{{.State.Status}}', id) === 'paused', 'the idle pause');
    assert.equal(await rawInitialize(booted.mcpUrl, { host: 'evil.example' }), 403, 'a forged Host');
    assert.equal(await rawInitialize(booted.mcpUrl, { host: `evil.example:${new URL(booted.mcpUrl).port}` }), 403, 'a forged Host with the port');
    assert.equal(await rawInitialize(booted.mcpUrl, { host: own, origin: 'http://evil.example' }), 403, 'a foreign Origin');
    assert.equal(await rawInitialize(booted.mcpUrl, { host: own, origin: 'null' }), 403, 'an opaque Origin');
    assert.equal(inspect('{{.State.Status}}', id), 'paused', 'nothing resumed the sandbox');
    // A loopback web origin, and a client that sends none, are served.
    assert.equal(await rawInitialize(booted.mcpUrl, { host: own, origin: 'http://localhost:5173' }), 200);
    assert.equal(inspect('{{.State.Status}}', id), 'running');
    assert.equal(await rawInitialize(booted.mcpUrl, { host: own }), 200);
  } finally {
    await booted.stop();
  }
});

test('per-command caps are accepted with a warning', async () => {
  const warnings = [];
  const onWarning = (warning) => warning.code === 'NATIVE_SANDBOX_AGENTPROTO_UNENFORCED_LIMIT' && warnings.push(warning);
  process.on('warning', onWarning);
  const booted = await provider.boot(spec((s) => ({ ...s, limits: { timeout_ms: 30_000, cpu_ms: 5_000 } })), { env: {} });
  try {
    await eventually(() => warnings.length > 0, 'the warning');
    assert.equal(warnings.length, 1);
    assert.match(warnings[0].message, /timeout_ms.*cpu_ms/);
  } finally {
    process.off('warning', onWarning);
    await booted.stop();
  }
});

test('boot resolves only once the daemon answered MCP: one that exits fails the boot with its stderr, and nothing is left', async () => {
  const failing = spec((s) => ({ ...s, config: { ...s.config, daemon: { executable: '/usr/local/bin/node', args: ['-e', "console.error('config error: API_KEY is not set'); process.exit(3)"] } } }));
  const error = await provider.boot(failing, { env: {} }).catch((e) => e);
  assert.ok(error instanceof SandboxProviderError, String(error));
  assert.equal(error.code, 'sandbox_daemon_gone');
  assert.match(error.message, /did not become ready/);
  assert.match(error.message, /its last stderr: config error: API_KEY is not set/);
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test("a running daemon's stderr is readable by the host, never mixed into MCP traffic", async () => {
  const talker = spec((s) => ({ ...s, config: { ...s.config, daemon: { ...daemon, args: ['-e', "console.error('daemon says hello'); import('/opt/mcp/server.mjs')"] } } }));
  const booted = await provider.boot(talker, { env: {} });
  try {
    await eventually(() => booted.daemonStderr().includes('daemon says hello'), 'the stderr line');
    const client = await mcpClient(booted);
    await call(client, 'write_file', { path: 'x.txt', content: 'fine' });
    assert.equal(await call(client, 'read_file', { path: 'x.txt' }), 'fine');
    await client.close();
  } finally {
    await booted.stop();
  }
});

test('a daemon that is gone is a typed error; the sandbox stays owned until stopped', async () => {
  const quitter = spec((s) => ({ ...s, config: { ...s.config, daemon: QUITTER } }));
  const booted = await provider.boot(quitter, { env: {} });
  try {
    const asked = await initialize(booted.mcpUrl);
    await asked.text().catch(() => {});
    await eventually(() => inspect('{{.State.Status}}', processContainer(booted.sandboxId)) === 'exited', 'the daemon exit');
    await assert.rejects(provider.connect(booted.sandboxId, quitter, { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_daemon_gone');
    await assert.rejects(provider.connect(booted.sandboxId, spec(), { env: {} }), (e) => e instanceof SandboxValidationError && e.issues[0].path.join('.') === 'spec.config.daemon');
    assert.ok(existsSync(join(stateDirectory, `${booted.sandboxId}.json`)), 'the state file is kept');
    assert.notDeepEqual(leftovers(namespace), NOTHING, 'the sandbox stays owned');
  } finally {
    await booted.stop();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual(stateFiles(), []);
});

test('a daemon gone after the controller died: a new provider refuses it typed, and a reconcile of the state file still removes the sandbox', async () => {
  const booted = await bootInChildThenKill({ AGENTPROTO_QUIT: '1' });
  await eventually(() => inspect('{{.State.Status}}', processContainer(booted.sandboxId)) === 'exited', 'the daemon exit');
  const fresh = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory });
  await assert.rejects(fresh.connect(booted.sandboxId, spec(), { env: {} }), (e) => e instanceof SandboxValidationError && e.issues[0].path.join('.') === 'spec.config.daemon', 'the stored daemon is checked');
  await assert.rejects(fresh.connect(booted.sandboxId, { provider: 'docker', config: {} }, { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_daemon_gone' && e.sandboxId === booted.sandboxId);
  const file = join(stateDirectory, `${booted.sandboxId}.json`);
  const { record, image } = JSON.parse(execFileSync('cat', [file], { encoding: 'utf8' }));
  assert.equal(image, IMAGE);
  const backend = createDockerSandboxBackend({ image: record.imageDigest, namespace, spillDirectory: spillDirectory() });
  const reconciled = await backend.reconcile(record);
  assert.equal(reconciled.kind, 'matched');
  await reconciled.owner.destroy();
  execFileSync('rm', [file]);
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test("a state file naming a sandbox whose process was not started reattachable is refused, and the process is not disturbed", async () => {
  const input = (await import('native-sandbox')).parseSandboxRequest({
    policy: {
      resources: { cpus: 1, memoryBytes: 256 * 1024 * 1024, pids: 64 },
      temporaryStorage: { homeBytes: 8 * 1024 * 1024, tempBytes: 8 * 1024 * 1024 },
      network: { kind: 'isolated' },
      deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
      transfers: { chunkBytes: 65536, metadataBatchBytes: 65536, mergeFanIn: 8 },
      streams: { maxBufferedInputBytes: 1024 * 1024, maxBufferedOutputBytes: 1024 * 1024, highWaterMark: 65536 },
    },
  });
  let record;
  const backend = createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory() });
  const sandbox = await backend.reserve(input, { kind: 'persisted', persist: async (next) => void (record = next) }).start();
  try {
    const { stdin, stdout } = await sandbox.reserveProcess({ executable: '/usr/local/bin/node', args: ['-e', 'process.stdin.pipe(process.stdout)'], env: {}, cwd: sandbox.workspace }).start();
    const file = join(stateDirectory, `${sandbox.id}.json`);
    writeFileSync(file, JSON.stringify({ format: 'native-sandbox/agentproto-state', version: 1, namespace, sandboxId: sandbox.id, image: IMAGE, daemon, expose: 'public', request: input, record }), { mode: 0o600 });
    const fresh = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory });
    await assert.rejects(fresh.connect(sandbox.id, spec(), { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_daemon_gone' && /not started reattachable/.test(e.message));
    execFileSync('rm', [file]);
    // The refused attach never touched the process's own streams.
    stdin.write('still mine\n');
    const [echoed] = await once(stdout, 'data');
    assert.equal(echoed.toString(), 'still mine\n');
  } finally {
    await sandbox.destroy();
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('a corrupt, foreign or linked state file is a typed error, never a crash', async () => {
  const directory = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-bad-'));
  const local = createDockerSandboxProvider({ namespace, spillDirectory: spillDirectory(), stateDirectory: directory });
  const cases = {
    'sbx-1111111111111111': (file) => writeFileSync(file, '{not json', { mode: 0o600 }),
    'sbx-2222222222222222': (file) => writeFileSync(file, JSON.stringify({ format: 'something-else' }), { mode: 0o600 }),
    'sbx-3333333333333333': (file) => writeFileSync(file, JSON.stringify({ format: 'native-sandbox/agentproto-state', version: 1 }), { mode: 0o644 }),
    'sbx-4444444444444444': (file) => symlinkSync('/etc/hostname', file),
    'sbx-5555555555555555': (file) =>
      writeFileSync(file, JSON.stringify({ format: 'native-sandbox/agentproto-state', version: 1, namespace, sandboxId: 'sbx-5555555555555555', image: IMAGE, expose: 'public', request: {}, record: {} }), { mode: 0o600 }),
  };
  for (const [sandboxId, write] of Object.entries(cases)) {
    write(join(directory, `${sandboxId}.json`));
    await assert.rejects(local.connect(sandboxId, spec(), { env: {} }), (e) => e instanceof SandboxProviderError && e.code === 'sandbox_state_invalid' && e.sandboxId === sandboxId, sandboxId);
  }
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('a daemon that never answers MCP fails the boot at the startup deadline (60 s) with its stderr, and nothing is left', async () => {
  const { booted, error, ms } = await silentBoot;
  if (booted) await booted.stop();
  assert.ok(error instanceof SandboxProviderError, String(error));
  assert.equal(error.code, 'sandbox_daemon_gone');
  assert.match(error.message, /did not become ready: it did not answer an MCP ping within 60000 ms; the boot destroys the sandbox/);
  assert.match(error.message, /its last stderr: loading a model that never arrives/);
  assert.ok(ms >= 60_000, `the boot waited for the whole deadline (${ms} ms)`);
  assert.deepEqual(leftovers(silentNamespace), NOTHING);
  assert.deepEqual(stateFiles(silentState), []);
});
