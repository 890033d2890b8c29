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
  #queue = Promise.resolve();

  /**
   * `control`: `{ freeze(paused), destroy(), forget() }`: `freeze` pauses or resumes on the
   * engine (idempotent; a state error means the process has ended), `forget` removes the state
   * file and the registry entry. `streams`: the daemon's `{ stdin, stdout, stderr }`.
   */
  constructor({ sandboxId, sdk, control, streams }) {
    this.sandboxId = sandboxId;
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
   * gating it when given and an idle pause after `idleMs` when given.
   */
  serve({ token, idleMs }) {
    return this.#serialized(async () => {
      if (this.#stopped) throw this.#stoppedError();
      await this.#closeEndpoint();
      // Resuming is also the engine's word that the daemon's process still runs.
      try {
        await this.#control.freeze(false);
      } catch (cause) {
        if (cause instanceof SandboxStateError) throw this.#gone(cause.message);
        throw cause;
      }
      if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
      const gate = new IdleGate({ idleMs, freeze: (paused) => this.#control.freeze(paused) });
      let endpoint;
      try {
        endpoint = await serveEndpoint({
          sdk: this.#sdk,
          bridge: this.#bridge,
          gate: token === undefined ? undefined : tokenGate(token),
          admit: (counted) => gate.enter(counted),
        });
      } catch (error) {
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
