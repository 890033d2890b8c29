// The rules every process stdin follows, on the Docker backend and over a JavaScript driver
// alike: its queue never grows past `policy.streams.maxBufferedInputBytes`, and once the guest
// can take nothing more (its process exited, the sandbox is stopping, its stdin was closed or
// failed) the stream closes quietly: what still waited and everything written later fails
// through its own callback with a `SandboxOperationError`, `end()` settles the same way, and no
// 'error' event reaches a caller that only writes.
import { SandboxOperationError } from './errors.js';

const closedWith = new WeakMap();

/**
 * Wraps `stdin.write` and `stdin.end` with those rules. `stopSandbox` stops the sandbox when the
 * queue limit is crossed (the original's rule: the caller wrote past the bound it set);
 * `owner.stopForInputLimit`, where the owner has it, first records that limit as why the execution
 * ended (`exit`'s `cause`).
 */
export function guardInput(stdin, { limits, stopSandbox, owner }) {
  const write = stdin.write.bind(stdin);
  const end = stdin.end.bind(stdin);
  stdin.write = (chunk, encoding, callback) => {
    const done = typeof encoding === 'function' ? encoding : callback;
    const closed = closedWith.get(stdin);
    if (closed !== undefined) {
      if (typeof done === 'function') process.nextTick(done, closed);
      return false;
    }
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8') : chunk?.byteLength ?? 0;
    if (!stdin.destroyed && stdin.writableLength + length > limits.maxBufferedInputBytes) {
      const error = new SandboxOperationError(
        'input_limit',
        `stdin would queue ${stdin.writableLength + length} bytes, past policy.streams.maxBufferedInputBytes (${limits.maxBufferedInputBytes}); the sandbox is being stopped`,
      );
      stdin.destroy(error);
      owner?.stopForInputLimit?.(error.message);
      stopSandbox().catch(() => {});
      if (typeof done === 'function') process.nextTick(done, error);
      return false;
    }
    // A write queued behind one in flight when the stream closed quietly gets its reason too,
    // not Node's generic ERR_STREAM_DESTROYED.
    const reasoned = typeof done === 'function' ? (error) => done(error?.code === 'ERR_STREAM_DESTROYED' ? closedWith.get(stdin) ?? error : error) : done;
    return typeof encoding === 'function' ? write(chunk, reasoned) : write(chunk, encoding, reasoned);
  };
  stdin.end = (...args) => {
    const closed = closedWith.get(stdin);
    if (closed === undefined) return end(...args);
    // A destroyed Writable never calls an `end` callback given after its destruction.
    const done = args.find((arg) => typeof arg === 'function');
    if (typeof done === 'function') process.nextTick(done, closed);
    return stdin;
  };
  return stdin;
}

/**
 * Closes a guarded `stdin` quietly because the guest takes nothing more: destroyed without an
 * error (so a failure still delivered to a waiting callback is no 'error' event), and from now
 * on `error` answers every write and end. The first reason is the one kept. Returns the error
 * the stream now answers with.
 */
export function closeInput(stdin, error) {
  if (!closedWith.has(stdin)) closedWith.set(stdin, error);
  if (!stdin.destroyed) stdin.destroy();
  return closedWith.get(stdin);
}

/** Whether `stdin` was closed by `closeInput`. */
export function inputClosed(stdin) {
  return closedWith.has(stdin);
}
