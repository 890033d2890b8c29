// The process port of a sandbox: a once-only reservation, and binary Node streams over the
// native process with the policy's stream limits. Backpressure is pull-based end to end.
import { Readable, Writable } from 'node:stream';
import { errorFromDescriptor, SandboxOperationError, SandboxStateError } from './errors.js';
import { settle } from './driver-port.js';
import { onAbort, parseOperationOptions } from './options.js';
import { deliverPendingFailure, failAfterBuffered } from './readable-failure.js';

/**
 * `sandbox.reserveProcess(spec)` over a native owner that has a process port. `reattachable`
 * (internal, the agentproto provider's daemon) keeps the process's stdin open across
 * attachments.
 */
export function reserveProcess({ owner, spec, context, limits, stopSandbox, reattachable = false }) {
  const reserved = settle(owner.reserveProcess(spec, reattachable), context, errorFromDescriptor);
  let entered = false;
  // Bad options throw at the call, as the original's; every other failure rejects.
  const start = (options) => begin(parseOperationOptions(options));
  async function begin({ signal }) {
    if (entered) throw new SandboxStateError('Process startup is once-only.');
    entered = true;
    const detach = onAbort(signal, () => owner.cancelProcessStart());
    try {
      settle(await owner.startProcess(), context, errorFromDescriptor);
    } finally {
      detach();
    }
    return processStreams({ owner, context, limits, stopSandbox });
  }
  return Object.freeze({ id: reserved.id, stopScope: 'sandbox', start, stop: stopSandbox });
}

/**
 * The Node streams over a native process: `owner` is a live owner whose process started, or a
 * process attached again through a recovered owner (the same stream calls).
 */
export function processStreams({ owner, context, limits, stopSandbox }) {
  const toError = (descriptor) => errorFromDescriptor(descriptor, context);
  const output = (name) =>
    new Readable({
      highWaterMark: limits.highWaterMark,
      read(size) {
        if (deliverPendingFailure(this)) return;
        // Everything staged, up to the staging size: a fast stream costs one crossing per
        // batch instead of one per engine frame, and each Buffer is exactly its bytes.
        owner.processRead(name, Math.max(size ?? 0, limits.highWaterMark, limits.maxBufferedOutputBytes)).then(
          (chunk) => {
            if (chunk === null) this.push(null);
            else if (Buffer.isBuffer(chunk)) this.push(chunk);
            // After the bytes this stream already buffered.
            else failAfterBuffered(this, toError(chunk.error));
          },
          (error) => failAfterBuffered(this, error),
        );
      },
      // Destroyed by the caller (`pipeline()` after a sink's error, a `break` out of
      // `for await`), or after its end: what the guest still writes there is discarded
      // natively, so it never blocks on a stream nobody reads; the other stream and `exit` go on.
      destroy(error, callback) {
        owner.processDiscard(name).catch(() => {});
        callback(error);
      },
    });
  const stdin = new SandboxStdin({ owner, limits, toError, stopSandbox });
  const exit = owner.processExit().then((outcome) => Object.freeze(settle(outcome, context, errorFromDescriptor)));
  return Object.freeze({ stdin, stdout: output('stdout'), stderr: output('stderr'), exit });
}

/** stdin: `end()` delivers EOF; queued bytes never exceed `maxBufferedInputBytes`. */
class SandboxStdin extends Writable {
  #owner;
  #limits;
  #toError;
  #stopSandbox;

  constructor({ owner, limits, toError, stopSandbox }) {
    super({ highWaterMark: limits.highWaterMark });
    this.#owner = owner;
    this.#limits = limits;
    this.#toError = toError;
    this.#stopSandbox = stopSandbox;
  }

  write(chunk, encoding, callback) {
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8') : chunk?.byteLength ?? 0;
    if (!this.destroyed && this.writableLength + length > this.#limits.maxBufferedInputBytes) {
      const error = new SandboxOperationError(
        'input_limit',
        `stdin would queue ${this.writableLength + length} bytes, past policy.streams.maxBufferedInputBytes (${this.#limits.maxBufferedInputBytes}); the sandbox is being stopped`,
      );
      this.destroy(error);
      this.#stopSandbox().catch(() => {});
      const done = typeof encoding === 'function' ? encoding : callback;
      if (typeof done === 'function') process.nextTick(done, error);
      return false;
    }
    return super.write(chunk, encoding, callback);
  }

  _write(chunk, _encoding, callback) {
    // Staging with room takes the chunk at once; the acknowledgement still comes on the next
    // tick, so writes made in the same tick queue (and count toward maxBufferedInputBytes) as
    // they would behind a write in flight.
    const tried = this.#owner.processTryWrite(chunk);
    if (!tried.ok) return void process.nextTick(callback, this.#toError(tried.error));
    if (tried.value === true) return void process.nextTick(callback);
    this.#owner.processWrite(chunk).then(
      (outcome) => (outcome.ok ? callback() : callback(this.#toError(outcome.error))),
      callback,
    );
  }

  /** Chunks queued while a write was in flight go to the guest as one native write. */
  _writev(chunks, callback) {
    this._write(chunks.length === 1 ? chunks[0].chunk : Buffer.concat(chunks.map(({ chunk }) => chunk)), undefined, callback);
  }

  /** Destroyed (by the caller, or after a failure): the guest's stdin ends (EOF) after what was already handed over. */
  _destroy(error, callback) {
    if (!this.writableFinished) this.#owner.processEnd().catch(() => {});
    callback(error);
  }

  _final(callback) {
    this.#owner.processEnd().then(
      (outcome) => (outcome.ok ? callback() : callback(this.#toError(outcome.error))),
      callback,
    );
  }
}
