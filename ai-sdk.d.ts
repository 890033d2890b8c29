// native-sandbox/ai-sdk: a started sandbox as the `experimental_sandbox` session of the AI SDK 7.
import type { Experimental_SandboxSession } from 'ai';
import type { Sandbox } from './index.js';

export interface AiSdkSandboxOptions {
  /** The session's `description`; by default one said from the sandbox (its base directory, roots, network). */
  readonly description?: string;
  /** The fixed base directory relative paths and commands start from: absolute, default `/sandbox/workspace`. */
  readonly workingDirectory?: string;
  /** What runs a command string, as `shell -c command`: absolute, default `/bin/sh`. */
  readonly shell?: string;
  /** Environment every command gets, under each call's own `env`. */
  readonly env?: Readonly<Record<string, string>>;
  /** Per stream, as `sandbox.run` takes it (default 16 MiB): past it `run` rejects with `output_limit`. */
  readonly maxOutputBytes?: number;
  /** Between an abort's SIGTERM and its SIGKILL (default 2,000). */
  readonly killGraceMs?: number;
}

/**
 * The AI SDK session over a started sandbox with `support.sessions` (pass it as
 * `experimental_sandbox` to `generateText`, `streamText` or a `ToolLoopAgent` call). The sandbox
 * stays yours to stop and destroy; the session never widens its policy. `readFile`,
 * `readBinaryFile`, `writeFile` and the rest reach the workspace, HOME and TMPDIR only.
 */
export declare function createAiSdkSandbox(sandbox: Sandbox, options?: AiSdkSandboxOptions): Experimental_SandboxSession;
