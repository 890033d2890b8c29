// A typed consumer of the public API: compiled with tsc --noEmit by the test command, so a
// drift between index.d.ts and how users write code fails the build.
import {
  parseSandboxRequest,
  parseSandboxProcessSpec,
  parseSandboxRelativePath,
  parseTransferOptions,
  parseSandboxRecoveryPolicy,
  SANDBOX_DEFAULT_STREAM_LIMITS,
  SANDBOX_DEFAULT_TRANSFER_BUFFERS,
  SANDBOX_LIMITS,
  SandboxCleanupError,
  SandboxOperationError,
  SandboxValidationError,
  type SandboxRequest,
  type SandboxRequestInput,
  type SandboxRecoveryRecord,
  type SandboxProcessSpec,
  type SandboxRelativePath,
  type SandboxCleanupOwner,
  type ValidationIssue,
  type SandboxBackend,
  type Sandbox,
} from 'native-sandbox';
import { createSandboxBackend, type SandboxBackendDriver, type SandboxDriverReservation } from 'native-sandbox/backend';
import { withSandbox } from 'native-sandbox';
import { createSandboxPool, type SandboxPool } from 'native-sandbox';
import type { DockerEngineTls, DockerSandboxBackendOptions } from 'native-sandbox/docker';

const input: SandboxRequestInput = {
  policy: {
    resources: { cpus: 0.5, memoryBytes: 256 * 1024 * 1024, pids: 64 },
    temporaryStorage: { homeBytes: 64 * 1024 * 1024, tempBytes: 64 * 1024 * 1024 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: { ...SANDBOX_DEFAULT_STREAM_LIMITS, maxOutputBytes: 0 },
    execution: { kind: 'deadline', timeoutMs: 30 * 86_400_000 },
  },
};

const request: SandboxRequest = parseSandboxRequest(input);
const timeout: number | undefined = request.policy.execution.kind === 'deadline' ? request.policy.execution.timeoutMs : undefined;
const spec: SandboxProcessSpec = parseSandboxProcessSpec({ executable: '/bin/sh', args: ['-c', 'true'], env: {}, cwd: '/sandbox/workspace' });
const path: SandboxRelativePath = parseSandboxRelativePath('results/out.txt');
const plain: string = path;
const options = parseTransferOptions({ quotas: { maxTotalBytes: 20n * 1024n ** 3n, maxFiles: 10 } });
const total: bigint | undefined = options.quotas.maxTotalBytes;
const recovery = parseSandboxRecoveryPolicy({ kind: 'persisted', persist: async (_record: SandboxRecoveryRecord) => {} });
const limit: 60000 = SANDBOX_LIMITS.startupMs;

function describeFailure(error: unknown): string {
  if (error instanceof SandboxValidationError) {
    return error.issues.map((issue: ValidationIssue) => `${issue.path.join('.')}: ${issue.code}`).join('\n');
  }
  if (error instanceof SandboxOperationError) return error.code;
  if (error instanceof SandboxCleanupError) {
    const owner: SandboxCleanupOwner = error.owner;
    void owner;
    return error.operation;
  }
  return String(error);
}

async function useSandbox(backend: SandboxBackend): Promise<void> {
  const reservation = backend.reserve(input, { kind: 'in_process' });
  const sandbox: Sandbox = await reservation.start();
  const process = sandbox.reserveProcess({ executable: '/bin/cat', args: [], env: {}, cwd: sandbox.workspace });
  const streams = await process.start();
  streams.stdin.end(Buffer.from('x'));
  const exit = await streams.exit;
  if (exit.kind === 'exited') void exit.code;
  await sandbox.stop();
  await sandbox.destroy();
}

const driver: SandboxBackendDriver = {
  support: { backendId: 'typed', backendRevision: '1', network: ['isolated'], execution: ['until_stopped'], workspaceDiskQuota: false },
  reserve(parsed: SandboxRequest): SandboxDriverReservation {
    const record: SandboxRecoveryRecord = {
      format: 'agenai.sandbox-recovery.v2',
      backendId: 'typed',
      backendRevision: '1',
      namespace: 'ns',
      operationId: 'op',
      sandboxId: 'sbx',
      imageDigest: `sha256:${'a'.repeat(64)}`,
      policyDigest: `sha256:${'b'.repeat(64)}`,
      configurationDigest: `sha256:${'c'.repeat(64)}`,
      phase: 'reserved',
      authority: { kind: 'unverified' },
      resources: [],
    };
    return {
      id: 'sbx',
      recoveryRecord: record,
      async start({ signal, checkpoint }) {
        signal.throwIfAborted();
        await checkpoint({ ...record, phase: 'starting' });
        return {
          effective: {
            resources: parsed.policy.resources,
            temporaryStorage: parsed.policy.temporaryStorage,
            network: { kind: 'isolated' },
            workspaceDiskQuota: { kind: 'not_requested' },
          },
          workspace: '/sandbox/workspace',
        };
      },
      async stop() {},
      async destroy() {},
    };
  },
  async reconcile(found) {
    return { kind: 'absent', record: found };
  },
};
const backend = createSandboxBackend(driver);
const pool: SandboxPool = createSandboxPool(backend, { request: input, size: 4, idleMs: 60_000, signal: new AbortController().signal });
const claimed: Promise<Sandbox> = pool.claim({ signal: AbortSignal.timeout(1000) });
const readyNow: number = pool.ready;
const closing: Promise<void> = pool.close();
// @ts-expect-error the pool's size is required
createSandboxPool(backend, { request: input });
void [claimed, readyNow, closing];
const answer: Promise<number> = withSandbox(backend, input, async (sandbox) => sandbox.workspace.length, { recovery: { kind: 'in_process' } });

void [timeout, spec, plain, total, recovery, limit, describeFailure, useSandbox, answer];

// A remote engine over TLS: the PEM texts, not their paths.
declare const pems: { ca: string; cert: string; key: string };
const engineTls: DockerEngineTls = pems;
const remote: DockerSandboxBackendOptions = {
  image: 'native-sandbox/busybox:1',
  namespace: 'ci',
  spillDirectory: '/var/tmp/spill',
  engine: { url: 'tcp://10.0.0.2:2376', tls: engineTls },
};
void remote;

// The conformance suite and the Docker runtime read-back, as a backend author would use them.
import { runSandboxConformance } from 'native-sandbox/conformance';
import type { SandboxConformanceOptions } from 'native-sandbox/conformance';
import { createDockerSandboxBackend, dockerSandboxEgress, dockerSandboxRuntime, prepareDockerSandboxImage } from 'native-sandbox/docker';
import type { PreparedDockerSandboxImage } from 'native-sandbox/docker';
export const conformance: SandboxConformanceOptions = {
  name: 'typed',
  createBackend: () => createDockerSandboxBackend({ image: 'x', namespace: 'n', spillDirectory: '/tmp' }),
  guest: { shell: '/bin/sh' },
  census: async () => ['a'],
};
export const registerConformance: (options: SandboxConformanceOptions) => void = runSandboxConformance;
export const runtimeOf: (sandbox: Sandbox) => string = dockerSandboxRuntime;
// An allowlist sandbox behind its gateway, and why a request failed.
export const allowlisted = createDockerSandboxBackend({ image: 'x', namespace: 'n', spillDirectory: '/tmp', egress: { network: 'bridge', resolvers: ['10.0.0.2'] } });
export const allowlistInput: SandboxRequestInput['policy']['network'] = { kind: 'allowlist', hosts: ['api.example.com', { host: 'db.internal:5432', allowPrivate: true }, 'cache.internal'], allowPrivate: ['cache.internal'] };
// The parsed and observed allowlist holds strings only, as the contract's `string[]`.
export function allowedHosts(sandbox: Sandbox): { hosts: string[]; allowPrivate: string[] } {
  const network = sandbox.effective.network;
  return network.kind === 'allowlist' ? { hosts: [...network.hosts], allowPrivate: [...(network.allowPrivate ?? [])] } : { hosts: [], allowPrivate: [] };
}
export async function lastRefusal(sandbox: Sandbox): Promise<string | undefined> {
  const report = await dockerSandboxEgress(sandbox);
  const last = report?.recent[report.recent.length - 1];
  return last === undefined ? undefined : `${last.host}:${last.port} ${last.reason} at ${new Date(last.at).toISOString()} (${report?.refused} refused)`;
}
// Any local image made admissible, what it dropped passed back in a process recipe.
export async function preparedRecipe(): Promise<{ image: string; env: Record<string, string> }> {
  const prepared: PreparedDockerSandboxImage = await prepareDockerSandboxImage({ from: 'node:22', tag: 'my-agent:1' });
  const javaHome: string | undefined = prepared.droppedEnv.JAVA_HOME;
  return { image: prepared.id, env: javaHome === undefined ? {} : { JAVA_HOME: javaHome } };
}

// native-sandbox/agentproto: the provider contract as a host writes against it.
import {
  createDockerSandboxProvider,
  resolveLifecyclePolicy,
  SandboxProviderError,
  type BootedSandbox,
  type SandboxLifecyclePolicy,
  type SandboxProvider,
  type SandboxSpec,
} from 'native-sandbox/agentproto';

const agentprotoProvider: SandboxProvider = createDockerSandboxProvider({
  namespace: 'host',
  spillDirectory: '/var/lib/host/spill',
  stateDirectory: '/var/lib/host/sandboxes',
});
const agentprotoSpec: SandboxSpec = {
  provider: 'docker',
  config: { image: 'example/daemon:1', daemon: { executable: '/usr/local/bin/node', args: ['/opt/mcp/server.mjs'] } },
  limits: { memory_mb: 512 },
  network: { egress: [] },
  lifecycle: { pause_after_idle: 'idle-600' },
};
const teardown: SandboxLifecyclePolicy['teardown'] = resolveLifecyclePolicy(agentprotoSpec, false).teardown;
export async function attachExample(): Promise<string | undefined> {
  const booted: BootedSandbox = await agentprotoProvider.boot(agentprotoSpec, { env: {}, expose: 'private', keepAlive: false });
  const headers: Readonly<Record<string, string>> | undefined = booted.authHeaders;
  try {
    await agentprotoProvider.connect(booted.sandboxId, agentprotoSpec, { env: {} });
  } catch (error) {
    if (error instanceof SandboxProviderError && error.code === 'sandbox_daemon_gone') return error.sandboxId;
  }
  await booted.pause();
  await booted.stop();
  return headers?.authorization ?? teardown;
}

// native-sandbox/kubernetes: the options as documented, the backend a SandboxBackend.
import { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from 'native-sandbox/kubernetes';
import type { KubernetesSandboxBackendOptions } from 'native-sandbox/kubernetes';
const kubernetesOptions: KubernetesSandboxBackendOptions = {
  namespace: 'sandboxes',
  scope: 'my-host',
  image: 'registry.example/agent:1',
  kubeconfig: '/etc/kube/config',
  context: 'prod',
  imagePullPolicy: 'IfNotPresent',
  user: '65532:65532',
  runtimeClassName: 'gvisor',
  networkPolicy: 'enforced',
  podPidsLimit: 1024,
  architecture: 'arm64',
};
export const kubernetesBackend: Promise<SandboxBackend> = createKubernetesSandboxBackend(kubernetesOptions);
export const kubernetesWorkspace: string = KUBERNETES_SANDBOX_GUEST.workspace;
// @ts-expect-error: networkPolicy takes only its two words.
export const badKubernetes: KubernetesSandboxBackendOptions = { ...kubernetesOptions, networkPolicy: 'yes' };
