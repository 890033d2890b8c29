// One MCP stdio daemon shared by any number of MCP sessions. The daemon speaks newline-delimited
// JSON-RPC on its stdin/stdout as if to one client; each session is a transport (the SDK's
// Streamable HTTP server transport) with its own request ids. Requests are renumbered on the
// way in and their answers routed back by that number; a session's cancellations follow its
// renumbered requests. What the daemon sends on its own: progress goes to the request that asked
// for it, any other notification to every session, a request to the session heard from last.

const LINE_BYTES_MAX = 64 * 1024 * 1024;

const isRequest = (message) => typeof message?.method === 'string' && message.id !== undefined && message.id !== null;
const isNotification = (message) => typeof message?.method === 'string' && (message.id === undefined || message.id === null);

export class StdioBridge {
  #stdin;
  #onTraffic;
  #nextId = 1;
  /** bridge id → { session, id, progressToken } */
  #pending = new Map();
  /** daemon request id → session */
  #asked = new Map();
  #sessions = new Set();
  #lastHeard;
  #ended;
  #writing = Promise.resolve();

  /**
   * `stdin` / `stdout`: the daemon's streams. `onTraffic()` is called for every message either
   * way (the idle clock). `onEnd(reason)` once when the daemon's stdout ends or fails.
   */
  constructor({ stdin, stdout, onTraffic = () => {}, onEnd = () => {} }) {
    this.#stdin = stdin;
    this.#onTraffic = onTraffic;
    stdin.on('error', () => {});
    let buffered = [];
    let bufferedBytes = 0;
    let skipping = false;
    stdout.on('data', (chunk) => {
      let start = 0;
      for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
        const piece = chunk.subarray(start, newline);
        start = newline + 1;
        if (skipping) {
          skipping = false;
          continue;
        }
        const line = bufferedBytes === 0 ? piece : Buffer.concat([...buffered, piece]);
        buffered = [];
        bufferedBytes = 0;
        this.#fromDaemon(line);
      }
      const rest = chunk.subarray(start);
      if (rest.length === 0 || skipping) return;
      if (bufferedBytes + rest.length > LINE_BYTES_MAX) {
        // A line past the bound is no MCP message this bridge can hold: it is dropped whole.
        buffered = [];
        bufferedBytes = 0;
        skipping = true;
        return;
      }
      buffered.push(Buffer.from(rest));
      bufferedBytes += rest.length;
    });
    const end = (reason) => {
      if (this.#ended !== undefined) return;
      this.#ended = reason;
      for (const [, entry] of this.#pending) {
        entry.session.send({ jsonrpc: '2.0', id: entry.id, error: { code: -32000, message: `the sandbox daemon is gone: ${reason}` } }).catch(() => {});
      }
      this.#pending.clear();
      onEnd(reason);
    };
    stdout.on('end', () => end('its stdout ended'));
    stdout.on('error', (error) => end(`its stdout failed (${error.message})`));
    stdout.on('close', () => end('its stdout closed'));
  }

  /** Whether the daemon's output has ended. */
  get ended() {
    return this.#ended !== undefined;
  }

  /** Wires `transport` (a session) to the daemon; its close forgets the session. */
  connect(transport) {
    this.#sessions.add(transport);
    transport.onmessage = (message) => this.#fromSession(transport, message);
    const previous = transport.onclose;
    transport.onclose = () => {
      previous?.();
      this.#forget(transport);
    };
  }

  #forget(session) {
    if (!this.#sessions.delete(session)) return;
    if (this.#lastHeard === session) this.#lastHeard = undefined;
    for (const [bridgeId, entry] of this.#pending) {
      if (entry.session !== session) continue;
      this.#pending.delete(bridgeId);
      this.#write({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: bridgeId, reason: 'the MCP session ended' } });
    }
    for (const [id, asked] of this.#asked) if (asked === session) this.#asked.delete(id);
  }

  #write(message) {
    // One message after another, each after the stream took the one before (its buffer bounds
    // what may wait: a full buffer is waited out, never overrun).
    this.#writing = this.#writing.then(
      () =>
        new Promise((resolve) => {
          if (this.#stdin.destroyed || this.#stdin.writableEnded) return resolve();
          const more = this.#stdin.write(`${JSON.stringify(message)}\n`);
          if (more) return resolve();
          const done = () => {
            this.#stdin.off('drain', done);
            this.#stdin.off('close', done);
            resolve();
          };
          this.#stdin.on('drain', done);
          this.#stdin.on('close', done);
        }),
    );
  }

  #fromSession(session, message) {
    this.#onTraffic();
    this.#lastHeard = session;
    if (isRequest(message)) {
      if (this.#ended !== undefined) {
        session.send({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: `the sandbox daemon is gone: ${this.#ended}` } }).catch(() => {});
        return;
      }
      const bridgeId = this.#nextId++;
      this.#pending.set(bridgeId, { session, id: message.id, progressToken: message.params?._meta?.progressToken });
      this.#write({ ...message, id: bridgeId });
      return;
    }
    if (isNotification(message)) {
      if (message.method === 'notifications/cancelled') {
        const bridgeId = this.#bridgeIdOf(session, message.params?.requestId);
        if (bridgeId === undefined) return;
        this.#pending.delete(bridgeId);
        this.#write({ ...message, params: { ...message.params, requestId: bridgeId } });
        return;
      }
      this.#write(message);
      return;
    }
    // An answer to a request the daemon made: its ids are the daemon's own.
    if (this.#asked.get(message.id) === session) {
      this.#asked.delete(message.id);
      this.#write(message);
    }
  }

  #bridgeIdOf(session, id) {
    for (const [bridgeId, entry] of this.#pending) if (entry.session === session && entry.id === id) return bridgeId;
    return undefined;
  }

  /** The most recent request the session has waiting, so related messages ride its stream. */
  #related(session) {
    let latest;
    for (const [, entry] of this.#pending) if (entry.session === session) latest = entry.id;
    return latest;
  }

  #fromDaemon(line) {
    let message;
    try {
      message = JSON.parse(line.toString('utf8'));
    } catch {
      return; // not a JSON-RPC line (a daemon's stray output): nobody can be answered with it
    }
    if (message === null || typeof message !== 'object') return;
    this.#onTraffic();
    if (isRequest(message)) {
      const session = this.#lastHeard ?? [...this.#sessions].at(-1);
      if (session === undefined) {
        this.#write({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: 'no MCP client is connected' } });
        return;
      }
      this.#asked.set(message.id, session);
      session.send(message, { relatedRequestId: this.#related(session) }).catch(() => {});
      return;
    }
    if (isNotification(message)) {
      const token = message.method === 'notifications/progress' ? message.params?.progressToken : undefined;
      if (token !== undefined) {
        for (const [, entry] of this.#pending) {
          if (entry.progressToken === token) {
            entry.session.send(message, { relatedRequestId: entry.id }).catch(() => {});
            return;
          }
        }
        return;
      }
      if (message.method === 'notifications/cancelled') {
        const session = this.#asked.get(message.params?.requestId);
        if (session !== undefined) {
          this.#asked.delete(message.params.requestId);
          session.send(message).catch(() => {});
        }
        return;
      }
      for (const session of this.#sessions) session.send(message, { relatedRequestId: this.#related(session) }).catch(() => {});
      return;
    }
    const entry = this.#pending.get(message.id);
    if (entry === undefined) return; // its session ended, or it was cancelled
    this.#pending.delete(message.id);
    entry.session.send({ ...message, id: entry.id }).catch(() => {});
  }

  /** Requests waiting for the daemon's answer. */
  get inFlight() {
    return this.#pending.size;
  }

  /** Stops listening for sessions (their transports are closed by the endpoint). */
  close() {
    for (const session of [...this.#sessions]) this.#forget(session);
  }
}
