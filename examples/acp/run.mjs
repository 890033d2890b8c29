// An ACP agent inside a sandbox, driven by a host's ACP client: the composition a host's ACP
// provider driver makes with createSandboxAcpIntegration. Run it with `npm run example:acp`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { client, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createSandboxAcpIntegration } from 'native-sandbox/acp';
import { createDockerSandboxBackend } from 'native-sandbox/docker';

const spillDirectory = mkdtempSync(join(tmpdir(), 'native-sandbox-acp-'));
const backend = createDockerSandboxBackend({
  image: process.env.NATIVE_SANDBOX_NODE_GUEST_IMAGE ?? 'native-sandbox/node-agent:1',
  namespace: `acp-example-${process.pid}`,
  spillDirectory,
});
/** @type {import('native-sandbox').SandboxRequestInput} */
const request = {
  policy: {
    resources: { cpus: 1, memoryBytes: 512 * 1024 * 1024, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 * 1024, tempBytes: 64 * 1024 * 1024 },
    network: { kind: 'isolated' },
    // A 30 s cleanup observation pairs with a provider's 15 s shutdown setting.
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};

const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
try {
  const { executionBoundary, host } = createSandboxAcpIntegration(sandbox);
  console.log('host facilities:', Object.keys(host).length === 0 ? 'none' : Object.keys(host));
  const connection = executionBoundary.reserve({
    executable: '/usr/local/bin/node',
    args: ['/opt/agent/agent.mjs'],
    env: {},
    cwd: sandbox.workspace,
  });
  const { stdin, stdout, stderr } = await connection.start();
  stderr.pipe(process.stderr);
  const app = client({ name: 'native-sandbox-example-host' }).onNotification('session/update', ({ params }) => {
    if (params.update.sessionUpdate === 'agent_message_chunk' && params.update.content.type === 'text') {
      console.log('agent says:', params.update.content.text);
    }
  });
  await app.connectWith(ndJsonStream(Writable.toWeb(stdin), Readable.toWeb(stdout)), async (ctx) => {
    const init = await ctx.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
    console.log('agent speaks ACP protocol version', init.protocolVersion);
    const { sessionId } = await ctx.request('session/new', { cwd: sandbox.workspace, mcpServers: [] });
    for (const text of ['write the plan', 'write the code']) {
      const { stopReason } = await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] });
      console.log(`turn "${text}" ended: ${stopReason}`);
    }
  });
  await connection.release();
  await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
    if (entry.kind !== 'file') return;
    let text = '';
    for await (const chunk of entry.bytes) text += chunk;
    console.log(`exported ${entry.path}: ${JSON.stringify(text)}`);
  });
} finally {
  await sandbox.destroy();
  rmSync(spillDirectory, { recursive: true, force: true });
}
