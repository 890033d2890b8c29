// A typed consumer of native-sandbox/mastra, checked by strict tsc against Mastra's own types: the
// sandbox is what a Workspace takes, and its members are Mastra's.
import { Workspace, type MastraSandbox, type WorkspaceSandbox } from '@mastra/core/workspace';
import type { SandboxBackend } from 'native-sandbox';
import { createMastraSandbox, type NativeMastraSandboxOptions } from 'native-sandbox/mastra';

declare const backend: SandboxBackend;

const options: NativeMastraSandboxOptions = { backend, request: { policy: {} as never }, timeout: 60_000, env: { CI: '1' } };
const sandbox = createMastraSandbox(options);
const asWorkspaceSandbox: WorkspaceSandbox = sandbox;
const workspace = new Workspace({ sandbox });

type IsAny<T> = 0 extends 1 & T ? true : false;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const resolved: [IsAny<ReturnType<typeof createMastraSandbox>>, Same<ReturnType<typeof createMastraSandbox>, MastraSandbox>] = [false, true];

export async function consume(): Promise<string> {
  const result = await sandbox.executeCommand?.('echo', ['hi'], { timeout: 1_000 });
  const handle = await sandbox.processes?.spawn('cat', { stdinMode: 'pipe' });
  await handle?.sendStdin('x');
  await sandbox.writeFiles?.([{ path: 'a.sh', content: 'echo', mode: 0o755 }]);
  await workspace.destroy();
  return `${result?.exitCode}${handle?.pid}${resolved}${asWorkspaceSandbox.id}`;
}

// @ts-expect-error the options are the adapter's own: nothing widens the policy
createMastraSandbox({ backend, request: { policy: {} as never }, privileged: true });
