// One provider-owned sandbox in this process: its daemon's streams and bridge, the endpoint in
// service (at most one: each boot or connect serves a fresh one), the idle gate, and the two ways
// to end: pause (freeze on the engine, keep everything) and stop (destroy, remove the state
// file). Serve, pause and stop of one sandbox run one after another, never interleaved.
import { SandboxStateError } from '../errors.js';
import { authHeadersFor, tokenGate } from './token.js';
import { IdleGate } from './idle-gate.js';
import { serveEndpoint } from './endpoint.js';
import { StdioBridge } from './stdio-bridge.js';
import { SandboxProviderError } from './errors.js';

export class ServedSandbox {
  #sdk;
  #control;
  #endpoint;
  #gate;
  #stopped = false;
  #daemonGone;
  #bridge;
  #streams;
  #port;
  #queue = Promise.resolve();

  /**
   * `control`: `{ freeze(paused), destroy(), forget(), storePort(port) }`: `freeze` pauses or
   * resumes on the engine (idempotent; a state error means the process has ended), `forget`
   * removes the state file and the registry entry, `storePort` records the endpoint's port in the
   * state file. `streams`: the daemon's `{ stdin, stdout, stderr }`. `port`: the port recorded
   * for this sandbox, if any.
   */
  constructor({ sandboxId, sdk, control, streams, port }) {
    this.sandboxId = sandboxId;
    this.#port = port;
    this.#sdk = sdk;
    this.#control = control;
    this.#streams = streams;
    // The daemon's diagnostics are its own: read (so they never hold its stdout back) and dropped.
    streams.stderr.on('data', () => {});
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

  #gone(reason) {
    return new SandboxProviderError(
      'sandbox_daemon_gone',
      `the daemon of sandbox ${this.sandboxId} cannot be served: ${reason}; the sandbox stays owned (stop() of its booted sandbox, or a reconcile of the record in its state file, removes it)`,
      { sandboxId: this.sandboxId },
    );
  }

  #portTaken(port, cause) {
    return new SandboxProviderError(
      'sandbox_port_taken',
      `the endpoint of sandbox ${this.sandboxId} cannot listen on 127.0.0.1:${port}, the port its URL was given with: another listener holds it; the sandbox stays owned and as it was (paused or not), with no endpoint (connect again once the port is free, or stop it)`,
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
   * handed out, and every later endpoint of this sandbox (after a pause, a connect, a connect
   * from a new process) listens on it again; a port someone else took meanwhile is
   * `sandbox_port_taken`. Public endpoints of a sandbox never served privately take any port.
   */
  serve({ token, idleMs }) {
    return this.#serialized(async () => {
      if (this.#stopped) throw this.#stoppedError();
      await this.#closeEndpoint();
      if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
      // The endpoint listens first: a port it cannot have leaves a paused sandbox paused. Then
      // the sandbox is resumed, which is also the engine's word that the daemon still runs.
      const gate = new IdleGate({ idleMs, freeze: (paused) => this.#control.freeze(paused) });
      let endpoint;
      try {
        endpoint = await serveEndpoint({
          sdk: this.#sdk,
          bridge: this.#bridge,
          gate: token === undefined ? undefined : tokenGate(token),
          admit: (counted) => gate.enter(counted),
          port: this.#port,
          portTaken: (port, cause) => this.#portTaken(port, cause),
        });
        if (token !== undefined && endpoint.port !== this.#port) {
          // Recorded before anyone is handed the URL: a controller that dies now leaves it known.
          await this.#control.storePort(endpoint.port);
          this.#port = endpoint.port;
        }
        try {
          await this.#control.freeze(false);
        } catch (cause) {
          throw cause instanceof SandboxStateError ? this.#gone(cause.message) : cause;
        }
        if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
      } catch (error) {
        await endpoint?.close();
        await gate.close();
        throw error;
      }
      this.#gate = gate;
      this.#endpoint = endpoint;
      return Object.freeze({
        mcpUrl: endpoint.url,
        sandboxId: this.sandboxId,
        ...(token === undefined ? {} : { token, authHeaders: authHeadersFor(token) }),
        stop: () => this.stop(),
        pause: () => this.pause(),
      });
    });
  }

  async #closeEndpoint() {
    const endpoint = this.#endpoint;
    const gate = this.#gate;
    this.#endpoint = undefined;
    this.#gate = undefined;
    // The endpoint first (no new request gets in), then the gate (a pause or resume under way
    // settles).
    await endpoint?.close();
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
