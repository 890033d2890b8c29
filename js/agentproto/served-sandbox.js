// One provider-owned sandbox in this process: its daemon's streams and bridge, the endpoint in
// service (at most one: each boot or connect serves a fresh one), the idle gate, and the two ways
// to end: pause (freeze on the engine, keep everything) and stop (destroy, remove the state file).
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
  #paused;
  #stopped;
  #daemonGone;
  #bridge;
  #streams;

  /**
   * `control`: `{ freeze(paused), destroy(), forget() }` (forget removes the state file and the
   * registry entry). `streams`: the daemon's `{ stdin, stdout, stderr }`. `paused`: whether the
   * sandbox is frozen now.
   */
  constructor({ sandboxId, sdk, control, streams, paused }) {
    this.sandboxId = sandboxId;
    this.#sdk = sdk;
    this.#control = control;
    this.#paused = paused;
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

  /** Why the daemon is gone, or `undefined` while it serves. */
  get daemonGone() {
    return this.#daemonGone;
  }

  /**
   * Resumes the sandbox if paused and serves a fresh endpoint (the previous one closes), with
   * `token` gating it when given and an idle pause after `idleMs` when given.
   */
  async serve({ token, idleMs }) {
    if (this.#stopped !== undefined) throw new SandboxProviderError('sandbox_not_found', `sandbox ${this.sandboxId} was stopped`, { sandboxId: this.sandboxId });
    await this.#closeEndpoint();
    // Resuming is also the engine's word that the daemon's process still runs.
    try {
      await this.#control.freeze(false);
    } catch (cause) {
      throw this.#gone(cause.message);
    }
    this.#paused = false;
    if (this.#daemonGone !== undefined) throw this.#gone(this.#daemonGone);
    this.#gate = new IdleGate({
      idleMs,
      freeze: async (paused) => {
        await this.#control.freeze(paused);
        this.#paused = paused;
      },
    });
    const gate = this.#gate;
    this.#endpoint = await serveEndpoint({
      sdk: this.#sdk,
      bridge: this.#bridge,
      gate: token === undefined ? undefined : tokenGate(token),
      admit: (counted) => gate.enter(counted),
    });
    const stop = () => this.stop();
    const pause = () => this.pause();
    return Object.freeze({
      mcpUrl: this.#endpoint.url,
      sandboxId: this.sandboxId,
      ...(token === undefined ? {} : { token, authHeaders: authHeadersFor(token) }),
      stop,
      pause,
    });
  }

  async #closeEndpoint() {
    const endpoint = this.#endpoint;
    const gate = this.#gate;
    this.#endpoint = undefined;
    this.#gate = undefined;
    await gate?.close();
    await endpoint?.close();
  }

  /** Closes the endpoint and freezes the sandbox; `connect` resumes it. */
  async pause() {
    if (this.#stopped !== undefined) throw new SandboxProviderError('sandbox_not_found', `sandbox ${this.sandboxId} was stopped`, { sandboxId: this.sandboxId });
    await this.#closeEndpoint();
    if (!this.#paused) {
      await this.#control.freeze(true);
      this.#paused = true;
    }
  }

  /** Closes the endpoint, destroys the sandbox and removes its state file. Joined; retryable. */
  stop() {
    this.#stopped ??= (async () => {
      await this.#closeEndpoint();
      this.#bridge.close();
      await this.#control.destroy();
      this.#streams.stdin.destroy();
      this.#streams.stdout.destroy();
      this.#streams.stderr.destroy();
      await this.#control.forget();
    })().catch((error) => {
      this.#stopped = undefined;
      throw error;
    });
    return this.#stopped;
  }
}
