/**
 * native-sandbox/backend: implement a backend in JavaScript and let the shared Rust owner supply
 * admission, validation, observation deadlines, the recovery journal and retained cleanup
 * ownership around it.
 *
 * In this version the seam drives the lifecycle (reserve, start with `checkpoint`, stop,
 * destroy, reconcile, and the ready port's `effective` and `workspace`). `importTree`,
 * `reserveProcess` and `exportTree` of a sandbox from such a backend reject with
 * `SandboxUnsupportedError` until transfers and the process port are wired.
 */
import type {
  OperationOptions,
  SandboxBackend,
  SandboxEffectivePolicy,
  SandboxExportConsumer,
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
  SandboxTreeEntry,
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

export interface SandboxDriverProcessReservation {
  readonly id: SandboxProcessId;
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

export interface SandboxDriverReady {
  /** What the engine actually applied; a policy looser than the request fails startup closed. */
  readonly effective: SandboxEffectivePolicy;
  /** The authoritative guest workspace. */
  readonly workspace: SandboxGuestPath | string;
  openSpill?(options?: OperationOptions): Promise<SandboxDriverSpillStore>;
  importTree?(entries: AsyncIterable<SandboxTreeEntry>, options: SandboxDriverTransferOptions): Promise<SandboxTransferSummary>;
  reserveProcess?(spec: SandboxProcessSpec): SandboxDriverProcessReservation;
  exportTree?(selection: SandboxTreeSelection, consume: SandboxExportConsumer, options: SandboxDriverTransferOptions): Promise<SandboxTransferSummary>;
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
