// native-sandbox: contracts, parsers, constants, error classes and withSandbox.
export {
  SandboxCleanupError,
  SandboxOperationError,
  SandboxRunError,
  SandboxStartError,
  SandboxStateError,
  SandboxUnsupportedError,
  SandboxValidationError,
} from './js/errors.js';
export {
  parseSandboxEffectivePolicy,
  parseSandboxGuestPath,
  parseSandboxId,
  parseSandboxProcessId,
  parseSandboxProcessSpec,
  parseSandboxRecoveryPolicy,
  parseSandboxRecoveryRecord,
  parseSandboxRelativePath,
  parseSandboxRequest,
  parseSandboxSupport,
  parseTransferOptions,
} from './js/parsers.js';
export { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_LIMITS } from './js/constants.js';
export { withSandbox } from './js/with-sandbox.js';
export { createSandboxPool } from './js/pool.js';
export { assertSandboxEffectivePolicy, assertSandboxRequestSupported } from './js/policy-checks.js';
export { fileFromBytes } from './js/bytes.js';
export { TransferBody } from './js/transfer-body.js';
