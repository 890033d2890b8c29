// withSandbox: start, run the callback within its budget, always attempt destruction.
import { SandboxOperationError, SandboxRunError, SandboxValidationError } from './errors.js';
import { onAbort } from './options.js';
import { parseSandboxRecoveryPolicy } from './parsers.js';

/** The callback's budget when the caller names none: one hour. */
export const WITH_SANDBOX_DEFAULT_BUDGET_MS = 3_600_000;
const LONGEST_TIMER_MS = 2 ** 31 - 1;

const RUN_OPTIONS = new Set(['recovery', 'signal', 'budgetMs']);

/** `{ recovery, signal?, budgetMs? }`: every problem at once, each naming its field. */
function parseRunOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([
      { code: 'required', path: ['options'], message: "withSandbox's fourth argument, options with a recovery policy, is required: { recovery: { kind: 'in_process' } }" },
    ]);
  }
  const { recovery, signal, budgetMs = WITH_SANDBOX_DEFAULT_BUDGET_MS } = options;
  const issues = [];
  // Checked here with the backends' own parser, so a problem names withSandbox's options.
  try {
    parseSandboxRecoveryPolicy(recovery);
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    for (const issue of error.issues) {
      const message = issue.path.length === 0 ? `options.recovery ({ kind: 'in_process' } or { kind: 'persisted', persist }): ${issue.message}` : issue.message;
      issues.push({ ...issue, path: ['options', 'recovery', ...issue.path], message });
    }
  }
  for (const key of Object.keys(options)) {
    if (!RUN_OPTIONS.has(key)) issues.push({ code: 'unknown_field', path: ['options', key], message: `unknown field ${key}` });
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    issues.push({ code: 'invalid_type', path: ['options', 'signal'], message: 'expected an AbortSignal' });
  }
  if (typeof budgetMs !== 'number' || !Number.isSafeInteger(budgetMs) || budgetMs < 1) {
    issues.push({ code: 'invalid_value', path: ['options', 'budgetMs'], message: 'must be a positive safe integer of milliseconds' });
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  return { recovery, signal, budgetMs };
}

/**
 * Settles like `work`, or rejects with `deadline_exceeded` once `budgetMs` passed (exactly, also
 * past a single Node timer's range), or with `cancelled` once `signal` aborts. The timer and the
 * listener are removed either way.
 */
function withinBudget(work, budgetMs, signal) {
  let timer;
  let detach = () => {};
  const interrupted = new Promise((_, reject) => {
    const due = Date.now() + budgetMs;
    const arm = () => {
      const wait = due - Date.now();
      if (wait <= 0) reject(new SandboxOperationError('deadline_exceeded', `the withSandbox callback did not settle within its budget of ${budgetMs} ms; the sandbox is destroyed`));
      else timer = setTimeout(arm, Math.min(wait, LONGEST_TIMER_MS));
    };
    arm();
    detach = onAbort(signal, () =>
      reject(new SandboxOperationError('cancelled', 'the withSandbox run was cancelled through its signal; the sandbox is destroyed', { cause: signal.reason })),
    );
  });
  return Promise.race([work, interrupted]).finally(() => {
    clearTimeout(timer);
    detach();
  });
}

/** See index.d.ts. */
export async function withSandbox(backend, request, callback, options) {
  if (typeof callback !== 'function') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['callback'], message: 'expected a function' }]);
  }
  const { recovery, signal, budgetMs } = parseRunOptions(options);
  const reservation = backend.reserve(request, recovery);
  let failed = false;
  let primaryError;
  let result;
  try {
    const sandbox = await reservation.start(signal === undefined ? undefined : { signal });
    const work = (async () => callback(sandbox))();
    // A callback that outlives its budget keeps running, but its sandbox is destroyed below.
    work.catch(() => {});
    result = await withinBudget(work, budgetMs, signal);
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
