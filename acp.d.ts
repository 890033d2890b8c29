/**
 * native-sandbox/acp: compose an explicitly started sandbox with a host's ACP provider driver
 * (for example `createNodeAcpProviderDriver` of `@agen-ai/provider-acp/node`). This entry point
 * imports no ACP package.
 */
import type { Readable, Writable } from 'node:stream';
import type { Sandbox } from './index.js';

/** The launch recipe of the one native agent process: literal, explicit, no shell. */
export interface SandboxAcpLaunch {
  readonly executable: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Use the exact `sandbox.workspace`. */
  readonly cwd: string;
}

export interface SandboxAcpConnection {
  /** Starts the agent process; the signal cancels startup. */
  start(context?: { readonly signal?: AbortSignal }): Promise<Readonly<{ stdin: Writable; stdout: Readable; stderr: Readable }>>;
  /** Awaits `sandbox.stop()`: the whole workload stops, the workspace stays for export. */
  release(): Promise<void>;
}

export interface SandboxAcpExecutionBoundary {
  /** Admits exactly one native connection; a second throws `SandboxStateError` before any process is acquired. */
  reserve(launch: SandboxAcpLaunch): SandboxAcpConnection;
}

/** One native connection, with host facilities disabled (`host` is a frozen empty object). */
export declare function createSandboxAcpIntegration(sandbox: Sandbox): Readonly<{
  executionBoundary: SandboxAcpExecutionBoundary;
  host: Readonly<Record<string, never>>;
}>;
