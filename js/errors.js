// The error classes of the contract. Every class is a real Error subclass with its own name.
import { shared } from './shared.js';

/**
 * The classes, defined once per process (shared.js): every installed copy of the package exports
 * these very objects, so an error from one copy is `instanceof` the other's class.
 */
function defineErrorClasses() {
  class SandboxOperationError extends Error {
    constructor(code, message, options) {
      super(message, options);
      this.name = 'SandboxOperationError';
      this.code = code;
    }
  }

  class SandboxValidationError extends Error {
    constructor(issues) {
      // As the original: every field of each issue is kept as given, with a frozen copy of its path.
      const list = Array.from(issues ?? [], (issue) => Object.freeze({ ...issue, path: Object.freeze(Array.from(issue.path ?? [])) }));
      // The original's message; every detail is in `issues` (each with its path, code and message).
      super('Invalid sandbox input');
      this.name = 'SandboxValidationError';
      this.issues = Object.freeze(list);
    }
  }

  class SandboxUnsupportedError extends Error {
    constructor(message) {
      super(message);
      this.name = 'SandboxUnsupportedError';
    }
  }

  class SandboxStateError extends Error {
    constructor(message) {
      super(message);
      this.name = 'SandboxStateError';
    }
  }

  class SandboxCleanupError extends Error {
    constructor(message, options) {
      super(message, { cause: options?.cause });
      this.name = 'SandboxCleanupError';
      this.owner = options.owner;
      this.operation = options.operation;
    }

    /** Retries the exact cleanup that failed, on the same owner. */
    retryCleanup() {
      return this.owner[this.operation]();
    }
  }

  class SandboxStartError extends Error {
    constructor(message, options) {
      super(message, { cause: options?.cause });
      this.name = 'SandboxStartError';
      this.owner = options?.owner;
    }
  }

  class SandboxRunError extends Error {
    constructor(options) {
      super('Sandbox operation and cleanup both failed', { cause: options?.primaryError });
      this.name = 'SandboxRunError';
      this.primaryError = options?.primaryError;
      this.cleanupError = options?.cleanupError;
      this.owner = options?.owner;
    }

    /** Retries destruction on the same owner; the original errors stay as they were. */
    retryCleanup() {
      return this.owner.destroy();
    }
  }

  return {
    SandboxOperationError,
    SandboxValidationError,
    SandboxUnsupportedError,
    SandboxStateError,
    SandboxCleanupError,
    SandboxStartError,
    SandboxRunError,
  };
}

export const {
  SandboxOperationError,
  SandboxValidationError,
  SandboxUnsupportedError,
  SandboxStateError,
  SandboxCleanupError,
  SandboxStartError,
  SandboxRunError,
} = shared('errors', defineErrorClasses);

/**
 * Turns a native error descriptor into the contract's error class. `context.owner` is the cleanup
 * owner start and cleanup errors keep; `context.errors` maps a driver error `ref` back to the very
 * object the JavaScript driver threw.
 */
export function errorFromDescriptor(descriptor, context) {
  const cause = () => (descriptor.cause ? errorFromDescriptor(descriptor.cause, context) : undefined);
  switch (descriptor.kind) {
    case 'state':
      return new SandboxStateError(descriptor.message);
    case 'unsupported':
      return new SandboxUnsupportedError(descriptor.message);
    case 'validation':
      return new SandboxValidationError(descriptor.issues);
    case 'operation': {
      const inner = cause();
      return new SandboxOperationError(descriptor.code, descriptor.message, inner === undefined ? undefined : { cause: inner });
    }
    case 'driver':
      if (descriptor.ref !== undefined && context.errors?.has(descriptor.ref)) return context.errors.get(descriptor.ref);
      return new SandboxOperationError('driver_failure', descriptor.message);
    case 'start':
      return new SandboxStartError(descriptor.message, { cause: cause(), owner: context.owner });
    case 'cleanup':
      return new SandboxCleanupError(descriptor.message, { cause: cause(), owner: context.owner, operation: descriptor.operation });
    default:
      return new SandboxOperationError('driver_failure', String(descriptor.message ?? 'unknown native failure'));
  }
}

/** The messages of a cancellation the caller's signal asked for (raised natively). */
const SIGNAL_CANCELLATION = /through its signal|cancelled before entry|reconciliation was cancelled/;

/**
 * `error` with the caller's signal reason kept as the `cause` of the cancellation that signal
 * asked for (the error itself, or a start error's cause): the contract's error stays what it
 * is, and the caller's reason stays reachable. Anything else (a stop's cancellation that won
 * the race, a failure) is left as it is.
 */
export function withSignalReason(error, signal) {
  const cancelled = error instanceof SandboxStartError ? error.cause : error;
  if (
    signal?.aborted &&
    cancelled instanceof SandboxOperationError &&
    cancelled.code === 'cancelled' &&
    cancelled.cause === undefined &&
    SIGNAL_CANCELLATION.test(cancelled.message)
  ) {
    Object.defineProperty(cancelled, 'cause', { value: signal.reason, writable: true, configurable: true, enumerable: false });
  }
  return error;
}
