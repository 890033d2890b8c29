// The process port of a sandbox: a once-only reservation, and binary Node streams over the
// native process with the policy's stream limits. Backpressure is pull-based end to end.
import { Readable, Writable } from 'node:stream';
import { errorFromDescriptor, SandboxOperationError, SandboxStateError, withSignalReason } from './errors.js';
import { settle } from './driver-port.js';
import { onAbort, parseOperationOptions } from './options.js';
import { deliverPendingFailure, failAfterBuffered, shareFailures } from './readable-failure.js';
import { closeInput, guardInput } from './stdin-guard.js';
import { watchStalls } from './stall-warnings.js';

/**
 * `sandbox.reserveProcess(spec)` over a native owner. `reattachable` (internal, the agentproto
 * provider's daemon) keeps the process's stdin open across attachments. `driverReservation`
 * (a JavaScript driver's) reserves the driver's process with the parsed spec and returns its id.
 */
export function reserveProcess({ owner, spec, context, limits, stopSandbox, reattachable = false, driverReservation }) {
  const reserved = settle(owner.reserveProcess(spec, reattachable), context, errorFromDescriptor);
  const id = driverReservation ? driverReservation(reserved.spec) : reserved.id;
  let entered = false;
  // Bad options throw at the call, as the original's; every other failure rejects.
  const start = (options) => begin(parseOperationOptions(options));
  async function begin({ signal }) {
    if (entered) throw new SandboxStateError('Process startup is once-only and requires ready compute.');
    entered = true;
    const detach = onAbort(signal, () => owner.cancelProcessStart());
    try {
      settle(await owner.startProcess(), context, errorFromDescriptor);
    } catch (error) {
      throw withSignalReason(error, signal);
    } finally {
      detach();
    }
    return processStreams({ owner, context, limits, stopSandbox, sandboxId: owner.id(), openStdin: reattachable });
  }
  return Object.freeze({ id, stopScope: 'sandbox', start, stop: stopSandbox });
}

/**
 * The Node streams over a native process: `owner` is a live owner whose process started, or a
 * process attached again through a recovered owner (the same stream calls). Its stalls are
 * said aloud under `sandboxId`; `openStdin`: stdin stays open by design (a daemon).
 */
export function processStreams({ owner, context, limits, stopSandbox, sandboxId, openStdin = false }) {
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
  const stdin = guardInput(new SandboxStdin({ owner, toError, highWaterMark: limits.highWaterMark }), { limits, stopSandbox, owner });
  const exit = owner.processExit().then((outcome) => Object.freeze(settle(outcome, context, errorFromDescriptor)));
  // The leader exited: its container, and so the guest's stdin, is gone. A caller that already
  // ended stdin keeps its own end's outcome.
  exit.then(
    (fate) => {
      if (stdin.writableEnded) return;
      const why = fate.kind === 'unavailable' ? 'the sandbox stopped' : 'the process exited';
      closeInput(stdin, new SandboxOperationError('cancelled', `${why}: its stdin takes nothing more, what was written was not delivered`));
    },
    () => {},
  );
  const stdout = output('stdout');
  const stderr = output('stderr');
  shareFailures(stdout, stderr);
  watchStalls({ owner, sandboxId, stdin, exit, openStdin });
  return Object.freeze({ stdin, stdout, stderr, exit });
}

/**
 * stdin: `end()` delivers EOF. The queue bound and the quiet close are `guardInput`'s; a write
 * or end the native side refuses closes the stream quietly and fails through its callback.
 */
class SandboxStdin extends Writable {
  #owner;
  #toError;

  constructor({ owner, toError, highWaterMark }) {
    super({ highWaterMark });
    this.#owner = owner;
    this.#toError = toError;
  }

  _write(chunk, _encoding, callback) {
    // Staging with room takes the chunk at once; the acknowledgement still comes on the next
    // tick, so writes made in the same tick queue (and count toward maxBufferedInputBytes) as
    // they would behind a write in flight.
    const tried = this.#owner.processTryWrite(chunk);
    if (!tried.ok) return void process.nextTick(() => this.#refused(tried.error, callback));
    if (tried.value === true) return void process.nextTick(callback);
    this.#owner.processWrite(chunk).then(
      (outcome) => (outcome.ok ? callback() : this.#refused(outcome.error, callback)),
      (error) => this.#refused(undefined, callback, error),
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
      (outcome) => (outcome.ok ? callback() : this.#refused(outcome.error, callback)),
      (error) => this.#refused(undefined, callback, error),
    );
  }

  /**
   * The native side took nothing more: stdin was ended by the owner (the process exited, the
   * sandbox is stopping) or its connection failed. The stream closes quietly with that reason.
   */
  #refused(descriptor, callback, thrown) {
    const error = thrown ?? this.#toError(descriptor);
    // A limit the caller's own writes crossed is its stream's error, as a queue past the staging is.
    if (error instanceof SandboxOperationError && error.code === 'input_limit') return void callback(error);
    const reason =
      error instanceof SandboxStateError
        ? new SandboxOperationError('cancelled', `the process's stdin takes nothing more (${error.message}; the process exited or the sandbox is stopping): what was written was not delivered`, { cause: error })
        : error;
    callback(closeInput(this, reason));
  }
}
