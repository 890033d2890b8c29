// The MCP Streamable HTTP endpoint a provider serves for one sandbox: `http://127.0.0.1:<port>/mcp`
// in this process, one SDK transport per MCP session (sessions, SSE responses and the standalone
// event stream as the SDK implements the specification), every session bridged to the daemon.
// A private endpoint answers 401 to any request without exactly its bearer header, before it
// reads anything else; the token is never logged nor put in a message.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';

const BODY_BYTES_MAX = 4 * 1024 * 1024;

function sendJson(res, status, body, headers = {}) {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const rpcError = (code, message) => ({ jsonrpc: '2.0', error: { code, message }, id: null });

async function readBody(req) {
  const chunks = [];
  let total = 0;
  for await (const chunk of req) {
    total += chunk.length;
    if (total > BODY_BYTES_MAX) return { tooLarge: true };
    chunks.push(chunk);
  }
  return { text: Buffer.concat(chunks).toString('utf8') };
}

/**
 * Serves the endpoint. `sdk`: `{ StreamableHTTPServerTransport, isInitializeRequest }`.
 * `bridge`: the daemon's `StdioBridge`. `gate`: a token gate or `undefined` (public).
 * `admit(counted)`: resolves a release function once the sandbox can serve (the idle gate).
 * Resolves `{ url, close() }`.
 */
export async function serveEndpoint({ sdk, bridge, gate, admit }) {
  const sessions = new Map();
  let closing = false;
  let allowedHosts = [];

  const newSession = () => {
    const transport = new sdk.StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      enableDnsRebindingProtection: true,
      allowedHosts,
      onsessioninitialized: (id) => void sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    bridge.connect(transport);
    return transport;
  };

  async function handle(req, res) {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    if (path !== '/mcp') return sendJson(res, 404, { error: 'not found' });
    if (gate !== undefined && !gate.allows(req.headers.authorization)) {
      return sendJson(res, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer' });
    }
    if (closing) return sendJson(res, 503, rpcError(-32000, 'the endpoint is closed'));
    if (!['POST', 'GET', 'DELETE'].includes(req.method)) return sendJson(res, 405, rpcError(-32000, 'method not allowed'), { allow: 'GET, POST, DELETE' });
    let release;
    try {
      release = await admit(req.method === 'POST');
    } catch (error) {
      return sendJson(res, 503, rpcError(-32000, `the sandbox could not be resumed: ${error.message}`));
    }
    res.on('close', release);
    const sessionId = req.headers['mcp-session-id'];
    if (req.method !== 'POST') {
      const transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (transport === undefined) return sendJson(res, typeof sessionId === 'string' ? 404 : 400, rpcError(-32001, 'Session not found'));
      return transport.handleRequest(req, res);
    }
    const body = await readBody(req);
    if (body.tooLarge) return sendJson(res, 413, rpcError(-32000, `the request body is larger than ${BODY_BYTES_MAX} bytes`));
    let message;
    try {
      message = JSON.parse(body.text);
    } catch {
      return sendJson(res, 400, rpcError(-32700, 'Parse error'));
    }
    let transport;
    if (typeof sessionId === 'string') {
      transport = sessions.get(sessionId);
      if (transport === undefined) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
    } else {
      const initializes = Array.isArray(message) ? message.some(sdk.isInitializeRequest) : sdk.isInitializeRequest(message);
      if (!initializes) return sendJson(res, 400, rpcError(-32000, 'Bad Request: no valid session ID provided'));
      transport = newSession();
      await transport.handleRequest(req, res, message);
      // An initialization the transport refused started no session: nothing may keep it.
      if (transport.sessionId === undefined || sessions.get(transport.sessionId) !== transport) await transport.close();
      return;
    }
    return transport.handleRequest(req, res, message);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => sendJson(res, 500, rpcError(-32603, `internal error: ${error.message}`)));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address();
  allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`];
  let closed;
  return Object.freeze({
    url: `http://127.0.0.1:${port}/mcp`,
    /** Ends every session and the listener; resolves when the port is released. */
    close() {
      closed ??= (async () => {
        closing = true;
        const transports = [...sessions.values()];
        sessions.clear();
        await Promise.allSettled(transports.map((transport) => transport.close()));
        const done = new Promise((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await done;
      })();
      return closed;
    },
  });
}
