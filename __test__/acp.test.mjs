// ACP with the real protocol: the SDK's client side on the host, the SDK's agent side inside a
// Docker sandbox (Node.js guest image), speaking over the sandbox process's streams.
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { after, test } from 'node:test';
import { client, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { SandboxStateError, SandboxValidationError } from 'native-sandbox';
import { createSandboxAcpIntegration } from 'native-sandbox/acp';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';

const IMAGE = process.env.NATIVE_SANDBOX_NODE_GUEST_IMAGE ?? 'native-sandbox/node-agent:1';
const namespace = uniqueNamespace('acp');
const backend = dockerBackend(namespace, { image: IMAGE });
after(() => assert.deepEqual(leftovers(namespace), NOTHING));

const agentLaunch = (sandbox) => ({ executable: '/usr/local/bin/node', args: ['/opt/agent/agent.mjs'], env: {}, cwd: sandbox.workspace });
const policy = () => request((p) => Object.assign(p.resources, { memoryBytes: 512 * 1024 * 1024, pids: 128 }));

function acpClient(updates) {
  return client({ name: 'native-sandbox-test-host' }).onNotification('session/update', ({ params }) => {
    updates.push(params.update);
  });
}

test('a real ACP client and agent: initialize, a session in the workspace, several turns, release, export, destroy', async () => {
  const sandbox = await backend.reserve(policy(), { kind: 'in_process' }).start();
  try {
    const integration = createSandboxAcpIntegration(sandbox);
    assert.ok(Object.isFrozen(integration) && Object.isFrozen(integration.host) && Object.isFrozen(integration.executionBoundary));
    assert.deepEqual(Object.keys(integration.host), []);
    const connection = integration.executionBoundary.reserve(agentLaunch(sandbox));
    assert.throws(() => integration.executionBoundary.reserve(agentLaunch(sandbox)), SandboxStateError);
    const { stdin, stdout, stderr } = await connection.start({ signal: new AbortController().signal });
    stderr.resume();
    const updates = [];
    const turns = await acpClient(updates).connectWith(ndJsonStream(Writable.toWeb(stdin), Readable.toWeb(stdout)), async (ctx) => {
      const init = await ctx.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false } });
      assert.equal(init.protocolVersion, PROTOCOL_VERSION);
      const { sessionId } = await ctx.request('session/new', { cwd: sandbox.workspace, mcpServers: [] });
      const stops = [];
      for (const text of ['alpha', 'beta', 'gamma']) {
        stops.push((await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] })).stopReason);
      }
      return stops;
    });
    assert.deepEqual(turns, ['end_turn', 'end_turn', 'end_turn']);
    assert.deepEqual(updates.map((u) => u.content.text), ['turn 1: alpha', 'turn 2: beta', 'turn 3: gamma']);
    await connection.release();
    assert.equal(sandbox.state.kind, 'stopped');
    const files = {};
    await sandbox.exportTree({ kind: 'files', paths: ['turn-1.txt', 'turn-3.txt'] }, async (entry) => {
      let text = '';
      for await (const chunk of entry.bytes) text += chunk;
      files[entry.path] = text;
    });
    assert.deepEqual(files, { 'turn-1.txt': 'ALPHA', 'turn-3.txt': 'GAMMA' });
  } finally {
    await sandbox.destroy();
  }
});

test('an agent crashing mid-session is a client-side error; the sandbox still stops and destroys', async () => {
  const sandbox = await backend.reserve(policy(), { kind: 'in_process' }).start();
  try {
    const connection = createSandboxAcpIntegration(sandbox).executionBoundary.reserve(agentLaunch(sandbox));
    const { stdin, stdout, stderr } = await connection.start();
    stderr.resume();
    const outcome = await acpClient([])
      .connectWith(ndJsonStream(Writable.toWeb(stdin), Readable.toWeb(stdout)), async (ctx) => {
        await ctx.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
        const { sessionId } = await ctx.request('session/new', { cwd: sandbox.workspace, mcpServers: [] });
        await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'crash' }] });
        return 'answered';
      })
      .catch((error) => error);
    assert.ok(outcome instanceof Error, `the client saw ${outcome}`);
    await connection.release();
    assert.equal(sandbox.state.kind, 'stopped');
  } finally {
    await sandbox.destroy();
  }
  assert.equal(sandbox.state.kind, 'destroyed');
});

test('cancellation through the start signal, and recipes with inherited or relative paths', async () => {
  const sandbox = await backend.reserve(policy(), { kind: 'in_process' }).start();
  try {
    const integration = createSandboxAcpIntegration(sandbox);
    assert.throws(() => integration.executionBoundary.reserve({ executable: 'node', args: [], env: {}, cwd: sandbox.workspace }), SandboxValidationError);
    assert.throws(() => createSandboxAcpIntegration(sandbox).executionBoundary.reserve({ executable: '/usr/local/bin/node', args: [], env: process.env, cwd: 'workspace' }), SandboxValidationError);
    const fresh = await backend.reserve(policy(), { kind: 'in_process' }).start();
    try {
      const connection = createSandboxAcpIntegration(fresh).executionBoundary.reserve(agentLaunch(fresh));
      const controller = new AbortController();
      controller.abort();
      await assert.rejects(connection.start({ signal: controller.signal }), { name: 'SandboxOperationError', code: 'cancelled' });
      await connection.release();
    } finally {
      await fresh.destroy();
    }
  } finally {
    await sandbox.destroy();
  }
});
