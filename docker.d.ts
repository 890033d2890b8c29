/**
 * native-sandbox/docker: one hardened container per sandbox process on a local Docker engine,
 * driven by the shared Rust owner. Talks to the engine with bollard (unix socket by default).
 */
import type { Sandbox, SandboxBackend } from './index.js';

export interface DockerSandboxBackendOptions {
  /**
   * Image reference or ID, pinned to its immutable ID (the records' `imageDigest`). Creation never
   * waits on the engine: a reference starts resolving in the background (at most 30 s) and a
   * sandbox's start waits for it (cancellably); until then a reservation's record carries
   * `sha256:` and 64 zeros, never persisted. An ID (`sha256:<64 hex>`) needs no resolution. A
   * missing image fails startup before any container exists.
   */
  readonly image: string;
  /** Ownership scope: labels and names carry it; reconcile and cleanup never touch another namespace. */
  readonly namespace: string;
  /** Absolute, existing, caller-owned directory for transfer metadata spill files; no implicit temp directory. */
  readonly spillDirectory: string;
  /**
   * Default, as the docker CLI chooses: `DOCKER_HOST` (with `DOCKER_TLS_VERIFY` set, TLS with
   * `ca.pem`, `cert.pem`, `key.pem` from `DOCKER_CERT_PATH`, else `~/.docker`); else the context
   * `DOCKER_CONTEXT` names, else `currentContext` of `$DOCKER_CONFIG/config.json` (`~/.docker`),
   * read from the context store with its TLS material; else `/var/run/docker.sock`. A context that
   * cannot be used fails naming it (no fall back to another engine). `url` is `unix://`, `tcp://` or `http://`; with `tls` it is `tcp://` or `https://`.
   * A `tcp://` URL without a port means 2375, or 2376 with `tls`, as with the docker CLI.
   */
  readonly engine?: { readonly socketPath: string } | { readonly url: string; readonly tls?: DockerEngineTls };
  /** Numeric `uid:gid` of the guest process; default `'65532:65532'`. Root only when asked for explicitly. */
  readonly user?: string;
  /**
   * OCI runtime name, e.g. `'runsc'`; default the engine's. The engine must have it: startup
   * checks before any object exists. With `'runsc'` (gVisor, registered with `--network=none`)
   * `support.network` is `['isolated']`, so an `outbound` request is refused at `reserve`.
   */
  readonly runtime?: string;
  /**
   * Default `true`: a reaper (a host process of this package, one per controller process, in a
   * process group of its own) removes this backend's `in_process` sandboxes when the controller
   * dies without destroying them (SIGKILL, a Ctrl-C it had no handler for, an exit that skipped
   * `destroy`), by ID and proof: within seconds on a healthy engine, for as long as the engine
   * answers one of its calls at least every 30 s, and at most 120 s; what it left is written to
   * the controller's stderr. It starts with the first such sandbox. Persisted sandboxes are never
   * reaped. `false` runs none; so does the environment variable `NATIVE_SANDBOX_REAPER=0` (or
   * `false`, `off`) for a backend that does not set this option. Where `process.execPath` cannot
   * run the reaper (a single-executable application, a bundle), `in_process` starts fail with a
   * `SandboxStartError` caused by a `SandboxUnsupportedError`: use a `persisted` recovery policy
   * or `false`.
   */
  readonly reaper?: boolean;
  /**
   * Where the egress gateway of an allowlist sandbox (`network: { kind: 'allowlist', hosts }`)
   * reaches upstream: `network`, an existing engine network it joins (default the engine's
   * `'bridge'`), and `resolvers`, at most 3 IPv4 addresses it asks for the allowed names (default
   * the resolvers the engine gives it). Neither widens what the guest may reach.
   */
  readonly egress?: { readonly network?: string; readonly resolvers?: readonly string[] };
}

/**
 * TLS to a remote engine, as `docker --tlsverify`: `ca` is the only trust root and the engine's
 * certificate must name the URL's host; the client authenticates with `cert` and `key`. Each is
 * the PEM text itself (read the file first), at most 64 KiB; a path, broken PEM or a key that does
 * not match `cert` is a `SandboxValidationError` naming the field. Key material stays in memory.
 */
export interface DockerEngineTls {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/** The fixed guest layout of every Docker sandbox. */
export declare const DOCKER_SANDBOX_GUEST: Readonly<{
  /** A named volume: kept by `stop()`, removed by `destroy()`. */
  workspace: '/sandbox/workspace';
  /** tmpfs of `temporaryStorage.homeBytes`. */
  home: '/sandbox/home';
  /** tmpfs of `temporaryStorage.tempBytes`. */
  tmpdir: '/sandbox/tmp';
  /** The same layout by the names of the guest's environment (`env` holds exactly these three). */
  HOME: '/sandbox/home';
  TMPDIR: '/sandbox/tmp';
  PATH: '/usr/local/bin:/usr/bin:/bin';
  /** The environment every process gets before its explicit `env`; an image may carry exactly these and nothing else. */
  env: Readonly<{ HOME: '/sandbox/home'; TMPDIR: '/sandbox/tmp'; PATH: '/usr/local/bin:/usr/bin:/bin' }>;
}>;

/**
 * Creates the backend: validates `options` (`SandboxValidationError`) and connects without waiting
 * on the engine; an unreachable engine or a missing image fails the start that needs it.
 * `support.workspaceDiskQuota` is `false`: a `required` quota throws `SandboxUnsupportedError`
 * from `reserve`, before any engine call.
 */
export declare function createDockerSandboxBackend(options: DockerSandboxBackendOptions): SandboxBackend;

/** What `prepareDockerSandboxImage` was given. */
export interface PrepareDockerSandboxImageOptions {
  /** A local image: a reference (`node:22`) or an ID. */
  readonly from: string;
  /** The lowercase `repository[:tag]` the admissible image gets (`my-agent:1`). */
  readonly tag: string;
  /** The engine, as in `createDockerSandboxBackend` (default: as the docker CLI finds it). */
  readonly engine?: DockerSandboxBackendOptions['engine'];
}

/** A prepared image: pass `image` (or `id`) as a backend's `image`. */
export interface PreparedDockerSandboxImage {
  /** The tag given. */
  readonly image: string;
  /** Its image ID (`sha256:…`). */
  readonly id: string;
  /**
   * The source's environment the prepared image does not carry (admission allows only the
   * guest's `HOME`, `TMPDIR` and `PATH=/usr/local/bin:/usr/bin:/bin`), by name: pass what a
   * process needs in its recipe's `env` (for example `JAVA_HOME`).
   */
  readonly droppedEnv: Readonly<Record<string, string>>;
}

/**
 * Makes any local image admissible, through the engine (no docker CLI): a new image with the
 * source's whole filesystem and exactly the admitted environment (`PATH=/usr/local/bin:/usr/bin:/bin`),
 * its entrypoint, command, user and working directory left out (every sandbox process sets its
 * own), labelled with the source's ID. Idempotent: the same source ID gives the same image
 * without a second build; a source that is admissible already is only tagged. Rejects with
 * `SandboxValidationError` for bad options, `SandboxStateError` when the engine has no such image,
 * `SandboxOperationError` (`driver_failure`) when the engine cannot build it.
 */
export declare function prepareDockerSandboxImage(options: PrepareDockerSandboxImageOptions): Promise<PreparedDockerSandboxImage>;

/**
 * The OCI runtime the engine applied to `sandbox` (a started sandbox of a Docker backend), as read
 * back after its containers were created: `'runsc'` when gVisor was asked for, else the engine's
 * default by name (usually `'runc'`). A runtime other than the one asked fails startup closed, so
 * this only ever names the runtime the backend was created with (or the engine's default).
 * Throws `SandboxValidationError` for anything else.
 */
export declare function dockerSandboxRuntime(sandbox: Sandbox): string;

/** One lookup or connection the egress gateway refused. */
export interface DockerSandboxEgressRefusal {
  /** The name asked for, or the address when the guest named none. */
  readonly host: string;
  /** 53 for a lookup. */
  readonly port: number;
  /** Why, e.g. `'not on the allowlist'`, `'resolves only to private or unusable addresses'`. */
  readonly reason: string;
  /** When, in milliseconds since the Unix epoch. */
  readonly at: number;
}

/** What an allowlist sandbox's egress gateway counted since the sandbox started. */
export interface DockerSandboxEgress {
  /** Lookups answered and connections relayed. */
  readonly allowed: bigint;
  /** Lookups and connections refused. */
  readonly refused: bigint;
  /** The latest refusals (at most 16), oldest first. */
  readonly recent: readonly DockerSandboxEgressRefusal[];
  /**
   * Present once the gateway is gone (killed, out of its memory budget, failed): the sandbox
   * then has no egress and no transfers for the rest of its life, and the counts above are
   * those last read from the gateway (zero if none was).
   */
  readonly stopped?: DockerSandboxEgressStopped;
}

/** How an egress gateway ended. */
export interface DockerSandboxEgressStopped {
  /** Its exit status, `null` when the engine reported none. */
  readonly exitCode: number | null;
  /** The engine killed it for exceeding its memory budget (256 MiB of its own). */
  readonly outOfMemory: boolean;
  /** Its last stderr (at most 4 KiB), trimmed: its own word on why it stopped. */
  readonly stderr: string;
}

/**
 * What the egress gateway of `sandbox` (a started allowlist sandbox of a Docker backend) counted;
 * `null` for a sandbox without a gateway (`isolated`, `outbound`). Throws `SandboxValidationError`
 * for anything but a Docker sandbox, and the engine's error when the gateway cannot be asked (a
 * destroyed sandbox).
 */
export declare function dockerSandboxEgress(sandbox: Sandbox): Promise<DockerSandboxEgress | null>;
