// A transfer's `onProgress({ files, bytes })`: called at most every `PROGRESS_MS` while the counts
// moved, and once at the end with the summary's totals (`files`, `fileBytes`), bigints as the
// summaries are. A callback that throws fails the transfer with its error (`fail(error)` ends the
// transfer's work), never an unhandled exception.

/** The least time between two calls while a transfer runs. */
export const PROGRESS_MS = 100;

const NONE = Object.freeze({ finish() {}, stop() {} });

/**
 * Starts reporting `read()` (`{ files, bytes }`, or `null` before anything counts) to
 * `onProgress`; `finish(summary)` reports the totals and stops, `stop()` stops without a report.
 */
export function reportProgress({ onProgress, read, fail }) {
  if (onProgress === undefined) return NONE;
  let last;
  let failed;
  const call = (progress) => {
    if (failed !== undefined) return;
    try {
      onProgress(Object.freeze(progress));
    } catch (error) {
      failed = error;
      fail(error);
    }
  };
  const timer = setInterval(() => {
    let now;
    try {
      now = read();
    } catch {
      return; // no count to report now
    }
    if (now === null || now === undefined) return;
    if (last !== undefined && now.files === last.files && now.bytes === last.bytes) return;
    last = now;
    call({ files: now.files, bytes: now.bytes });
  }, PROGRESS_MS);
  // A report never keeps the host's event loop alive by itself: the transfer's own work does.
  timer.unref?.();
  return {
    finish(summary) {
      clearInterval(timer);
      if (failed !== undefined) throw failed;
      // The transfer is over: a callback that throws now fails the call, nothing else.
      onProgress(Object.freeze({ files: summary.files, bytes: summary.fileBytes }));
    },
    stop() {
      clearInterval(timer);
    },
  };
}
