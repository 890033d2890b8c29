// The contract's parsers: validation happens in the Rust core; this layer freezes the result,
// reattaches the live objects the core only type-checks (signal, persist), and throws.
import { SandboxValidationError } from './errors.js';
import { deepFreeze } from './freeze.js';
import { native } from './native.js';

function parsed(outcome) {
  if (!outcome.ok) throw new SandboxValidationError(outcome.issues);
  return outcome.value;
}

export function parseSandboxRequest(input) {
  return deepFreeze(parsed(native.parseSandboxRequest(input)));
}

export function parseSandboxProcessSpec(input) {
  return deepFreeze(parsed(native.parseSandboxProcessSpec(input)));
}

export function parseSandboxRelativePath(input) {
  return parsed(native.parseSandboxRelativePath(input));
}

export function parseSandboxGuestPath(input) {
  return parsed(native.parseSandboxGuestPath(input));
}

export function parseSandboxRecoveryRecord(input) {
  return deepFreeze(parsed(native.parseSandboxRecoveryRecord(input)));
}

export function parseSandboxRecoveryPolicy(input) {
  const policy = parsed(native.parseSandboxRecoveryPolicy(input));
  if (policy.kind === 'persisted') {
    return Object.freeze({ kind: 'persisted', persist: input.persist });
  }
  return Object.freeze(policy);
}

export function parseSandboxSupport(input) {
  return deepFreeze(parsed(native.parseSandboxSupport(input)));
}

export function parseSandboxEffectivePolicy(input) {
  return deepFreeze(parsed(native.parseSandboxEffectivePolicy(input)));
}

export function parseTransferOptions(input) {
  const options = parsed(native.parseTransferOptions(input));
  if (input !== undefined && input.signal !== undefined) options.signal = input.signal;
  if (input !== undefined && input.onProgress !== undefined) options.onProgress = input.onProgress;
  deepFreeze(options.quotas);
  return Object.freeze(options);
}

export function parseSandboxId(input) {
  return parsed(native.parseSandboxId(input));
}

export function parseSandboxProcessId(input) {
  return parsed(native.parseSandboxProcessId(input));
}
