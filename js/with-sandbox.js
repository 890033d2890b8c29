// withSandbox: start, run the callback within its budget, always attempt destruction.
import { SandboxOperationError, SandboxRunError, SandboxValidationError } from './errors.js';

/** The callback's budget when the caller names none: one hour. */
export const WITH_SANDBOX_DEFAULT_BUDGET_MS = 3_600_000;
const LONGEST_TIMER_MS = 2 ** 31 - 1;

function budgetOf(options) {
  const { budgetMs = WITH_SANDBOX_DEFAULT_BUDGET_MS } = options;
  if (typeof budgetMs !== 'number' || !Number.isSafeInteger(budgetMs) || budgetMs < 1) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['options', 'budgetMs'], message: 'must be a positive safe integer of milliseconds' }]);
  }
  return budgetMs;
}

/**
 * Settles like `work`, or rejects with `deadline_exceeded` once `budgetMs` passed (exactly, also
 * past a single Node timer's range). The timer is cleared either way.
 */
function withinBudget(work, budgetMs) {
  let timer;
  const expired = new Promise((_, reject) => {
    const due = Date.now() + budgetMs;
    const arm = () => {
      const wait = due - Date.now();
      if (wait <= 0) reject(new SandboxOperationError('deadline_exceeded', `the withSandbox callback did not settle within its budget of ${budgetMs} ms; the sandbox is destroyed`));
      else timer = setTimeout(arm, Math.min(wait, LONGEST_TIMER_MS));
    };
    arm();
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/** See index.d.ts. */
export async function withSandbox(backend, request, callback, options) {
  if (typeof callback !== 'function') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['callback'], message: 'expected a function' }]);
  }
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'required', path: ['options'], message: 'options with a recovery policy are required' }]);
  }
  const budgetMs = budgetOf(options);
  const { recovery, signal } = options;
  const reservation = backend.reserve(request, recovery);
  let failed = false;
  let primaryError;
  let result;
  try {
    const sandbox = await reservation.start(signal === undefined ? undefined : { signal });
    const work = (async () => callback(sandbox))();
    // A callback that outlives its budget keeps running, but its sandbox is destroyed below.
    work.catch(() => {});
    result = await withinBudget(work, budgetMs);
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
