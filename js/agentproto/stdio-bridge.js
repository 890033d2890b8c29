// One MCP stdio daemon shared by any number of MCP sessions. The daemon speaks newline-delimited
// JSON-RPC on its stdin/stdout as if to one client; each session is a transport (the SDK's
// Streamable HTTP server transport) with its own request ids and progress tokens. Both are
// renamed on the way in (to names unique to this bridge, and to this bridge among every bridge
// that ever attached to the daemon) and restored on the way out, so an answer or a progress
// notification reaches exactly the request that asked. A session's cancellation follows its
// renamed request. What the daemon sends on its own: a request goes to a session whose client
// declared the capability it needs, one with a request waiting (else the one heard from last
// with its event stream open), and is answered with an error if no session can take it; any
// other notification goes to every session.
import { randomBytes } from 'node:crypto';

const LINE_BYTES_MAX = 64 * 1024 * 1024;
/** The client capability a request from the server needs, by its method's namespace. */
const CAPABILITY_OF = { sampling: 'sampling', elicitation: 'elicitation', roots: 'roots' };

const isRequest = (message) => typeof message?.method === 'string' && message.id !== undefined && message.id !== null;
const isNotification = (message) => typeof message?.method === 'string' && (message.id === undefined || message.id === null);

export class StdioBridge {
  #stdin;
  #onTraffic;
  /** Names this bridge gives requests and progress tokens: never those of an earlier bridge. */
  #prefix = `nsb-${randomBytes(8).toString('hex')}-`;
  #next = 1;
  /** bridge id → { session, id, progressToken, bridgeToken } */
  #pending = new Map();
  /** bridge progress token → bridge id */
  #tokens = new Map();
  /** daemon request id → session */
  #asked = new Map();
  /** session → () => { gets, posts }: its open responses (what can carry a message now). */
  #sessions = new Map();
  /** session → the capabilities its client declared at initialization. */
  #capabilities = new WeakMap();
  #lastHeard;
  #ended;
  #writing = Promise.resolve();
  /** bridge id → { resolve, reject }: this bridge's own pings (readiness). */
  #pings = new Map();

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
      for (const [bridgeId, entry] of this.#pending) {
        this.#settle(bridgeId);
        entry.session.send({ jsonrpc: '2.0', id: entry.id, error: { code: -32000, message: `the sandbox daemon is gone: ${reason}` } }).catch(() => {});
      }
      for (const ping of [...this.#pings.values()]) ping.reject(reason);
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

  /**
   * Asks the daemon an MCP `ping` (which a server answers at any time, before initialization
   * too) under an id of this bridge's own. Resolves once it answers (a result or an error: it
   * speaks MCP); rejects with the reason when its output ends first or `timeoutMs` passes.
   */
  ping(timeoutMs) {
    if (this.#ended !== undefined) return Promise.reject(new Error(this.#ended));
    const bridgeId = `${this.#prefix}${this.#next++}`;
    return new Promise((resolve, reject) => {
      const done = (settle) => (value) => {
        clearTimeout(timer);
        this.#pings.delete(bridgeId);
        settle(value);
      };
      const timer = setTimeout(done(() => reject(new Error(`it did not answer an MCP ping within ${timeoutMs} ms`))), timeoutMs);
      this.#pings.set(bridgeId, { resolve: done(resolve), reject: done((reason) => reject(new Error(reason))) });
      this.#write({ jsonrpc: '2.0', id: bridgeId, method: 'ping' });
    });
  }

  /**
   * Wires `transport` (a session) to the daemon; its close forgets the session. `openStreams()`
   * says how many of its event streams are open (`gets`: standalone, `posts`: request streams).
   */
  connect(transport, openStreams) {
    this.#sessions.set(transport, openStreams);
    transport.onmessage = (message) => this.#fromSession(transport, message);
    const previous = transport.onclose;
    transport.onclose = () => {
      previous?.();
      this.#forget(transport);
    };
  }

  #settle(bridgeId) {
    const entry = this.#pending.get(bridgeId);
    if (entry === undefined) return undefined;
    this.#pending.delete(bridgeId);
    if (entry.bridgeToken !== undefined) this.#tokens.delete(entry.bridgeToken);
    return entry;
  }

  #forget(session) {
    if (!this.#sessions.delete(session)) return;
    if (this.#lastHeard === session) this.#lastHeard = undefined;
    for (const [bridgeId, entry] of [...this.#pending]) {
      if (entry.session !== session) continue;
      this.#settle(bridgeId);
      this.#write({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: bridgeId, reason: 'the MCP session ended' } });
    }
    for (const [id, asked] of [...this.#asked]) if (asked === session) this.#refuse(id, 'the MCP session it was sent to ended');
  }

  /** Answers the daemon's request `id` with an error: nobody else will. */
  #refuse(id, why) {
    this.#asked.delete(id);
    this.#write({ jsonrpc: '2.0', id, error: { code: -32000, message: `the request could not reach an MCP client: ${why}` } });
  }

  #write(message) {
    // One message after another, each after the stream took the one before (its buffer bounds
    // what may wait: a full buffer is waited out, never overrun). A step that fails ends only
    // itself, never the messages after it.
    this.#writing = this.#writing
      .then(
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
      )
      .catch(() => {});
  }

  #fromSession(session, message) {
    this.#onTraffic();
    this.#lastHeard = session;
    if (isRequest(message) && message.method === 'initialize') {
      this.#capabilities.set(session, message.params?.capabilities ?? {});
    }
    if (isRequest(message)) {
      if (this.#ended !== undefined) {
        session.send({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: `the sandbox daemon is gone: ${this.#ended}` } }).catch(() => {});
        return;
      }
      const bridgeId = `${this.#prefix}${this.#next++}`;
      const progressToken = message.params?._meta?.progressToken;
      let forwarded = { ...message, id: bridgeId };
      let bridgeToken;
      if (progressToken !== undefined) {
        bridgeToken = `${bridgeId}-progress`;
        this.#tokens.set(bridgeToken, bridgeId);
        forwarded = { ...forwarded, params: { ...message.params, _meta: { ...message.params._meta, progressToken: bridgeToken } } };
      }
      this.#pending.set(bridgeId, { session, id: message.id, progressToken, bridgeToken });
      this.#write(forwarded);
      return;
    }
    if (isNotification(message)) {
      if (message.method === 'notifications/cancelled') {
        const bridgeId = this.#bridgeIdOf(session, message.params?.requestId);
        if (bridgeId === undefined) return;
        const entry = this.#settle(bridgeId);
        this.#write({ ...message, params: { ...message.params, requestId: bridgeId } });
        // No answer follows a cancellation: the request's event stream ends here.
        session.closeSSEStream?.(entry.id);
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

  /**
   * Where the daemon's own request can go now: on the stream of a request that waits for the
   * daemon (the request it serves, as the SDK relates it), else on the standalone stream of the
   * session heard from last (or any with one open). `undefined` when no stream could carry it.
   */
  #targetOfRequest(method) {
    const able = (session) => this.#capable(session, method);
    let waiting;
    for (const [, entry] of this.#pending) if (able(entry.session) && this.#open(entry.session).posts > 0) waiting = entry;
    if (waiting !== undefined) return { session: waiting.session, related: waiting.id };
    const listening = [this.#lastHeard, ...[...this.#sessions.keys()].reverse()].find((s) => s !== undefined && able(s) && this.#open(s).gets > 0);
    return listening === undefined ? undefined : { session: listening, related: undefined };
  }

  /** Whether the session's client declared what `method` needs (sampling, elicitation, roots). */
  #capable(session, method) {
    const capability = CAPABILITY_OF[method.split('/')[0]];
    return capability === undefined || this.#capabilities.get(session)?.[capability] !== undefined;
  }

  #open(session) {
    return this.#sessions.get(session)?.() ?? { gets: 0, posts: 0 };
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
      const target = this.#targetOfRequest(message.method);
      if (target === undefined) return this.#refuse(message.id, 'no MCP client has a stream open to receive it');
      const { session, related } = target;
      this.#asked.set(message.id, session);
      session.send(message, { relatedRequestId: related }).catch((error) => {
        if (this.#asked.get(message.id) === session) this.#refuse(message.id, error.message);
      });
      return;
    }
    if (isNotification(message)) {
      if (message.method === 'notifications/progress') {
        const bridgeId = this.#tokens.get(message.params?.progressToken);
        const entry = bridgeId === undefined ? undefined : this.#pending.get(bridgeId);
        if (entry === undefined) return;
        const restored = { ...message, params: { ...message.params, progressToken: entry.progressToken } };
        entry.session.send(restored, { relatedRequestId: entry.id }).catch(() => {});
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
      for (const session of this.#sessions.keys()) session.send(message, { relatedRequestId: this.#related(session) }).catch(() => {});
      return;
    }
    const ping = this.#pings.get(message.id);
    if (ping !== undefined) return ping.resolve();
    const entry = this.#settle(message.id);
    if (entry === undefined) return; // its session ended, it was cancelled, or an earlier bridge's
    entry.session.send({ ...message, id: entry.id }).catch(() => {});
  }

  /** Stops listening for sessions (their transports are closed by the endpoint). */
  close() {
    for (const session of [...this.#sessions.keys()]) this.#forget(session);
  }
}
