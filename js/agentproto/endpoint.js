// The MCP Streamable HTTP endpoint a provider serves for one sandbox: `http://127.0.0.1:<port>/mcp`
// in this process, one SDK transport per MCP session (sessions, SSE responses and the standalone
// event stream as the SDK implements the specification), every session bridged to the daemon.
// A private endpoint answers 401 to any request without exactly its bearer header, before it
// reads anything else; the token is never logged nor put in a message.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';

const BODY_BYTES_MAX = 4 * 1024 * 1024;
/** Sessions one endpoint keeps at once (each holds transport state in this process); past it,
 * the least recently asked idle one is ended. */
const SESSIONS_MAX = 64;

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

/** Exactly one Host header, naming this endpoint's loopback address and port. */
function hostAllowed(host, allowed) {
  return host?.length === 1 && allowed.includes(host[0].toLowerCase());
}

/** No Origin (a client that is not a browser), or one web origin on a loopback address. */
function originAllowed(origin) {
  if (origin === undefined) return true;
  if (origin.length !== 1) return false;
  let url;
  try {
    url = new URL(origin[0]);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

/**
 * Serves the endpoint. `sdk`: `{ StreamableHTTPServerTransport, isInitializeRequest }`.
 * `bridge`: the daemon's `StdioBridge`. `gate`: a token gate or `undefined` (public).
 * `admit(counted)`: resolves a release function once the sandbox can serve (the idle gate).
 * `port`: the loopback port to listen on (the sandbox's recorded one), or `undefined` for any
 * free port; `portTaken(port)`: the error when another listener holds it.
 * Resolves `{ url, port, close() }`.
 */
export async function serveEndpoint({ sdk, bridge, gate, admit, port: wanted, portTaken }) {
  const sessions = new Map();
  let closing = false;
  let allowedHosts = [];

  /** transport → { lastActive, gets, posts }: when it was last asked, and its open responses. */
  const activity = new Map();

  const newSession = () => {
    const transport = new sdk.StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      enableDnsRebindingProtection: true,
      allowedHosts,
      onsessioninitialized: (id) => void sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined && sessions.get(transport.sessionId) === transport) sessions.delete(transport.sessionId);
      activity.delete(transport);
    };
    activity.set(transport, { lastActive: Date.now(), gets: 0, posts: 0 });
    bridge.connect(transport, () => activity.get(transport) ?? { gets: 0, posts: 0 });
    return transport;
  };

  /** Counts `res` as an open response of `transport` until it closes. */
  const track = (transport, res, kind) => {
    const open = activity.get(transport);
    if (open === undefined) return;
    open.lastActive = Date.now();
    open[kind] += 1;
    res.on('close', () => (open[kind] -= 1));
  };

  /**
   * Makes room for one more session: clients rarely end theirs (the SDK client's close() only
   * drops its connections), so the least recently asked session with nothing open goes.
   */
  const makeRoom = async () => {
    if (sessions.size < SESSIONS_MAX) return true;
    let oldest;
    for (const transport of sessions.values()) {
      const open = activity.get(transport);
      if (open !== undefined && open.gets === 0 && open.posts === 0 && (oldest === undefined || open.lastActive < activity.get(oldest).lastActive)) oldest = transport;
    }
    if (oldest === undefined) return false;
    await oldest.close();
    return true;
  };

  async function handle(req, res) {
    // Before anything else (a resume, an eviction, even the token check): a request named for
    // another host (DNS rebinding) or sent from a non-loopback web origin changes nothing.
    if (!hostAllowed(req.headersDistinct?.host, allowedHosts) || !originAllowed(req.headersDistinct?.origin)) {
      return sendJson(res, 403, rpcError(-32000, 'Forbidden: the Host or Origin header names no loopback address of this endpoint'));
    }
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    if (path !== '/mcp') return sendJson(res, 404, { error: 'not found' });
    // Exactly one authorization header, exactly the token's (Node would keep the first of two).
    const authorization = req.headersDistinct?.authorization;
    if (gate !== undefined && !(authorization?.length === 1 && gate.allows(authorization[0]))) {
      return sendJson(res, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer' });
    }
    if (closing) return sendJson(res, 503, rpcError(-32000, 'the endpoint is closed'));
    if (!['POST', 'GET', 'DELETE'].includes(req.method)) return sendJson(res, 405, rpcError(-32000, 'method not allowed'), { allow: 'GET, POST, DELETE' });
    // Only a POST carries work for the daemon: it resumes a paused sandbox and holds the idle
    // clock until its response ends. The release is armed before the wait, so a client that
    // goes away meanwhile still releases.
    let release;
    let gone = false;
    res.on('close', () => {
      gone = true;
      release?.();
    });
    try {
      release = await admit(req.method === 'POST');
    } catch (error) {
      return sendJson(res, 503, rpcError(-32000, `the sandbox could not be resumed: ${error.message}`));
    }
    if (gone) return release();
    if (closing) return sendJson(res, 503, rpcError(-32000, 'the endpoint is closed'));
    const sessionId = req.headers['mcp-session-id'];
    if (req.method !== 'POST') {
      const transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (transport === undefined) return sendJson(res, typeof sessionId === 'string' ? 404 : 400, rpcError(-32001, 'Session not found'));
      if (req.method === 'GET') track(transport, res, 'gets');
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
    if (typeof sessionId === 'string') {
      const transport = sessions.get(sessionId);
      if (transport === undefined) return sendJson(res, 404, rpcError(-32001, 'Session not found'));
      track(transport, res, 'posts');
      return transport.handleRequest(req, res, message);
    }
    const initializes = Array.isArray(message) ? message.some(sdk.isInitializeRequest) : sdk.isInitializeRequest(message);
    if (!initializes) return sendJson(res, 400, rpcError(-32000, 'Bad Request: no valid session ID provided'));
    if (closing) return sendJson(res, 503, rpcError(-32000, 'the endpoint is closed'));
    if (!(await makeRoom())) return sendJson(res, 503, rpcError(-32000, `the endpoint serves at most ${SESSIONS_MAX} sessions, all of them busy`));
    if (closing) return sendJson(res, 503, rpcError(-32000, 'the endpoint is closed'));
    const transport = newSession();
    track(transport, res, 'posts');
    try {
      await transport.handleRequest(req, res, message);
    } finally {
      // An initialization the transport refused started no session, and one that finished while
      // the endpoint closed is not served: nothing may keep either connected to the daemon.
      if (closing || transport.sessionId === undefined || sessions.get(transport.sessionId) !== transport) {
        if (transport.sessionId !== undefined && sessions.get(transport.sessionId) === transport) sessions.delete(transport.sessionId);
        await transport.close();
      }
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => sendJson(res, 500, rpcError(-32603, `internal error: ${error.message}`)));
  });
  // A failure to accept one connection (EMFILE, ENFILE) must not become an uncaught 'error' event
  // that ends the host: Node keeps the listener open, and the endpoint goes on serving the
  // connections it can accept; the refused client sees its connection fail.
  const acceptFailed = () => {};
  await new Promise((resolve, reject) => {
    const listenFailed = (error) => reject(error?.code === 'EADDRINUSE' && wanted !== undefined ? portTaken(wanted, error) : error);
    server.once('error', listenFailed);
    server.listen(wanted ?? 0, '127.0.0.1', () => {
      server.off('error', listenFailed);
      server.on('error', acceptFailed);
      resolve();
    });
  });
  const { port } = server.address();
  allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`];
  let closed;
  return Object.freeze({
    url: `http://127.0.0.1:${port}/mcp`,
    port,
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
