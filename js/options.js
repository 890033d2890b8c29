// Operation options (`{ signal? }`) of start, reconcile and the process port.
import { SandboxValidationError } from './errors.js';

export function parseOperationOptions(options) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected an options object' }]);
  }
  const issues = [];
  for (const key of Object.keys(options)) {
    if (key !== 'signal') issues.push({ code: 'unknown_field', path: [key], message: `unknown field ${key}` });
  }
  const { signal } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    issues.push({ code: 'invalid_type', path: ['signal'], message: 'expected an AbortSignal' });
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  return { signal };
}

/** Calls `onAbort` when `signal` aborts (at once if it already has); returns the detacher. */
export function onAbort(signal, onAbortCallback) {
  if (signal === undefined) return () => {};
  if (signal.aborted) {
    onAbortCallback();
    return () => {};
  }
  signal.addEventListener('abort', onAbortCallback, { once: true });
  return () => signal.removeEventListener('abort', onAbortCallback);
}
