/**
 * native-sandbox/agentproto: the `SandboxProvider` contract of `@agentproto/sandbox` 0.2.1, served
 * by Docker sandboxes of this package. The spec's daemon (a process that speaks MCP over its
 * stdin/stdout) runs as the sandbox's one process; the provider serves it to the host as an MCP
 * Streamable HTTP endpoint on `127.0.0.1`. Needs `@modelcontextprotocol/sdk` 1.x installed beside
 * this package (an optional peer dependency, loaded only when a sandbox is booted or connected).
 */
import type { DockerSandboxBackendOptions } from './docker.js';

export interface DockerSandboxProviderOptions {
  /** As for `createDockerSandboxBackend`: the ownership scope of every sandbox this provider makes. */
  readonly namespace: string;
  /** As for `createDockerSandboxBackend`. */
  readonly spillDirectory: string;
  /** As for `createDockerSandboxBackend`. */
  readonly engine?: DockerSandboxBackendOptions['engine'];
  /** As for `createDockerSandboxBackend`; default `'65532:65532'`. */
  readonly user?: string;
  /** As for `createDockerSandboxBackend` (with `'runsc'` only `network.egress: []` is served). */
  readonly runtime?: string;
  /** As for `createDockerSandboxBackend`. */
  readonly reaper?: DockerSandboxBackendOptions['reaper'];
  /** As for `createDockerSandboxBackend`: the upstream of allowlist sandbox gateways. */
  readonly egress?: DockerSandboxBackendOptions['egress'];
  /**
   * Absolute path of an existing directory this user owns and only it may write: one 0600 file
   * per live sandbox (its recovery record, request, image and private token), so a provider in a
   * new process can `connect` after this one is gone. Checked at the first boot or connect.
   */
  readonly stateDirectory: string;
}

/** The AIP-36 sandbox spec (`agentsandbox/v1`) as this provider reads it; unknown keys are refused. */
export interface SandboxSpec {
  readonly schema?: 'sandbox/v1';
  readonly id?: string;
  readonly version?: string;
  /** Must be `'docker'`. */
  readonly provider: string;
  readonly config: {
    /** The guest image (reference or `sha256:` ID). Required by `boot`; `connect` checks it when given. */
    readonly image?: string;
    /**
     * The MCP stdio daemon, run with exactly `opts.env`. `cwd` defaults to the workspace.
     * Required by `boot`; `connect` checks it when given.
     */
    readonly daemon?: { readonly executable: string; readonly args?: readonly string[]; readonly cwd?: string };
    /** Default 1. */
    readonly cpus?: number;
    /** Default 256. */
    readonly pids?: number;
  };
  /**
   * `memory_mb` is the sandbox's memory (default 512). `timeout_ms` and `cpu_ms` are per-command
   * caps in AIP-36 that one long-lived daemon cannot honour: accepted with a process warning.
   */
  readonly limits?: { readonly timeout_ms?: number; readonly memory_mb?: number; readonly cpu_ms?: number };
  readonly env?: { readonly auth?: unknown; readonly passthrough?: readonly string[] };
  /**
   * Absent or `[]`: no network. `['*']`: outbound. A host list: an allowlist
   * (`{ kind: 'allowlist', hosts }`, enforced by the sandbox's egress gateway); a bad entry is a
   * `SandboxValidationError` naming `spec.network.egress[i]`.
   */
  readonly network?: { readonly egress?: readonly string[] };
  /** Only `[]`: a non-empty list is refused with `SandboxUnsupportedError` (no host mounts). */
  readonly mounts?: readonly unknown[];
  readonly identity?: unknown;
  /**
   * `pause_after_idle: 'idle-<seconds>'`: the sandbox is paused after that long without MCP
   * traffic and resumed by the next request (unless `keepAlive`). `destroy_on` is the host's.
   */
  readonly lifecycle?: { readonly pause_after_idle?: string; readonly destroy_on?: string };
  /** `true` is refused with `SandboxProviderError` code `sandbox_read_only`. */
  readonly read_only?: boolean;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

export interface SandboxBootOpts {
  /** The daemon's whole environment at boot (bounded as any process env). Ignored by `connect`. */
  readonly env: Readonly<Record<string, string>>;
  /** `'private'`: a token-gated endpoint. `'public'` (default): an ungated loopback endpoint. */
  readonly expose?: 'public' | 'private';
  /** No idle pause, whatever `lifecycle.pause_after_idle` says. */
  readonly keepAlive?: boolean;
}

export interface BootedSandbox {
  /** `http://127.0.0.1:<port>/mcp`, served by this process. */
  readonly mcpUrl: string;
  readonly sandboxId: string;
  /** With `expose: 'private'`: 32 random bytes, base64url. The same across connects. */
  readonly token?: string;
  /** With `expose: 'private'`: `{ authorization: 'Bearer <token>' }`; anything else gets 401. */
  readonly authHeaders?: Readonly<Record<string, string>>;
  /** Closes the endpoint, destroys the sandbox and removes its state file. */
  stop(): Promise<void>;
  /** Closes the endpoint and freezes the sandbox on the engine; `connect` resumes it. */
  pause(): Promise<void>;
  /**
   * The daemon's last stderr output (at most 8 KiB, as text) since this controller attached to
   * it: its diagnostics, never mixed into MCP traffic.
   */
  daemonStderr(): string;
}

export interface SandboxProvider {
  /**
   * Checks `spec` and `opts` (before any engine call), starts a sandbox, runs the daemon and
   * serves it once the daemon answered an MCP `ping` through the bridge (within the startup
   * deadline): a daemon that exits or stays silent fails the boot with `sandbox_daemon_gone`,
   * its last stderr in the message. A failure after the sandbox exists destroys it and removes
   * its state file first.
   */
  boot(spec: SandboxSpec, opts: SandboxBootOpts): Promise<BootedSandbox>;
  /**
   * A live sandbox of this namespace, from this process or (through `stateDirectory`) a new one:
   * ownership proven by reconciliation, a paused sandbox resumed, the daemon's stdio attached
   * again, a fresh endpoint served (a private one with the stored token) once the daemon
   * answered an MCP `ping`. An unknown id is
   * `sandbox_not_found`, another namespace's `sandbox_foreign`, a sandbox whose daemon is gone
   * `sandbox_daemon_gone` (the sandbox stays owned and its state file kept).
   */
  connect(sandboxId: string, spec: SandboxSpec, opts: SandboxBootOpts): Promise<BootedSandbox>;
}

export declare function createDockerSandboxProvider(options: DockerSandboxProviderOptions): SandboxProvider;

export interface SandboxLifecyclePolicy {
  readonly teardown: 'kill' | 'pause';
  readonly pauseAfterIdleMs?: number;
}

/**
 * The 0.2.1 rule: `destroy_on` set → `{ teardown: 'kill' }`; otherwise `pauseAfterIdleMs` from
 * `pause_after_idle` matching `idle-<seconds>`, and `teardown` `'pause'` when `reuse` or an idle
 * window is set, else `'kill'`.
 */
export declare function resolveLifecyclePolicy(
  spec: { readonly lifecycle?: { readonly pause_after_idle?: string; readonly destroy_on?: string } },
  reuse: boolean,
): SandboxLifecyclePolicy;

export type SandboxProviderErrorCode =
  | 'sandbox_read_only'
  | 'sandbox_not_found'
  | 'sandbox_foreign'
  | 'sandbox_daemon_gone'
  | 'sandbox_state_invalid'
  | 'sandbox_sdk_missing'
  | 'sandbox_port_taken';

/** The provider's refusals and lost sandboxes; `sandboxId` when one is concerned. */
export declare class SandboxProviderError extends Error {
  constructor(code: SandboxProviderErrorCode, message: string, options?: { cause?: unknown; sandboxId?: string });
  readonly name: 'SandboxProviderError';
  readonly code: SandboxProviderErrorCode;
  readonly sandboxId?: string;
}
