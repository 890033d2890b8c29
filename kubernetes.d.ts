/**
 * native-sandbox/kubernetes: one hardened pod per sandbox on a Kubernetes cluster, driven by the
 * shared Rust owner (kube-rs). The pod's entry is the guest supervisor, spoken to over one attach
 * stream, so processes, commands and file calls behave as on Docker. See docs/kubernetes.md.
 */
import type { SandboxBackend } from './index.js';

export interface KubernetesSandboxBackendOptions {
  /** The Kubernetes namespace the pods live in (a DNS label). It must exist. */
  readonly namespace: string;
  /**
   * The ownership scope (a DNS label of at most 37 characters): every object carries it as the
   * label `native-sandbox.dev/scope` and in its name `nsbx-<scope>-<sandbox id>`; cleanup never
   * touches another scope's objects.
   */
  readonly scope: string;
  /** The guest image, as the nodes' runtime names it; it must hold `/bin/sh`, `cat`, `chmod` and `mv` (its init container writes the helper with them). */
  readonly image: string;
  /** A kubeconfig file. Default: the in-cluster service account (in a pod, with no `context`), else `KUBECONFIG`, else `~/.kube/config`. */
  readonly kubeconfig?: string;
  /** A context of the kubeconfig; default its current context. */
  readonly context?: string;
  /** Default `'IfNotPresent'`. */
  readonly imagePullPolicy?: 'IfNotPresent' | 'Never' | 'Always';
  /** Numeric `uid:gid` (not root) every command runs as; default `'65532:65532'`. */
  readonly user?: string;
  /** The pods' RuntimeClass (gVisor, Kata); default the cluster's. */
  readonly runtimeClassName?: string;
  /**
   * Whether the cluster enforces NetworkPolicy (its network plugin does). Only `'enforced'` offers
   * `network: { kind: 'isolated' }` (a deny-all NetworkPolicy per pod); default `'not_enforced'`,
   * where an isolated request is refused at `reserve` rather than silently open.
   */
  readonly networkPolicy?: 'enforced' | 'not_enforced';
  /**
   * The cluster's per-pod PID limit (the kubelet's `podPidsLimit`), which a pod cannot set for
   * itself: every sandbox's effective `resources.pids`, so a request must ask at least this many.
   * Without it, starts fail with a `SandboxUnsupportedError` (nothing would bound processes).
   */
  readonly podPidsLimit?: number;
  /** The nodes' architecture the pods are placed on (`kubernetes.io/arch`); default `'amd64'`. */
  readonly architecture?: 'amd64' | 'arm64';
}

/**
 * Linux hosts only in this version (elsewhere it rejects with `SandboxUnsupportedError`).
 * Connects (the configuration loaded and the API server's first answer within 10 s in all; a
 * failure is a `SandboxOperationError` naming the kubeconfig and context) and resolves the backend. Sessions are offered; recovery is `in_process` only in this version.
 */
export declare function createKubernetesSandboxBackend(options: KubernetesSandboxBackendOptions): Promise<SandboxBackend>;

/** The fixed guest layout: the same as `DOCKER_SANDBOX_GUEST`. */
export declare const KUBERNETES_SANDBOX_GUEST: {
  readonly workspace: string;
  readonly home: string;
  readonly tmpdir: string;
  readonly HOME: string;
  readonly TMPDIR: string;
  readonly PATH: string;
  readonly env: { readonly HOME: string; readonly TMPDIR: string; readonly PATH: string };
};
