// A typed consumer of native-sandbox/openai-agents, checked by strict tsc against OpenAI Agents
// JS's own types: the client is what a sandbox run takes, and its sessions' members are the SDK's.
import { run } from '@openai/agents';
import { Manifest, SandboxAgent, shell, type SandboxClient, type SandboxClientOptions } from '@openai/agents/sandbox';
import type { SandboxBackend } from 'native-sandbox';
import { createOpenAiAgentsSandboxClient, type NativeOpenAiAgentsClientOptions, type NativeSandboxSessionState } from 'native-sandbox/openai-agents';

declare const backend: SandboxBackend;

const options: NativeOpenAiAgentsClientOptions = { backend, request: { policy: {} as never }, shell: '/bin/sh', env: { CI: '1' }, archiveLimits: { maxMembers: 10_000 } };
const client = createOpenAiAgentsSandboxClient(options);
const asClient: SandboxClient<SandboxClientOptions, NativeSandboxSessionState> = client;

type IsAny<T> = 0 extends 1 & T ? true : false;
const resolved: IsAny<ReturnType<typeof createOpenAiAgentsSandboxClient>> = false;

export async function consume(): Promise<string> {
  const agent = new SandboxAgent({ name: 'a', instructions: 'x', capabilities: [shell()] });
  const result = await run(agent, 'go', { sandbox: { client } });
  const session = await client.create?.({ manifest: new Manifest() });
  const text = await session?.execCommand?.({ cmd: 'echo hi' });
  const bytes = await session?.readFile?.({ path: 'a.txt' });
  const archive: Uint8Array | undefined = await session?.persistWorkspace?.();
  if (archive !== undefined) await session?.hydrateWorkspace?.(archive, { archiveLimits: null });
  const state = session === undefined ? undefined : await client.serializeSessionState?.(session.state);
  await session?.close?.();
  return `${result.finalOutput}${text}${bytes?.length}${state === undefined}${resolved}${asClient.backendId}`;
}

createOpenAiAgentsSandboxClient({ backend, request: { policy: {} as never }, archiveLimits: null });
// @ts-expect-error the options are the adapter's own: nothing widens the policy
createOpenAiAgentsSandboxClient({ backend, request: { policy: {} as never }, image: 'python:3' });
