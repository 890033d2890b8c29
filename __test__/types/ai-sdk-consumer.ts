// A typed consumer of native-sandbox/ai-sdk, checked by strict tsc against the AI SDK's own types:
// the session is what `generateText` and `ToolLoopAgent` take as `experimental_sandbox`, and what
// a tool's `execute` receives.
import { generateText, isStepCount, tool, ToolLoopAgent, type Experimental_SandboxSession } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import type { Sandbox } from 'native-sandbox';
import { createAiSdkSandbox, type AiSdkSandboxOptions } from 'native-sandbox/ai-sdk';

declare const sandbox: Sandbox;
declare const model: MockLanguageModelV4;

const options: AiSdkSandboxOptions = { workingDirectory: '/sandbox/workspace', shell: '/bin/sh', env: { CI: '1' }, killGraceMs: 500 };
const session: Experimental_SandboxSession = createAiSdkSandbox(sandbox, options);

// The declarations resolve (the frameworks' own are not checked here, so an unresolved type of
// ours would read as `any`): the adapter returns the SDK's session type exactly.
type IsAny<T> = 0 extends 1 & T ? true : false;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const resolved: [IsAny<ReturnType<typeof createAiSdkSandbox>>, Same<ReturnType<typeof createAiSdkSandbox>, Experimental_SandboxSession>] = [false, true];

const shell = tool({
  description: ({ experimental_sandbox }) => `Run a shell command. ${experimental_sandbox?.description ?? ''}`,
  inputSchema: z.object({ command: z.string() }),
  execute: async ({ command }, { abortSignal, experimental_sandbox }) => {
    const ran = await experimental_sandbox!.run({ command, abortSignal, maxOutputLength: 30_000 });
    const exitCode: number = ran.exitCode;
    return { exitCode, stdout: ran.stdout, stderr: ran.stderr };
  },
});

export async function consume(): Promise<string> {
  const result = await generateText({ model, tools: { shell }, experimental_sandbox: session, stopWhen: isStepCount(3), prompt: 'x' });
  const agent = new ToolLoopAgent({ model, tools: { shell } });
  await agent.generate({ prompt: 'y', experimental_sandbox: createAiSdkSandbox(sandbox) });
  const writable = await session.spawn({ command: 'cat', stdin: true });
  const writer = writable.stdin.getWriter();
  await writer.close();
  const plain = await session.spawn({ command: 'true' });
  // @ts-expect-error a command spawned without stdin has none
  plain.stdin;
  const text: string | null = await session.readTextFile({ path: 'a.txt', startLine: 1, endLine: 2 });
  const bytes: Uint8Array | null = await session.readBinaryFile({ path: 'a.bin' });
  const removed: boolean = await session.deleteFile({ path: 'a.txt' });
  return `${result.text}${text}${bytes?.length}${removed}${(await writable.wait()).exitCode}${resolved}`;
}

// @ts-expect-error the options are the adapter's own: no host mounts
createAiSdkSandbox(sandbox, { mounts: ['/:/host'] });
