/**
 * native-sandbox/docker: one hardened container per sandbox process on a local Docker engine,
 * driven by the shared Rust owner. Talks to the engine with bollard (unix socket by default).
 */
import type { SandboxBackend } from './index.js';

export interface DockerSandboxBackendOptions {
  /** Image reference or ID; resolved once, when the backend is created, to its immutable ID (the records' `imageDigest`). */
  readonly image: string;
  /** Ownership scope: labels and names carry it; reconcile and cleanup never touch another namespace. */
  readonly namespace: string;
  /** Absolute, existing, caller-owned directory for transfer metadata spill files; no implicit temp directory. */
  readonly spillDirectory: string;
  /** Default: `DOCKER_HOST`, else the local default socket, as the docker CLI does. TLS is not supported by this build. */
  readonly engine?: { readonly socketPath: string } | { readonly url: string; readonly tls?: { readonly ca: string; readonly cert: string; readonly key: string } };
  /** Numeric `uid:gid` of the guest process; default `'65532:65532'`. Root only when asked for explicitly. */
  readonly user?: string;
  /** OCI runtime name, e.g. `'runsc'`; default the engine's. */
  readonly runtime?: string;
}

/** The fixed guest layout of every Docker sandbox. */
export declare const DOCKER_SANDBOX_GUEST: Readonly<{
  /** A named volume: kept by `stop()`, removed by `destroy()`. */
  workspace: '/sandbox/workspace';
  /** tmpfs of `temporaryStorage.homeBytes`. */
  home: '/sandbox/home';
  /** tmpfs of `temporaryStorage.tempBytes`. */
  tmpdir: '/sandbox/tmp';
  /** The environment every process gets before its explicit `env`; an image may carry exactly these and nothing else. */
  env: Readonly<{ HOME: '/sandbox/home'; TMPDIR: '/sandbox/tmp'; PATH: '/usr/local/bin:/usr/bin:/bin' }>;
}>;

/**
 * Creates the backend: validates `options` (`SandboxValidationError`), then connects and pins the
 * image (`SandboxOperationError` with code `driver_failure` when the engine or image is missing).
 * `support.workspaceDiskQuota` is `false`: a `required` quota throws `SandboxUnsupportedError`
 * from `reserve`, before any engine call.
 */
export declare function createDockerSandboxBackend(options: DockerSandboxBackendOptions): SandboxBackend;
