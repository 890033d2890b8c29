// withSandbox: start, run the callback, always attempt destruction.
import { SandboxRunError, SandboxValidationError } from './errors.js';

/** See index.d.ts. */
export async function withSandbox(backend, request, callback, options) {
  if (typeof callback !== 'function') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['callback'], message: 'expected a function' }]);
  }
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'required', path: ['options'], message: 'options with a recovery policy are required' }]);
  }
  const { recovery, signal } = options;
  const reservation = backend.reserve(request, recovery);
  let failed = false;
  let primaryError;
  let result;
  try {
    const sandbox = await reservation.start(signal === undefined ? undefined : { signal });
    result = await callback(sandbox);
  } catch (error) {
    failed = true;
    primaryError = error;
  }
  try {
    await reservation.destroy();
  } catch (cleanupError) {
    if (failed) throw new SandboxRunError({ primaryError, cleanupError, owner: reservation });
    throw cleanupError;
  }
  if (failed) throw primaryError;
  return result;
}
