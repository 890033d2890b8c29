// native-sandbox/openai-agents: a SandboxClient of OpenAI Agents JS on this package's sandboxes.
import type { SandboxArchiveLimits, SandboxClient, SandboxClientOptions, SandboxSessionState } from '@openai/agents-core/sandbox';
import type { SandboxBackend, SandboxRecoveryPolicy, SandboxRecoveryRecord, SandboxRequestInput } from './index.js';

export interface NativeOpenAiAgentsClientOptions {
  /** Where sandboxes run: `createDockerSandboxBackend(...)`, or any backend with `support.sessions`. */
  readonly backend: SandboxBackend;
  /** Every session's request: its policy is all a session may do, and no option here widens it. */
  readonly request: SandboxRequestInput;
  /**
   * Default `{ kind: 'in_process' }` (the reaper removes a session's sandbox if this process
   * dies). `{ kind: 'persisted', persist }` keeps it for `resume` or `delete` from another process.
   */
  readonly recovery?: SandboxRecoveryPolicy;
  /** What runs a command string, as `shell -c cmd`: absolute, default `/bin/sh`. */
  readonly shell?: string;
  /** Environment every command gets, under the manifest's. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * What bounds a session's `persistWorkspace` and `hydrateWorkspace` (a create's own
   * `archiveLimits`, then a hydrate's, take precedence): unset fields take the SDK's defaults
   * (1 GiB of archive, 4 GiB extracted, 100,000 members), and so does an unset option; `null`
   * sets no limit.
   */
  readonly archiveLimits?: SandboxArchiveLimits | null;
}

/** A session's state: the framework's, with the sandbox it runs in. */
export interface NativeSandboxSessionState extends SandboxSessionState {
  sandboxId: string;
  /** Present once a session was serialized: the record `resume` and `delete` prove the sandbox by. */
  recoveryRecord?: SandboxRecoveryRecord;
}

/**
 * An OpenAI Agents JS `SandboxClient` (pass it as `run(agent, input, { sandbox: { client } })`):
 * each session is a sandbox reserved and started from `backend` and `request`, its manifest's
 * file and dir entries written into the workspace; `exec_command` runs through the sandbox's
 * sessions, `apply_patch` and the file members through its files.
 */
export declare function createOpenAiAgentsSandboxClient(
  options: NativeOpenAiAgentsClientOptions,
): SandboxClient<SandboxClientOptions, NativeSandboxSessionState>;
