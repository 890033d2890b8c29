// createSandboxBackend: a JavaScript driver driven by the one Rust owner.
import { errorFromDescriptor, SandboxStateError, SandboxValidationError } from './errors.js';
import { traced } from './debug.js';
import { settle } from './driver-port.js';
import { native } from './native.js';
import { parseOperationOptions } from './options.js';
import { ownDriverReservation, reconcileWithDriver } from './owner.js';
import {
  parseSandboxId,
  parseSandboxRecoveryPolicy,
  parseSandboxRecoveryRecord,
  parseSandboxRequest,
  parseSandboxSupport,
} from './parsers.js';

function requireFunctions(driver) {
  if (driver === null || typeof driver !== 'object') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected a driver object' }]);
  }
  const issues = [];
  for (const name of ['reserve', 'reconcile']) {
    if (typeof driver[name] !== 'function') {
      issues.push({ code: 'invalid_type', path: [name], message: `driver.${name} must be a function` });
    }
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
}

function isFreshReservation(reserved, seen) {
  return (
    reserved !== null &&
    typeof reserved === 'object' &&
    !('then' in reserved) &&
    !seen.has(reserved) &&
    typeof reserved.start === 'function' &&
    typeof reserved.stop === 'function' &&
    typeof reserved.destroy === 'function'
  );
}

/**
 * `parse(input)`, whose issues about the input as a whole (an empty path) name `argument`; the
 * paths stay the original's.
 */
function asArgument(argument, parse, input) {
  try {
    return parse(input);
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    throw new SandboxValidationError(error.issues.map((issue) => (issue.path.length === 0 ? { ...issue, message: `${argument}: ${issue.message}` } : issue)));
  }
}

/**
 * What every backend does before its driver is asked anything: parse the request and the
 * recovery policy, and refuse what the declared support cannot enforce.
 */
export function admitReservation(request, recovery, support) {
  const parsed = asArgument('request (the first argument of reserve)', parseSandboxRequest, request);
  const policy = asArgument("recovery (the second argument of reserve: { kind: 'in_process' } or { kind: 'persisted', persist })", parseSandboxRecoveryPolicy, recovery);
  settle(native.checkSupported(parsed, support), { owner: undefined, errors: undefined }, errorFromDescriptor);
  return { parsed, policy };
}

/** See index.d.ts of native-sandbox/backend. */
export function createSandboxBackend(driver) {
  requireFunctions(driver);
  const support = parseSandboxSupport(driver.support);
  if (support.sessions) {
    // A driver has no hooks for commands and file calls beside its process in this version.
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['support', 'sessions'], message: 'a JavaScript driver cannot offer sessions in this version: say false (or leave it out)' }]);
  }
  const seen = new WeakSet();
  const noOwner = { owner: undefined, errors: undefined };
  return Object.freeze({
    support,
    reserve(request, recovery) {
      const { parsed, policy } = admitReservation(request, recovery, support);
      const reserved = driver.reserve(parsed);
      if (!isFreshReservation(reserved, seen)) {
        throw new SandboxStateError('A backend must return a fresh synchronous inert reservation with cleanup ownership.');
      }
      seen.add(reserved);
      const id = parseSandboxId(reserved.id);
      const record = parseSandboxRecoveryRecord(reserved.recoveryRecord);
      settle(native.checkInitialRecord(record, id, support), noOwner, errorFromDescriptor);
      return ownDriverReservation({ request: parsed, id, record, recovery: policy, reserved });
    },
    async reconcile(record, options) {
      const parsed = parseSandboxRecoveryRecord(record);
      const { signal } = parseOperationOptions(options);
      return traced(parsed.sandboxId, 'reconcile', () => reconcileWithDriver({ driver, record: parsed, support, signal }), (answer) => answer.kind);
    },
  });
}
