// A small ACP agent written with the Agent Client Protocol SDK's agent side. It runs inside the
// sandbox: each prompt turn writes a file into the session's working directory (the sandbox
// workspace) and streams a session update back. The prompt "crash" makes it exit mid-session.
import { writeFileSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { agent, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk';

const sessions = new Map();
let turns = 0;

const app = agent({ name: 'native-sandbox-example-agent' })
  .onRequest('initialize', () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    authMethods: [],
  }))
  .onRequest('session/new', ({ params }) => {
    const sessionId = `session-${sessions.size + 1}`;
    sessions.set(sessionId, params.cwd);
    return { sessionId };
  })
  .onRequest('session/prompt', async ({ params, client }) => {
    const text = params.prompt.map((block) => (block.type === 'text' ? block.text : '')).join('');
    if (text === 'crash') process.exit(3);
    turns += 1;
    writeFileSync(`${sessions.get(params.sessionId)}/turn-${turns}.txt`, text.toUpperCase());
    await client.notify('session/update', {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `turn ${turns}: ${text}` } },
    });
    return { stopReason: 'end_turn' };
  })
  .onNotification('session/cancel', () => {});

app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
