// An MCP client using a Docker sandbox through the agentproto provider: boot a sandbox whose
// daemon is an MCP stdio server, talk to it over the private Streamable HTTP endpoint with the
// token's headers, pause it, connect again (same token, the files still there), stop it.
// Run it with `npm run example:agentproto`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createDockerSandboxProvider, resolveLifecyclePolicy } from 'native-sandbox/agentproto';

const stateDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-state-'));
const spillDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-agentproto-spill-'));
const provider = createDockerSandboxProvider({ namespace: `agentproto-example-${process.pid}`, spillDirectory, stateDirectory });

/** @type {import('native-sandbox/agentproto').SandboxSpec} */
const spec = {
  provider: 'docker',
  config: {
    image: process.env.NATIVE_SANDBOX_NODE_GUEST_IMAGE ?? 'native-sandbox/node-agent:1',
    daemon: { executable: '/usr/local/bin/node', args: ['/opt/mcp/server.mjs'] },
  },
  limits: { memory_mb: 512 },
  network: { egress: [] },
  lifecycle: { pause_after_idle: 'idle-600' },
};
console.log('lifecycle policy:', resolveLifecyclePolicy(spec, false));

/**
 * An MCP client over the booted sandbox's endpoint, presenting its auth headers.
 * @param {import('native-sandbox/agentproto').BootedSandbox} booted
 */
async function connectClient(booted) {
  const client = new Client({ name: 'native-sandbox-example-host', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(booted.mcpUrl), { requestInit: { headers: booted.authHeaders } }));
  return client;
}
/** @param {any} result a tool call's result: its text parts, joined */
const text = (result) => result.content.map((/** @type {{ text?: string }} */ part) => part.text ?? '').join('');

const booted = await provider.boot(spec, { env: { PROJECT: 'demo' }, expose: 'private' });
try {
  console.log(`sandbox ${booted.sandboxId} serves MCP at ${booted.mcpUrl} (private: ${Object.keys(booted.authHeaders ?? {}).join(', ')})`);
  const unauthorized = await fetch(booted.mcpUrl, { method: 'POST', body: '{}' });
  console.log('without the token:', unauthorized.status);
  const client = await connectClient(booted);
  console.log('tools:', (await client.listTools()).tools.map((tool) => tool.name).join(', '));
  console.log(text(await client.callTool({ name: 'write_file', arguments: { path: 'plan.md', content: '1. write the code' } })));
  console.log('PROJECT =', text(await client.callTool({ name: 'read_env', arguments: { name: 'PROJECT' } })));
  await client.close();

  await booted.pause();
  console.log('paused; connecting again');
  const again = await provider.connect(booted.sandboxId, spec, { env: {}, expose: 'private' });
  const resumed = await connectClient(again);
  console.log('plan.md after the pause:', JSON.stringify(text(await resumed.callTool({ name: 'read_file', arguments: { path: 'plan.md' } }))));
  await resumed.close();
} finally {
  await booted.stop();
  rmSync(stateDirectory, { recursive: true, force: true });
  rmSync(spillDirectory, { recursive: true, force: true });
}
console.log('stopped: nothing is left on the engine');
