// One provider-owned sandbox in this process: its daemon's streams and bridge, the endpoint in
// service (each boot or connect serves a fresh one; beside a public one, a private URL's port
// stays held, gated), the idle gate, and the two ways
// to end: pause (freeze on the engine, keep everything) and stop (destroy, remove the state
// file). Serve, pause and stop of one sandbox run one after another, never interleaved.
import { SandboxStateError } from '../errors.js';
import { authHeadersFor, tokenGate } from './token.js';
import { IdleGate } from './idle-gate.js';
import { serveEndpoint } from './endpoint.js';
import { StdioBridge } from './stdio-bridge.js';
import { SandboxProviderError } from './errors.js';

/** The daemon's stderr kept, at most. */
const STDERR_BYTES = 8 * 1024;
/** How long a failed readiness waits for the daemon's last stderr to arrive. */
const STDERR_SETTLE_MS = 200;

export class ServedSandbox {
  #sdk;
  #control;
  /** The endpoints in service: the one handed out, and the private port held beside a public one. */
  #endpoints = [];
  #gate;
  #stopped = false;
  #daemonGone;
  #bridge;
  #streams;
  #port;
  /** The token of the private URL (`#port`), once one was served or recorded. */
  #token;
  #readyMs;
  /** The daemon's last stderr bytes (a bounded ring: its diagnostics, never MCP traffic). */
  #stderr = [];
  #stderrBytes = 0;
  #queue = Promise.resolve();

  /**
   * `control`: `{ freeze(paused), destroy(), forget(), storePort(port) }`: `freeze` pauses or
   * resumes on the engine (idempotent; a state error means the process has ended), `forget`
   * removes the state file and the registry entry, `storePort` records the endpoint's port in the
   * state file. `streams`: the daemon's `{ stdin, stdout, stderr }`. `port` and `token`: the
   * private URL's port and token recorded for this sandbox, if any.
   */
  constructor({ sandboxId, sdk, control, streams, port, token, readyMs }) {
    this.sandboxId = sandboxId;
    this.#port = port;
    this.#token = token;
    this.#readyMs = readyMs;
    this.#sdk = sdk;
    this.#control = control;
    this.#streams = streams;
    // The daemon's diagnostics: read (so they never hold its stdout back), the last
    // `STDERR_BYTES` kept for the host (`daemonStderr()`) and for a failure's message.
    streams.stderr.on('data', (chunk) => this.#keepStderr(chunk));
    streams.stderr.on('error', () => {});
    this.#bridge = new StdioBridge({
      stdin: streams.stdin,
      stdout: streams.stdout,
      onTraffic: () => this.#gate?.touch(),
      onEnd: (reason) => {
        this.#daemonGone = reason;
      },
    });
  }

  #keepStderr(chunk) {
    const bytes = Buffer.from(chunk);
    this.#stderr.push(bytes);
    this.#stderrBytes += bytes.length;
    // The oldest bytes go first, a chunk cut where the excess ends: exactly the last bytes stay.
    while (this.#stderrBytes > STDERR_BYTES) {
      const excess = this.#stderrBytes - STDERR_BYTES;
      if (this.#stderr[0].length <= excess) {
        this.#stderrBytes -= this.#stderr.shift().length;
      } else {
        this.#stderr[0] = this.#stderr[0].subarray(excess);
        this.#stderrBytes -= excess;
      }
    }
  }

  /** The daemon's last stderr output (at most `STDERR_BYTES`), as text. */
  daemonStderr() {
    return Buffer.concat(this.#stderr).toString('utf8');
  }

  #gone(reason, booting = false) {
    const stderr = this.daemonStderr().trim();
    const fate = booting
      ? 'the boot destroys the sandbox'
      : 'the sandbox stays owned (stop() of its booted sandbox, or a reconcile of the record in its state file, removes it)';
    return new SandboxProviderError(
      'sandbox_daemon_gone',
      `the daemon of sandbox ${this.sandboxId} ${booting ? 'did not become ready' : 'cannot be served'}: ${reason}; ${fate}${stderr === '' ? '' : `; its last stderr: ${stderr}`}`,
      { sandboxId: this.sandboxId },
    );
  }

  #portTaken(port, cause) {
    return new SandboxProviderError(
      'sandbox_port_taken',
      `the endpoint of sandbox ${this.sandboxId} cannot listen on 127.0.0.1:${port}, the port its URL was given with: another listener holds it; the sandbox stays owned, with no endpoint (connect again once the port is free, or stop it)`,
      { sandboxId: this.sandboxId, cause },
    );
  }

  #stoppedError() {
    return new SandboxProviderError('sandbox_not_found', `sandbox ${this.sandboxId} was stopped`, { sandboxId: this.sandboxId });
  }

  /** Runs `step` after every serve, pause and stop before it. */
  #serialized(step) {
    const next = this.#queue.then(step);
    this.#queue = next.catch(() => {});
    return next;
  }

  /**
   * Resumes the sandbox and serves a fresh endpoint (the previous one closes), with `token`
   * gating it when given and an idle pause after `idleMs` when given. The URL is durable once
   * a private endpoint was served: its port is recorded in the state file before the URL is
   * handed out, and every later private endpoint of this sandbox (after a pause, a connect, a
   * connect from a new process) listens on it again; a port someone else took meanwhile is
   * `sandbox_port_taken`. A public endpoint takes a free port of its own: the private port is
   * never served ungated. While this process serves a sandbox publicly after it had a private
   * URL, the private port stays held beside it, gated by the same token (its clients go on, and
   * nobody else can listen there meanwhile); a port held elsewhere by then is left alone.
   */
  serve({ token, idleMs, booting = false }) {
    return this.#serialized(async () => {
      if (this.#stopped) throw this.#stoppedError();
      await this.#closeEndpoint();
      if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
      // The endpoint listens first: a port it cannot have leaves a paused sandbox paused. Then
      // the sandbox is resumed, which is also the engine's word that the daemon still runs.
      const gate = new IdleGate({ idleMs, freeze: (paused) => this.#control.freeze(paused) });
      const endpoints = [];
      const listen = (gated, port) =>
        serveEndpoint({
          sdk: this.#sdk,
          bridge: this.#bridge,
          gate: gated === undefined ? undefined : tokenGate(gated),
          admit: (counted) => gate.enter(counted),
          port,
          portTaken: (taken, cause) => this.#portTaken(taken, cause),
        });
      let endpoint;
      try {
        // A public endpoint of a sandbox with a private URL: the private port is taken, gated,
        // before the public endpoint asks for a free port, so the system can never hand that
        // one out (it was free a moment ago). Held by someone else: the public one alone.
        if (token === undefined && this.#port !== undefined && this.#token !== undefined) {
          const held = await listen(this.#token, this.#port).catch((error) => {
            if (error instanceof SandboxProviderError && error.code === 'sandbox_port_taken') return undefined;
            throw error;
          });
          if (held !== undefined) endpoints.push(held);
        }
        endpoint = await listen(token, token === undefined ? undefined : this.#port);
        endpoints.push(endpoint);
        if (token === undefined && endpoint.port === this.#port) {
          throw new SandboxProviderError('sandbox_port_taken', `a public endpoint of sandbox ${this.sandboxId} was given its private URL's port ${this.#port}; it is never served ungated (connect again)`, { sandboxId: this.sandboxId });
        }
        if (token !== undefined && endpoint.port !== this.#port) {
          // Recorded before anyone is handed the URL: a controller that dies now leaves it known.
          await this.#control.storePort(endpoint.port);
          this.#port = endpoint.port;
        }
        if (token !== undefined) this.#token = token;
        try {
          await this.#control.freeze(false);
        } catch (cause) {
          throw cause instanceof SandboxStateError ? this.#gone(cause.message) : cause;
        }
        if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
        // Ready only once the daemon answered an MCP ping through the bridge; the ping holds
        // the idle clock as a request does (a slow daemon is never paused mid-answer).
        const release = await gate.enter(true);
        try {
          await this.#bridge.ping(this.#readyMs);
        } catch (cause) {
          // Its stderr may still be on its way when its output ended: a moment for it.
          await new Promise((resolve) => setTimeout(resolve, STDERR_SETTLE_MS));
          throw this.#gone(cause.message, booting);
        } finally {
          release();
        }
      } catch (error) {
        await Promise.all(endpoints.map((served) => served.close()));
        await gate.close();
        throw error;
      }
      this.#gate = gate;
      this.#endpoints = endpoints;
      return Object.freeze({
        mcpUrl: endpoint.url,
        sandboxId: this.sandboxId,
        ...(token === undefined ? {} : { token, authHeaders: authHeadersFor(token) }),
        stop: () => this.stop(),
        pause: () => this.pause(),
        daemonStderr: () => this.daemonStderr(),
      });
    });
  }

  async #closeEndpoint() {
    const endpoints = this.#endpoints;
    const gate = this.#gate;
    this.#endpoints = [];
    this.#gate = undefined;
    // The endpoints first (no new request gets in), then the gate (a pause or resume under way
    // settles).
    await Promise.all(endpoints.map((endpoint) => endpoint.close()));
    await gate?.close();
  }

  /** Closes the endpoint and freezes the sandbox; `connect` resumes it. */
  pause() {
    return this.#serialized(async () => {
      if (this.#stopped) throw this.#stoppedError();
      await this.#closeEndpoint();
      await this.#control.freeze(true);
    });
  }

  /** Closes the endpoint, destroys the sandbox and removes its state file. Retryable. */
  stop() {
    return this.#serialized(async () => {
      if (this.#stopped) return;
      await this.#closeEndpoint();
      this.#bridge.close();
      await this.#control.destroy();
      this.#streams.stdin.destroy();
      this.#streams.stdout.destroy();
      this.#streams.stderr.destroy();
      await this.#control.forget();
      this.#stopped = true;
    });
  }
}
