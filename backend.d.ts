/**
 * native-sandbox/backend: implement a backend in JavaScript and let the shared Rust owner supply
 * admission, validation, observation deadlines, the recovery journal and retained cleanup
 * ownership around it.
 *
 * The seam drives the lifecycle (reserve, start with `checkpoint`, stop, destroy, reconcile, the
 * ready port's `effective` and `workspace`), transfers (the ready port's `importTree`,
 * `exportTree` and `openSpill`) and the process port (`reserveProcess`): the owner admits the
 * one process and runs its execution deadline; the driver's raw streams get the policy's stream
 * limits. A port the driver does not have rejects with a clear error.
 */
import type {
  OperationOptions,
  SandboxBackend,
  SandboxEffectivePolicy,
  SandboxGuestPath,
  SandboxId,
  SandboxProcessId,
  SandboxProcessSpec,
  SandboxProcessStreams,
  SandboxReconciliation,
  SandboxRecoveryRecord,
  SandboxRequest,
  SandboxSupport,
  SandboxTransferBudget,
  SandboxTransferBuffers,
  SandboxTransferSummary,
  SandboxRelativePath,
  SandboxTreeSelection,
} from './index.js';

export interface SandboxDriverTransferOptions {
  readonly signal: AbortSignal;
  readonly quotas: SandboxTransferBudget;
  readonly buffers: SandboxTransferBuffers;
}

export interface SandboxDriverStartOptions extends OperationOptions {
  /** Aborted when the owner cancels startup (caller signal, observation expiry, stop). */
  readonly signal: AbortSignal;
  /** Persist `record` before the next resource effect; it may not change the record's identity. */
  checkpoint(record: SandboxRecoveryRecord): Promise<void>;
}

/** `start` resolves the raw Node streams and the leader's exit; `stop()` of the reservation ends the whole workload. */
export interface SandboxDriverProcessReservation {
  readonly id: SandboxProcessId | string;
  start(options?: OperationOptions): Promise<SandboxProcessStreams>;
}

export interface SandboxDriverSpillFile {
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<Readonly<{ bytesRead: number }>>;
  write(buffer: Uint8Array, offset: number, length: number, position: number): Promise<Readonly<{ bytesWritten: number }>>;
  truncate(size: number): Promise<void>;
  close(): Promise<void>;
}

export interface SandboxDriverSpillStore {
  createFile(): Promise<SandboxDriverSpillFile>;
  close(): Promise<void>;
}

/** What a driver's `importTree` receives: validated paths and once-only bodies that end with exactly `byteLength` bytes. */
export type SandboxDriverImportEntry =
  | Readonly<{ kind: 'directory'; path: SandboxRelativePath }>
  | Readonly<{ kind: 'file'; path: SandboxRelativePath; byteLength: bigint; executable: boolean; bytes: AsyncIterable<Uint8Array> }>;

/** What a driver's `exportTree` delivers to the consumer it is given; the owner checks each entry. */
export type SandboxDriverExportEntry =
  | { readonly kind: 'directory'; readonly path: string }
  | { readonly kind: 'file'; readonly path: string; readonly byteLength: bigint | number; readonly executable: boolean; readonly bytes: AsyncIterable<Uint8Array> };

export interface SandboxDriverReady {
  /** What the engine actually applied; a policy looser than the request fails startup closed. */
  readonly effective: SandboxEffectivePolicy;
  /** The authoritative guest workspace. */
  readonly workspace: SandboxGuestPath | string;
  /** Spill storage for the metadata ledger (see `createSandboxSpillStore` in `native-sandbox/node`). */
  openSpill?(options?: OperationOptions): Promise<SandboxDriverSpillStore>;
  /** Must report the same directories, files and fileBytes as it received. */
  importTree?(entries: AsyncIterable<SandboxDriverImportEntry>, options: SandboxDriverTransferOptions): Promise<SandboxTransferSummary>;
  reserveProcess?(spec: SandboxProcessSpec): SandboxDriverProcessReservation;
  exportTree?(
    selection: SandboxTreeSelection,
    consume: (entry: SandboxDriverExportEntry) => Promise<void>,
    options: SandboxDriverTransferOptions,
  ): Promise<SandboxTransferSummary>;
}

export interface SandboxDriverReservation {
  readonly id: SandboxId | string;
  /** Phase `reserved`, unverified authority, every resource `planned`, matching id and backend. */
  readonly recoveryRecord: SandboxRecoveryRecord;
  start(options: SandboxDriverStartOptions): Promise<SandboxDriverReady>;
  /** Terminates the complete workload; must work in any state, also after persistence failed. */
  stop(): Promise<void>;
  /** Releases storage. */
  destroy(): Promise<void>;
}

export interface SandboxBackendDriver {
  readonly support: SandboxSupport;
  /** Synchronous and inert: reserve identities without acquiring resources. */
  reserve(request: SandboxRequest): SandboxDriverReservation;
  reconcile(record: SandboxRecoveryRecord, options?: OperationOptions): Promise<SandboxReconciliation>;
}

/** Wraps `driver` in the shared owner; the returned backend is frozen. */
export declare function createSandboxBackend(driver: SandboxBackendDriver): SandboxBackend;
