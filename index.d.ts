/**
 * native-sandbox: owned, policy-checked sandboxes for Node.js agent hosts, with a Rust core.
 * A drop-in replacement for `@agen-ai/sandbox` 0.4.4: the same names, shapes and error classes.
 *
 * This root entry point holds the contracts (types), the parsers, the constants and the error
 * classes. Backends live in `native-sandbox/backend` (JavaScript drivers) and
 * `native-sandbox/docker` (the Docker engine).
 */

declare const brand: unique symbol;
/** A string that passed its parser. */
export type Branded<T, B extends string> = T & { readonly [brand]: B };

/** A relative workspace path: `/`-separated, no empty, `.` or `..` component, at most 1,024 bytes, 64 components, 255 bytes each. */
export type SandboxRelativePath = Branded<string, 'SandboxRelativePath'>;
/** An absolute, normalized guest path (same limits as relative paths). */
export type SandboxGuestPath = Branded<string, 'SandboxGuestPath'>;
/** A sandbox id: a letter or digit, then letters, digits, `_`, `.` or `-`; at most 128 bytes. */
export type SandboxId = Branded<string, 'SandboxId'>;
/** A process id, with the same alphabet as a sandbox id. */
export type SandboxProcessId = Branded<string, 'SandboxProcessId'>;

// ---------------------------------------------------------------------------------------------
// Validation

/**
 * The stable codes of validation issues:
 * - `invalid_type`: a value of the wrong JavaScript type (bigint where only numbers are accepted, too);
 * - `required`: a required field is missing or `undefined`;
 * - `unknown_field`: a field the contract does not define;
 * - `retired_field`: `deadlines.executionMs` / `deadlines.operationMs`; the message says how to migrate;
 * - `not_finite`: `NaN` or an infinity; `not_integer`: a fraction where an integer is required;
 * - `unsafe_integer`: beyond `Number.MAX_SAFE_INTEGER`;
 * - `too_small` / `too_large`: outside the field's bounds (negative, zero where positive is required, ...);
 * - `too_long`: a string, array, object or serialization over its limit;
 * - `invalid_value`: not one of the allowed literals, or a malformed identifier or digest;
 * - `invalid_path`: a malformed relative or guest path;
 * - `duplicate`: a repeated value that must be unique;
 * - `unsupported_format`: a recovery record in another format than v2.
 */
export type ValidationIssueCode =
  | 'invalid_type'
  | 'required'
  | 'unknown_field'
  | 'retired_field'
  | 'not_finite'
  | 'not_integer'
  | 'unsafe_integer'
  | 'too_small'
  | 'too_large'
  | 'too_long'
  | 'invalid_value'
  | 'invalid_path'
  | 'duplicate'
  | 'unsupported_format'
  /** A key an agentproto spec does not have (`native-sandbox/agentproto`, zod's name for it). */
  | 'unrecognized_keys';

/** One problem found in an input. `path` names the offending field (empty for the input itself). */
export interface ValidationIssue {
  readonly code: ValidationIssueCode;
  readonly path: readonly (string | number)[];
  readonly message: string;
}

// ---------------------------------------------------------------------------------------------
// Policy

export interface SandboxResources {
  /** CPUs, > 0, fractional allowed (at most 1,000,000; resolution one nano-CPU). */
  readonly cpus: number;
  /** Memory in bytes, a positive safe integer. No extra swap is granted. */
  readonly memoryBytes: number;
  /** Maximum number of processes, a positive safe integer. */
  readonly pids: number;
}

export interface SandboxTemporaryStorage {
  /** Size of the guest HOME in bytes, a positive safe integer (no 256 MiB ceiling). */
  readonly homeBytes: number;
  /** Size of the guest TMPDIR in bytes, a positive safe integer. */
  readonly tempBytes: number;
}

/**
 * The network as parsed and as observed: `isolated`: no network but loopback. `outbound`: broad
 * egress, not an allowlist. `allowlist`: egress only to `hosts`, each a string (see
 * `SandboxEgressHost`); `allowPrivate`, present only when some entry has it, names the entries
 * that may resolve to link-local or private addresses (or the host's own). A backend whose
 * `support.network` lacks `allowlist` refuses it at `reserve` with `SandboxUnsupportedError`
 * (the Docker backend does under gVisor).
 */
export type SandboxNetwork =
  | { readonly kind: 'isolated' }
  | { readonly kind: 'outbound' }
  | { readonly kind: 'allowlist'; readonly hosts: readonly string[]; readonly allowPrivate?: readonly string[] };

/**
 * The network as requested: as `SandboxNetwork`, and an entry may also be
 * `{ host, allowPrivate: true }` (the same as listing it in `allowPrivate`). Parsing turns it
 * into `SandboxNetwork`'s form.
 */
export type SandboxNetworkInput =
  | { readonly kind: 'isolated' }
  | { readonly kind: 'outbound' }
  | { readonly kind: 'allowlist'; readonly hosts: readonly SandboxEgressHost[]; readonly allowPrivate?: readonly string[] };

/**
 * One allowlist entry: a DNS name, exact (`api.example.com`) or a wildcard (`*.example.com`,
 * names one or more labels deeper, never `example.com` itself), with an optional `:port`
 * (without one, 443 and 80). Parsed names are lower-case ASCII (a Unicode label as its `xn--`
 * form; full-width letters, digits and dots as the ASCII ones clients send for them, other
 * half- and full-width forms refused). A wildcard directly under a public suffix (`*.co.uk`,
 * `*.github.io`, by the Public Suffix List, ICANN and private sections) or over names that are
 * public suffixes (`*.kawasaki.jp`) is refused: its names belong to unrelated owners.
 * IP literals, paths, CIDRs, `*` alone, empty labels, names over 253 bytes, duplicates and more
 * than 256 entries are refused, each issue naming the entry. `allowPrivate: true` lets the name
 * resolve to link-local or private addresses, or the host's own (never loopback, which would be
 * the gateway's own; `false` is the same as leaving it out);
 * each string of the network's `allowPrivate` must be an entry of `hosts` (written in any form
 * that parses to the same name and port), once, and an entry may resolve there when either
 * says so. A parsed `allowPrivate` lists its entries in the order of `hosts`.
 */
export type SandboxEgressHost = string | { readonly host: string; readonly allowPrivate?: boolean };

export interface SandboxDeadlines {
  /** How long `start()` is observed, 1..60,000 ms. Expiry never proves entered work ended. */
  readonly startupMs: number;
  /** How long `stop()` / `destroy()` are observed, 1..30,000 ms. */
  readonly cleanupMs: number;
}

/** Working-memory buffers of transfers (not file counts or workspace size). */
export interface SandboxTransferBuffers {
  /** Largest body chunk, 1..16 MiB. */
  readonly chunkBytes: number;
  /** Metadata ledger batch size, 4 KiB..256 MiB. */
  readonly metadataBatchBytes: number;
  /** Metadata ledger merge fan-in, 2..1,024. */
  readonly mergeFanIn: number;
}

/** Bounded process stream staging, plus optional caller-selected totals. */
export interface SandboxStreamLimits {
  /** Queued stdin bytes; a write that would queue past it rejects. 1 B..1 GiB. */
  readonly maxBufferedInputBytes: number;
  /** Staged stdout + stderr bytes. 1 B..1 GiB. */
  readonly maxBufferedOutputBytes: number;
  /** Node stream high-water mark, at most the smaller staging bound. */
  readonly highWaterMark: number;
  /** Total stdin bytes allowed; 0 allows none. Omitted: no total. */
  readonly maxStdinBytes?: number;
  /** Total stdout + stderr bytes allowed; 0 allows none. Omitted: no total. */
  readonly maxOutputBytes?: number;
}

/** `until_stopped` (the default) installs no timer; `deadline` stops the whole workload `timeoutMs` after process start entry. */
export type SandboxExecution =
  | { readonly kind: 'until_stopped' }
  | { readonly kind: 'deadline'; readonly timeoutMs: number };

export type SandboxWorkspaceDiskQuota =
  | { readonly kind: 'not_requested' }
  | { readonly kind: 'required'; readonly bytes: number; readonly accounting: 'allocated_blocks' };

/** What a caller passes to `parseSandboxRequest` or `backend.reserve`. */
export interface SandboxRequestInput {
  readonly policy: {
    readonly resources: SandboxResources;
    readonly temporaryStorage: SandboxTemporaryStorage;
    readonly network: SandboxNetworkInput;
    readonly deadlines: SandboxDeadlines;
    readonly transfers: SandboxTransferBuffers;
    readonly streams: SandboxStreamLimits;
    /** Defaults to `{ kind: 'until_stopped' }`. */
    readonly execution?: SandboxExecution;
    /** Defaults to `{ kind: 'not_requested' }`. */
    readonly workspaceDiskQuota?: SandboxWorkspaceDiskQuota;
  };
}

/** A parsed request: deeply frozen, defaults filled. */
export interface SandboxRequest {
  readonly policy: {
    readonly resources: SandboxResources;
    readonly temporaryStorage: SandboxTemporaryStorage;
    readonly network: SandboxNetwork;
    readonly deadlines: SandboxDeadlines;
    readonly transfers: SandboxTransferBuffers;
    readonly streams: SandboxStreamLimits;
    readonly execution: SandboxExecution;
    readonly workspaceDiskQuota: SandboxWorkspaceDiskQuota;
  };
}

/** What a backend can enforce, declared up front. */
export interface SandboxSupport {
  readonly backendId: string;
  readonly backendRevision: string;
  readonly network: readonly ('isolated' | 'outbound' | 'allowlist')[];
  readonly execution: readonly ('until_stopped' | 'deadline')[];
  readonly workspaceDiskQuota: boolean;
  /**
   * Whether a started sandbox runs commands and file calls beside its process (`exec`, `run`,
   * `files`); `false` (or absent in a driver's declaration) for a JavaScript driver.
   */
  readonly sessions?: boolean;
}

/** What the backend observed the engine apply after startup. */
export interface SandboxEffectivePolicy {
  readonly resources: SandboxResources;
  readonly temporaryStorage: SandboxTemporaryStorage;
  readonly network: SandboxNetwork;
  readonly workspaceDiskQuota: { readonly kind: 'not_requested' } | { readonly kind: 'enforced'; readonly bytes: number };
}

// ---------------------------------------------------------------------------------------------
// Processes

/** A literal process recipe: no shell, no inherited environment. */
export interface SandboxProcessInput {
  /** Absolute guest path of the executable. */
  readonly executable: string;
  /** Literal arguments, at most 128, no NUL. */
  readonly args: readonly string[];
  /** Explicit environment: at most 128 entries, names without `=` or NUL, values at most 16 KiB. */
  readonly env: Readonly<Record<string, string>>;
  /** Absolute guest working directory. */
  readonly cwd: string;
}

/** A parsed recipe (at most 256 KiB as JSON), deeply frozen. */
export interface SandboxProcessSpec {
  readonly executable: SandboxGuestPath;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: SandboxGuestPath;
}

export type SandboxProcessExit =
  | { readonly kind: 'exited'; readonly code: number }
  /** `reason: 'out_of_memory'` when the kernel killed the leader for its memory limit (SIGKILL). */
  | { readonly kind: 'signaled'; readonly signal: string; readonly reason?: 'out_of_memory' }
  /**
   * A stop removed compute before the leader's fate was known. `cause` says why the sandbox
   * stopped: `'deadline_exceeded'` (the execution deadline, `policy.execution`),
   * `'output_limit'` (`policy.streams.maxOutputBytes`), `'input_limit'`
   * (`maxStdinBytes` or `maxBufferedInputBytes`), `'stop'` (a `stop()` or `destroy()`, or a
   * failure that stopped it); absent where nobody knows (a process attached again after a
   * controller restart).
   */
  | { readonly kind: 'unavailable'; readonly reason: 'sandbox_stopped'; readonly cause?: SandboxStopCause };

/** Why a stop ended a process: `exit`'s `cause` beside `reason: 'sandbox_stopped'`. */
export type SandboxStopCause = 'stop' | 'deadline_exceeded' | 'output_limit' | 'input_limit';

/** Binary Node streams of the one process; ending `stdin` delivers EOF to the guest. */
export interface SandboxProcessStreams {
  readonly stdin: import('node:stream').Writable;
  readonly stdout: import('node:stream').Readable;
  readonly stderr: import('node:stream').Readable;
  /** Describes the leader only and never fabricates a code. */
  readonly exit: Promise<SandboxProcessExit>;
}

export interface SandboxProcessReservation {
  readonly id: SandboxProcessId;
  readonly stopScope: 'sandbox';
  start(options?: OperationOptions): Promise<SandboxProcessStreams>;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Trees and transfers

export type SandboxByteSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export type SandboxTreeEntry =
  | { readonly kind: 'directory'; readonly path: string }
  | {
      readonly kind: 'file';
      readonly path: string;
      readonly byteLength: number | bigint;
      readonly executable: boolean;
      /** Called once; must yield exactly `byteLength` bytes in chunks of at most `chunkBytes`. */
      open(options: { readonly signal: AbortSignal }): SandboxByteSource;
    };

export type SandboxTreeSource = Iterable<SandboxTreeEntry> | AsyncIterable<SandboxTreeEntry>;

export type SandboxTreeSelection =
  | { readonly kind: 'workspace' }
  | { readonly kind: 'files'; readonly paths: readonly string[] }
  | { readonly kind: 'subtree'; readonly path: string };

export type SandboxExportEntry =
  | { readonly kind: 'directory'; readonly path: SandboxRelativePath }
  | {
      readonly kind: 'file';
      readonly path: SandboxRelativePath;
      readonly byteLength: bigint;
      readonly executable: boolean;
      /** Once-only; chunks are valid until the next pull. */
      readonly bytes: AsyncIterable<Uint8Array>;
    };

export type SandboxExportConsumer = (entry: SandboxExportEntry) => Promise<void> | void;

/** A nonnegative safe integer or bigint amount. */
export type SandboxTransferAmount = number | bigint;

export interface SandboxTransferQuotasInput {
  readonly maxFiles?: SandboxTransferAmount;
  readonly maxFileBytes?: SandboxTransferAmount;
  readonly maxTotalBytes?: SandboxTransferAmount;
  /** Archive bytes, headers and padding included. */
  readonly maxArchiveBytes?: SandboxTransferAmount;
  /** Requested exact files plus one subtree root; a whole workspace supplies none. */
  readonly maxPaths?: SandboxTransferAmount;
}

/**
 * How far a transfer is, as its summary counts: files and their bytes taken so far (an import
 * counts bytes as their chunks are taken; an export counts a file and its bytes when its entry is
 * read, a little ahead of the consumer).
 */
export interface SandboxTransferProgress {
  readonly files: bigint;
  readonly bytes: bigint;
}

export interface SandboxTransferOptions {
  readonly signal?: AbortSignal;
  /** Epoch milliseconds after which the caller stops waiting; entered work stays owned. */
  readonly deadlineAt?: number;
  readonly quotas?: SandboxTransferQuotasInput;
  /**
   * Called at most every 100 ms while the counts move, and once at the end with the summary's
   * totals (`files`, `fileBytes`). A callback that throws fails the transfer with its error.
   */
  readonly onProgress?: (progress: SandboxTransferProgress) => void;
}

/** Parsed quotas: every amount as bigint; omitted ones impose no ceiling. */
export interface SandboxTransferBudget {
  readonly maxFiles?: bigint;
  readonly maxFileBytes?: bigint;
  readonly maxTotalBytes?: bigint;
  readonly maxArchiveBytes?: bigint;
  readonly maxPaths?: bigint;
}

export interface ParsedSandboxTransferOptions {
  readonly signal?: AbortSignal;
  readonly deadlineAt?: number;
  readonly quotas: SandboxTransferBudget;
  readonly onProgress?: (progress: SandboxTransferProgress) => void;
}

export interface SandboxTransferSummary {
  readonly directories: bigint;
  readonly files: bigint;
  readonly fileBytes: bigint;
  readonly archiveBytes: bigint;
}

// ---------------------------------------------------------------------------------------------
// Recovery

export type SandboxRecoveryPhase = 'reserved' | 'starting' | 'ready' | 'stopping' | 'stopped' | 'destroying' | 'destroyed';

export type SandboxResourceIdentity =
  | { readonly kind: 'planned' }
  | { readonly kind: 'creating' }
  | { readonly kind: 'identified'; readonly id: string; readonly fingerprint: string };

export interface SandboxRecoveryResource {
  readonly role: 'compute' | 'storage' | 'export' | 'network';
  readonly name: string;
  readonly identity: SandboxResourceIdentity;
}

/** The strict v2 envelope, at most 64 KiB of UTF-8 JSON. Digests are `sha256:<64 hex>`. */
export interface SandboxRecoveryRecord {
  readonly format: 'agenai.sandbox-recovery.v2';
  readonly backendId: string;
  readonly backendRevision: string;
  readonly namespace: string;
  readonly operationId: string;
  readonly sandboxId: string;
  readonly imageDigest: string;
  readonly policyDigest: string;
  readonly configurationDigest: string;
  readonly phase: SandboxRecoveryPhase;
  readonly authority: { readonly kind: 'unverified' } | { readonly kind: 'verified'; readonly backendIdentity: string };
  /** At most four, roles unique. */
  readonly resources: readonly SandboxRecoveryResource[];
}

export type SandboxRecoveryPolicy =
  | { readonly kind: 'in_process' }
  | { readonly kind: 'persisted'; persist(record: SandboxRecoveryRecord): Promise<void> };

/** Cleanup-only ownership: what survives a failed start, a failed cleanup or a recovery. */
export interface SandboxCleanupOwner {
  readonly recoveryRecord: SandboxRecoveryRecord;
  /** Fences admissions and stops the complete workload, keeping storage. */
  stop(): Promise<void>;
  /** Stops, then releases storage. */
  destroy(): Promise<void>;
}

export type SandboxReconciliation =
  | { readonly kind: 'matched' | 'uncertain'; readonly owner: SandboxCleanupOwner }
  | { readonly kind: 'conflict'; readonly reason: string }
  | { readonly kind: 'absent'; readonly record: SandboxRecoveryRecord };

// ---------------------------------------------------------------------------------------------
// Backends and sandboxes

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

export type SandboxState =
  | Readonly<{ kind: 'reserved' | 'starting' | 'ready' | 'stopping' | 'stopped' | 'destroying' | 'destroyed' }>
  | Readonly<{ kind: 'failed' | 'uncertain'; operation: 'start' | 'import' | 'process' | 'export' | 'stop' | 'destroy' }>;

export interface SandboxBackend {
  readonly support: SandboxSupport;
  /** Synchronous and inert: validates and reserves identities, acquires nothing. */
  reserve(request: SandboxRequestInput, recovery: SandboxRecoveryPolicy): SandboxReservation;
  reconcile(record: SandboxRecoveryRecord, options?: OperationOptions): Promise<SandboxReconciliation>;
}

export interface SandboxReservation extends SandboxCleanupOwner {
  readonly id: SandboxId;
  readonly state: SandboxState;
  /** Once only; a failure rejects with `SandboxStartError` whose `owner` still cleans up. */
  start(options?: OperationOptions): Promise<Sandbox>;
}

export interface Sandbox extends SandboxCleanupOwner {
  readonly id: SandboxId;
  readonly state: SandboxState;
  readonly effective: SandboxEffectivePolicy;
  /** The authoritative guest workspace; it conveys no host path. */
  readonly workspace: SandboxGuestPath;
  importTree(entries: SandboxTreeSource, options?: SandboxTransferOptions): Promise<SandboxTransferSummary>;
  reserveProcess(spec: SandboxProcessInput): SandboxProcessReservation;
  exportTree(
    selection: SandboxTreeSelection,
    consume: SandboxExportConsumer,
    options?: SandboxTransferOptions,
  ): Promise<SandboxTransferSummary>;
  /**
   * Sessions (0.4): starts one more command beside (or without) the reserved process, on a
   * started sandbox until its stop begins. Throws `SandboxUnsupportedError` on a backend whose
   * `support.sessions` is not `true`.
   */
  exec(spec: SandboxProcessInput, options?: SandboxExecOptions): Promise<SandboxCommand>;
  /** Runs a command to its exit, writing `input` then EOF and collecting both streams. */
  run(spec: SandboxProcessInput, options?: SandboxRunCommandOptions): Promise<SandboxCommandResult>;
  /** The workspace, HOME and TMPDIR while the sandbox runs. */
  readonly files: SandboxFiles;
}

export interface SandboxExecOptions {
  /** Aborting ends the command's process group: SIGTERM, then SIGKILL after `killGraceMs`. */
  readonly signal?: AbortSignal;
  /** From the start (1..2,147,483,647); ends the command the same way. */
  readonly deadlineMs?: number;
  /** Between SIGTERM and SIGKILL, 0..600,000; default 2,000. */
  readonly killGraceMs?: number;
  /** Default `true`; `false`: the guest reads `/dev/null` and `stdin` is `null`. */
  readonly stdin?: boolean;
}

export interface SandboxCommand {
  readonly id: string;
  /** `end()` delivers EOF. */
  readonly stdin: import('node:stream').Writable | null;
  /** Binary, with backpressure and the policy's stream limits. */
  readonly stdout: import('node:stream').Readable;
  readonly stderr: import('node:stream').Readable;
  /** The command's own exit (its wait status): settles even while children it left behind still hold its stdout. */
  readonly exit: Promise<SandboxProcessExit>;
  kill(signal?: 'SIGTERM' | 'SIGKILL' | 'SIGINT' | 'SIGHUP' | 'SIGQUIT' | 'SIGUSR1' | 'SIGUSR2'): void;
}

export interface SandboxRunCommandOptions extends Omit<SandboxExecOptions, 'stdin'> {
  /** Written to stdin, then EOF; absent: EOF at once. */
  readonly input?: string | Uint8Array;
  /** Per stream, 1..1 GiB, default 16 MiB: past it the command is ended and `run` rejects with `output_limit`. */
  readonly maxOutputBytes?: number;
}

export interface SandboxCommandResult {
  readonly exit: SandboxProcessExit;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
}

export type SandboxFileKind = 'file' | 'directory' | 'symlink' | 'other';

/**
 * `path`: relative to the workspace, or absolute under the workspace, HOME or TMPDIR of
 * `DOCKER_SANDBOX_GUEST`. `..` and paths outside those roots are `SandboxValidationError`s naming
 * `path`; no symbolic link is followed (one on the way is refused by name).
 */
export interface SandboxFiles {
  /** `null`: absent. A file past `maxBytes` fails; it is never truncated. */
  read(path: string, options?: { readonly signal?: AbortSignal; readonly maxBytes?: number }): Promise<Buffer | null>;
  readStream(path: string, options?: { readonly signal?: AbortSignal }): Promise<import('node:stream').Readable | null>;
  /** Whole or not at all (a reader never sees half a file); parents created; owned by the sandbox's user. */
  write(
    path: string,
    data: string | Uint8Array | AsyncIterable<Uint8Array>,
    options?: { readonly mode?: number; readonly signal?: AbortSignal },
  ): Promise<void>;
  stat(
    path: string,
    options?: { readonly signal?: AbortSignal },
  ): Promise<{ readonly kind: SandboxFileKind; readonly size: bigint; readonly mode: number; readonly mtimeMs: number } | null>;
  list(path: string, options?: { readonly signal?: AbortSignal }): Promise<readonly { readonly name: string; readonly kind: SandboxFileKind }[] | null>;
  /** `false`: nothing was there. A link is removed itself, never its target. */
  remove(path: string, options?: { readonly recursive?: boolean; readonly signal?: AbortSignal }): Promise<boolean>;
  mkdir(path: string, options?: { readonly recursive?: boolean; readonly signal?: AbortSignal }): Promise<void>;
}

export interface SandboxRunOptions extends OperationOptions {
  readonly recovery: SandboxRecoveryPolicy;
  /**
   * The callback's budget in milliseconds (any positive safe integer; default 3,600,000, one
   * hour). A callback that has not settled by then fails the run with `SandboxOperationError`
   * (`deadline_exceeded`) and the sandbox is destroyed; if destruction fails too, both errors are
   * in `SandboxRunError`.
   */
  readonly budgetMs?: number;
}

/**
 * Reserves and starts a sandbox, runs `callback` with it within `options.budgetMs` (default one
 * hour), and always attempts `destroy()`. `options.signal` covers startup and the callback: an
 * abort during the callback fails the run with `SandboxOperationError` (`cancelled`, the signal's
 * reason as `cause`) and the sandbox is destroyed. Unknown options are refused.
 * Resolves with the callback's result. When only one of callback (or startup) and cleanup
 * fails, that error is thrown; when both fail, `SandboxRunError` keeps both and the owner.
 * Export any files inside the callback, after `sandbox.stop()` succeeds.
 */
export declare function withSandbox<T>(
  backend: SandboxBackend,
  request: SandboxRequestInput,
  callback: (sandbox: Sandbox) => Promise<T> | T,
  options: SandboxRunOptions,
): Promise<T>;

export interface SandboxPoolOptions {
  /** The one policy every member has; parsed at `createSandboxPool`. */
  readonly request: SandboxRequestInput;
  /** Members kept ready, 1..64. */
  readonly size: number;
  /** A member unclaimed this long (milliseconds, 1 to 2³¹−1) is destroyed and replaced; none by default. */
  readonly idleMs?: number;
  /** Aborting it closes the pool. */
  readonly signal?: AbortSignal;
}

export interface SandboxPool {
  /**
   * A started sandbox, used once: yours to stop and destroy, never returned to the pool. A ready
   * member is read back from its engine first (one that no longer applies what it started with
   * is destroyed, never handed out); with none ready the claim starts one at once, as `reserve`
   * and `start` would (a cold claim), never waiting for a refill. `SandboxStateError` once the
   * pool is closed.
   */
  claim(options?: { readonly signal?: AbortSignal }): Promise<Sandbox>;
  /** Destroys every unclaimed member (and any being made); claims after it are refused. */
  close(): Promise<void>;
  /** Members ready now. */
  readonly ready: number;
}

/**
 * Keeps `options.size` sandboxes of one request reserved and started (`in_process`, owned by
 * the reaper like any other), with what runs their commands already up on a backend with
 * sessions, so a claim's first command is one frame away. Refills run at most four at once.
 * Bad options are a `SandboxValidationError` naming each field, and a request the backend
 * cannot honour a `SandboxUnsupportedError`, before any engine object.
 */
export declare function createSandboxPool(backend: SandboxBackend, options: SandboxPoolOptions): SandboxPool;

/**
 * Throws `SandboxUnsupportedError` when `support` cannot enforce `request` (a network kind or
 * execution kind it does not offer, a required disk quota it cannot apply); what every backend's
 * `reserve` checks before its driver is asked anything. Both inputs are parsed first.
 */
export declare function assertSandboxRequestSupported(request: SandboxRequestInput, support: SandboxSupport): void;

/**
 * Throws `SandboxUnsupportedError` when the observed `effective` policy is looser than `request`
 * (more CPU, memory, PIDs or temporary storage, outbound where isolated or an allowlist was
 * asked, an allowlist wider than the one asked, or a missing required quota); the check every
 * owner applies after startup. Both inputs are parsed first.
 */
export declare function assertSandboxEffectivePolicy(request: SandboxRequestInput, effective: SandboxEffectivePolicy): void;

/**
 * The controlled, once-only body of one file in a transfer, as the original exports it: opens
 * `open()`'s source lazily (once), yields chunks of at most `chunkBytes`, delivers exactly
 * `byteLength` bytes and, with `requireEof`, reads the source to its real end. A failure is
 * reported to `interrupt` and rethrown by every later read; concurrent reads reject.
 */
export declare class TransferBody implements AsyncIterable<Uint8Array> {
  constructor(
    byteLength: number,
    chunkBytes: number,
    requireEof: boolean,
    signal: AbortSignal,
    open: (() => Iterable<Uint8Array> | AsyncIterable<Uint8Array>) | undefined,
    interrupt: (error: unknown) => void,
  );
  get complete(): boolean;
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array>;
  assertComplete(): void;
  rejectReuse(): never;
  close(retry?: boolean): Promise<void>;
}

/** The original's names for a tree entry and a selection as callers write them. */
export type SandboxInputTreeEntry = SandboxTreeEntry;
export type SandboxInputTreeSelection = SandboxTreeSelection;

/**
 * A file entry over bytes the caller already holds: borrows `bytes` (keep them unchanged until
 * the transfer settles) and yields views of at most `chunkBytes` (default 64 KiB) without copying.
 * `open()` may be called once.
 */
export declare function fileFromBytes(
  path: string,
  bytes: Uint8Array,
  options?: Readonly<{ executable?: boolean; chunkBytes?: number }>,
): Extract<SandboxTreeEntry, { kind: 'file' }>;

// ---------------------------------------------------------------------------------------------
// Parsers: each throws SandboxValidationError naming every issue found, not the first only.

/** Parses and normalizes a request; the result is deeply frozen with defaults filled. */
export declare function parseSandboxRequest(input: unknown): SandboxRequest;
/** Parses a process recipe (absolute executable and cwd, literal args, explicit env, at most 256 KiB as JSON). */
export declare function parseSandboxProcessSpec(input: unknown): SandboxProcessSpec;
/** Parses a relative workspace path. */
export declare function parseSandboxRelativePath(input: unknown): SandboxRelativePath;
/** Parses an absolute, normalized guest path. */
export declare function parseSandboxGuestPath(input: unknown): SandboxGuestPath;
/** Parses a v2 recovery record; v1 and foreign formats are rejected with `unsupported_format`. */
export declare function parseSandboxRecoveryRecord(input: unknown): SandboxRecoveryRecord;
/** Parses `{ kind: 'in_process' }` or `{ kind: 'persisted', persist }`. */
export declare function parseSandboxRecoveryPolicy(input: unknown): SandboxRecoveryPolicy;
/** Parses a backend's declared support. */
export declare function parseSandboxSupport(input: unknown): SandboxSupport;
/** Parses an observed effective policy. */
export declare function parseSandboxEffectivePolicy(input: unknown): SandboxEffectivePolicy;
/** Parses per-transfer options; quotas come back as bigint, the signal as given. */
export declare function parseTransferOptions(input: unknown): ParsedSandboxTransferOptions;
/** Parses a sandbox id. */
export declare function parseSandboxId(input: unknown): SandboxId;
/** Parses a process id. */
export declare function parseSandboxProcessId(input: unknown): SandboxProcessId;

// ---------------------------------------------------------------------------------------------
// Constants

/** 64 KiB chunks, 64 KiB metadata batches, merge fan-in 8. */
export declare const SANDBOX_DEFAULT_TRANSFER_BUFFERS: Readonly<{ chunkBytes: 65536; metadataBatchBytes: 65536; mergeFanIn: 8 }>;
/** Bounded staging (1 MiB in, 1 MiB out, 64 KiB high-water mark) and no totals. */
export declare const SANDBOX_DEFAULT_STREAM_LIMITS: Readonly<{
  maxBufferedInputBytes: number;
  maxBufferedOutputBytes: number;
  highWaterMark: number;
}>;
/** The fixed bounds every parser enforces. */
export declare const SANDBOX_LIMITS: Readonly<{
  startupMs: 60000;
  cleanupMs: 30000;
  pathBytes: 1024;
  pathComponents: 64;
  pathComponentBytes: 255;
  processArguments: 128;
  processEnvironmentEntries: 128;
  processEnvironmentValueBytes: 16384;
  processRecipeBytes: 262144;
  recoveryRecordBytes: 65536;
  recoveryResources: 4;
  identifierBytes: 128;
  chunkBytes: number;
  metadataBatchBytesMin: number;
  metadataBatchBytes: number;
  mergeFanInMin: number;
  mergeFanIn: number;
  streamBufferBytes: number;
  /** Paths in one `{ kind: 'files', paths }` export selection: 262144. */
  exportFilePaths: number;
  /** What one call's input capture reads at most: values (1048576), objects and arrays (4096),
   *  UTF-8 bytes of all strings (384 MiB), bytes of one string (1 MiB). Past a bound, or on a
   *  cycle, the value is reported as an issue (`too_long`, `invalid_value`) at its path. */
  captureValues: number;
  captureObjects: number;
  captureStringBytes: number;
  captureStringBytesOne: number;
}>;

// ---------------------------------------------------------------------------------------------
// Errors

export type SandboxOperationErrorCode =
  | 'cancelled'
  | 'deadline_exceeded'
  | 'output_limit'
  | 'input_limit'
  | 'stream_failure'
  | 'persistence_failure'
  | 'driver_failure';

/** A sandbox operation failed; `code` says how. */
export declare class SandboxOperationError extends Error {
  readonly code: SandboxOperationErrorCode;
  constructor(code: SandboxOperationErrorCode, message: string, options?: ErrorOptions);
}

/** An input failed validation: the message is the original's `Invalid sandbox input`; `issues` names every problem, each with code, path and message. */
export declare class SandboxValidationError extends Error {
  readonly issues: readonly ValidationIssue[];
  constructor(issues: readonly ValidationIssue[]);
}

/** The backend cannot enforce what was requested; raised before anything is acquired. */
export declare class SandboxUnsupportedError extends Error {
  constructor(message: string);
}

/** The operation is not allowed in the owner's current state. */
export declare class SandboxStateError extends Error {
  constructor(message: string);
}

/** A stop or destroy did not settle successfully; `retryCleanup()` retries the same operation on the same owner. */
export declare class SandboxCleanupError extends Error {
  readonly owner: SandboxCleanupOwner;
  readonly operation: 'stop' | 'destroy';
  constructor(message: string, options: { cause: unknown; owner: SandboxCleanupOwner; operation: 'stop' | 'destroy' });
  retryCleanup(): Promise<void>;
}

/** Startup failed; `owner` keeps cleanup ownership of whatever was acquired. */
export declare class SandboxStartError extends Error {
  readonly owner: SandboxCleanupOwner;
  constructor(message: string, options: { cause: unknown; owner: SandboxCleanupOwner });
}

/** Both the callback of `withSandbox` and its cleanup failed; `retryCleanup()` destroys through the same owner. */
export declare class SandboxRunError extends Error {
  readonly primaryError: unknown;
  readonly cleanupError: unknown;
  readonly owner: SandboxCleanupOwner;
  constructor(options: { primaryError: unknown; cleanupError: unknown; owner: SandboxCleanupOwner });
  retryCleanup(): Promise<void>;
}
