// native-sandbox/mastra: a Mastra WorkspaceSandbox on this package's sandboxes.
import type { MastraSandbox, SandboxLifecycleHook, SandboxStartHook } from '@mastra/core/workspace';
import type { SandboxBackend, SandboxRecoveryPolicy, SandboxRequestInput } from './index.js';

export interface NativeMastraSandboxOptions {
  /** Where the sandbox runs: `createDockerSandboxBackend(...)`, or any backend with `support.sessions`. */
  readonly backend: SandboxBackend;
  /** The sandbox's request: its policy is all it may do, and no option here widens it. */
  readonly request: SandboxRequestInput;
  /** Default `{ kind: 'in_process' }` (the reaper removes it if this process dies). */
  readonly recovery?: SandboxRecoveryPolicy;
  readonly id?: string;
  readonly name?: string;
  /** Where commands start: absolute, default the sandbox's workspace. */
  readonly workingDirectory?: string;
  /** What runs a command string, as `shell -c command`: absolute, default `/bin/sh`. */
  readonly shell?: string;
  /** Environment every command gets, under each call's own. */
  readonly env?: Readonly<Record<string, string>>;
  /** A command's default timeout in milliseconds (300,000): past it, SIGTERM then SIGKILL, exit code 124. */
  readonly timeout?: number;
  /** The text `getInstructions()` returns; by default one said from the sandbox. */
  readonly instructions?: string;
  readonly onStart?: SandboxStartHook;
  readonly onStop?: SandboxLifecycleHook;
  readonly onDestroy?: SandboxLifecycleHook;
}

/**
 * A Mastra `WorkspaceSandbox` (pass it as `new Workspace({ sandbox })`): Mastra's start reserves
 * and starts a sandbox from `backend` and `request`, its commands and process manager run through
 * the sandbox's sessions, and its stop or destroy stops and destroys the sandbox.
 */
export declare function createMastraSandbox(options: NativeMastraSandboxOptions): MastraSandbox;
