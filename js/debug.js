// Debug output the Node way: `NODE_DEBUG=native-sandbox` (util.debuglog) prints one line per
// lifecycle step (start, stop, destroy, reconcile), process start and exit, and transfer, with its
// outcome and duration, and a transfer's counts. Never a value a caller passed (no token, no
// environment value, no path, no file contents): ids, step names, counts, error classes and codes.
import { debuglog } from 'node:util';

const log = debuglog('native-sandbox');

/**
 * How an error shows in a line: one of this package's classes with its code; anything else (a
 * caller's callback threw it) as such, since its name or code may carry the caller's data.
 */
const failure = (error) =>
  typeof error?.name === 'string' && /^Sandbox[A-Za-z]*Error$/.test(error.name)
    ? `${error.name}${typeof error.code === 'string' ? ` ${error.code}` : ''}`
    : "an error of the caller's";

/**
 * `work()`'s promise, with a line when it settles: `<subject> <step> ok <ms> ms` (plus what
 * `describe(value)` adds) or `<subject> <step> failed (<class> <code>) <ms> ms`. Without
 * NODE_DEBUG it is `work()` itself.
 */
export function traced(subject, step, work, describe = () => '') {
  if (!log.enabled) return work();
  // A subject may be computed only when a line is written (never on the caller's path otherwise).
  if (typeof subject === 'function') {
    try {
      subject = subject();
    } catch {
      subject = '(unknown sandbox)';
    }
  }
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let pending;
  try {
    pending = Promise.resolve(work());
  } catch (error) {
    log('%s %s failed (%s) %d ms', subject, step, failure(error), elapsed());
    throw error;
  }
  return pending.then(
    (value) => {
      const detail = describe(value);
      log('%s %s ok%s %d ms', subject, step, detail === '' ? '' : ` ${detail}`, elapsed());
      return value;
    },
    (error) => {
      log('%s %s failed (%s) %d ms', subject, step, failure(error), elapsed());
      throw error;
    },
  );
}

/** A transfer summary's counts for a line. */
export const transferCounts = (summary) => `${summary?.files ?? 0} files, ${summary?.directories ?? 0} directories, ${summary?.fileBytes ?? 0} bytes`;

/** A process fate for a line: its kind and code or signal (no output). */
export function traceExit(subject, exit) {
  if (!log.enabled) return;
  const started = performance.now();
  Promise.resolve(exit).then(
    (fate) => log('%s process exit %s %d ms', subject, [fate?.kind, fate?.code ?? fate?.signal ?? fate?.reason].filter((part) => part !== undefined).join(' '), Math.round(performance.now() - started)),
    (error) => log('%s process exit failed (%s)', subject, failure(error)),
  );
}

/** A stalled process stream (see stall-warnings.js): its name only. */
export function traceStall(subject, stream) {
  log('%s process %s stalled', subject, stream);
}
