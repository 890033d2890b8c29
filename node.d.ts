/**
 * native-sandbox/node: explicit host directory import and export, and spill storage for
 * JavaScript drivers. No implicit host path is ever chosen.
 */
import type {
  Sandbox,
  SandboxTransferOptions,
  SandboxTransferSummary,
  SandboxTreeSelection,
} from './index.js';
import type { SandboxDriverSpillStore } from './backend.js';

export interface SandboxDirectoryImportOptions extends SandboxTransferOptions {
  /** Chunk size when reading files; default 64 KiB. Keep it at most the sandbox's `transfers.chunkBytes`. */
  readonly chunkBytes?: number;
}

/**
 * Imports the regular files and directories under `directory` (absolute; keep it quiescent).
 * Each file is read through its own descriptor (in Rust for the Docker backend's sandboxes, through
 * `sandbox.importTree` for any other); symlinks and special files reject, and replacement,
 * truncation and growth during the read are detected.
 */
export declare function importSandboxDirectory(
  sandbox: Sandbox,
  directory: string,
  options?: SandboxDirectoryImportOptions,
): Promise<SandboxTransferSummary>;

/**
 * Exports `selection` after a complete stop into `destination`, which must not exist. It is
 * created exclusively, filled through private staging, and its `files` child is published only
 * after the whole export validated. Files get owner read/write (and execute when exported as
 * executable); a umask that removes a requested bit fails the export. Distinct archive paths that
 * the host file system would fold into one entry (case or Unicode normalization) are refused,
 * never merged. On failure only what the helper owns is removed (its staging and records, and
 * the namespace while empty); if that removal fails, `SandboxDirectoryCleanupError` keeps the
 * retry and both errors.
 */
export declare function exportSandboxDirectory(
  sandbox: Sandbox,
  selection: SandboxTreeSelection,
  destination: string,
  options?: SandboxTransferOptions,
): Promise<Readonly<{ directory: string; summary: SandboxTransferSummary }>>;

/**
 * A failed local cleanup of `exportSandboxDirectory`; keep it and call `retryCleanup()` until it
 * succeeds. `cause` is the cleanup's failure.
 */
export declare class SandboxDirectoryCleanupError extends Error {
  /** The committed result, when the cleanup failed after publication; `retryCleanup()` keeps it. */
  readonly publishedDirectory: string | undefined;
  /** The export's own failure, when the export failed and then its cleanup. */
  readonly exportError: unknown;
  retryCleanup(): Promise<void>;
  constructor(message: string, options: { cause: unknown; retryCleanup: () => Promise<void>; publishedDirectory?: string; exportError?: unknown });
}

/** Spill files created exclusively under the canonical absolute `directory`, unlinked at once. */
export declare function createSandboxSpillStore(directory: string): Promise<SandboxDriverSpillStore>;
