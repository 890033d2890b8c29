/**
 * native-sandbox/conformance: the backend conformance suite. `runSandboxConformance` registers
 * `node:test` tests (call it at the top level of a test file) that hold a backend to the contract
 * through its public face: states and once-only start, joined and retried stop/destroy,
 * `withSandbox`, transfers (round trips, quotas at and past their bounds, a link the guest makes),
 * the process (binary streams, EOF, exit, stream limits, execution deadline), the effective
 * policy, reconcile, and, through `census()`, that nothing is left behind.
 */
import type { SandboxBackend } from './index.js';

export interface SandboxConformanceGuest {
  /** An absolute path of a POSIX shell in the guest; the suite runs `shell -c <script>`. */
  readonly shell: string;
}

export interface SandboxConformanceOptions {
  /** Names the suite's `describe` block. */
  readonly name: string;
  /** Makes the backend under test, once, before the suite's first test. */
  createBackend(): SandboxBackend | Promise<SandboxBackend>;
  readonly guest: SandboxConformanceGuest;
  /**
   * What the backend holds on its engine now (container IDs, volume names, directories, process
   * groups: any strings). After the suite it must list exactly what it listed before.
   */
  census?(): readonly string[] | Promise<readonly string[]>;
}

/** Registers the suite; throws `SandboxValidationError` naming any bad option. */
export declare function runSandboxConformance(options: SandboxConformanceOptions): void;
