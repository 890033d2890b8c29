// One wait raced against an AbortSignal that leaves nothing behind. `Promise.race` against a
// long-lived promise that never settles (a transfer's "aborted") adds a reaction to it per call,
// and each reaction keeps the value that passed through: an export's every batch stayed
// reachable until the transfer's watch was collected. Here the listener is removed as soon as
// the wait settles, and the only reaction is on the awaited promise itself.

/**
 * Settles like `promise`, or rejects with `reason()` as soon as `signal` aborts (at once when it
 * already has). Without a signal it is `promise`. `promise`'s own later rejection is handled.
 */
export function untilAborted(promise, signal, reason = () => signal.reason) {
  const awaited = Promise.resolve(promise);
  awaited.catch(() => {});
  if (!signal) return awaited;
  if (signal.aborted) return Promise.reject(reason());
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(reason());
    signal.addEventListener('abort', onAbort, { once: true });
    awaited.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
