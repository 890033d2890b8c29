// The watch over one transfer: the caller's signal and deadline, and the owner's own
// interruption (a stop or destroy), become one AbortSignal whose reason is the contract's error
// (`cancelled` or `deadline_exceeded`). `race` makes any wait (the caller's source, the consumer,
// the engine) end at that moment. A deadline of any distance is exact: a Node timer holds at
// most 2^31-1 ms, so a far one is re-armed until it is due.
import { SandboxOperationError, SandboxStateError } from './errors.js';
import { untilAborted } from './until-aborted.js';

const LONGEST_TIMER_MS = 2 ** 31 - 1;

export function watchTransfer({ signal, deadlineAt }) {
  const controller = new AbortController();
  let byCaller = false;
  let closed = false;
  let timer;
  const end = (reason, caller) => {
    if (controller.signal.aborted) return;
    byCaller = caller;
    // Ended: the deadline's timer holds the event loop no longer (the work may outlive it).
    if (timer) clearTimeout(timer);
    controller.abort(reason);
  };
  const onAbort = () => end(new SandboxOperationError('cancelled', 'the transfer was cancelled through its signal', { cause: signal.reason }), true);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  if (deadlineAt !== undefined) {
    const due = Number(deadlineAt);
    const arm = () => {
      const wait = due - Date.now();
      if (wait <= 0) end(new SandboxOperationError('deadline_exceeded', 'the transfer deadline elapsed'), true);
      else timer = setTimeout(arm, Math.min(wait, LONGEST_TIMER_MS));
    };
    arm();
  }
  return {
    signal: controller.signal,
    /** Whether the caller's signal or deadline (rather than the owner) ended the transfer. */
    get byCaller() {
      return byCaller;
    },
    check() {
      if (controller.signal.aborted) throw controller.signal.reason;
      if (closed) throw new SandboxStateError('the transfer has ended');
    },
    /** Ends the transfer now with `reason` (the owner's stop or destroy). */
    interrupt(reason) {
      end(reason, false);
    },
    /**
     * Settles like `promise`, or rejects as soon as the transfer is interrupted; once settled,
     * nothing of the wait (nor the value it delivered) is kept by the watch.
     */
    race(promise) {
      return untilAborted(promise, controller.signal);
    },
    /** The transfer ended: later checks (a consumer that outlived it) fail; the signal stays. */
    close() {
      closed = true;
      signal?.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
    },
  };
}
