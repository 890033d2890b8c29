// The process port of a JavaScript driver: the Rust owner admits the one process and runs its
// execution deadline; the driver's raw streams are wrapped here with the policy's stream limits
// (the Docker backend applies the same limits in Rust, src/process/io.rs, where each staged piece
// of output also counts its bookkeeping against maxBufferedOutputBytes; here Node's stream buffers
// count the driver's Buffers by their bytes).
import { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { errorFromDescriptor, SandboxOperationError, SandboxStateError, SandboxUnsupportedError } from './errors.js';
import { settle } from './driver-port.js';
import { parseOperationOptions } from './options.js';
import { parseSandboxProcessId } from './parsers.js';
import { deliverPendingFailure, failAfterBuffered, holdFailure, shareFailures } from './readable-failure.js';
import { closeInput, guardInput } from './stdin-guard.js';

/**
 * `sandbox.reserveProcess(spec)` for a JavaScript driver with a `reserveProcess` port. As the
 * original owner does: the driver's start gets an owner signal that aborts on stop (and so on the
 * execution deadline, which stops the sandbox), its startup is observed within
 * `deadlines.startupMs` and the caller's signal (a start that fails or is interrupted fences the
 * sandbox and stops it), readiness is checked again once it started, and a stop closes the
 * driver's streams when it begins and waits for them (`processSlot.process`, which the owner's
 * stop calls); `exit` reports a receipt the driver lost as `unavailable` once the stop settled
 * (`RECEIPT_AFTER_STOP_MS` later), or at most that long past `cleanupMs` after it began.
 */
export function reserveDriverProcess({ owner, context, readyPort, limits, stopSandbox, startupMs, cleanupMs, processSlot }, input) {
  if (typeof readyPort?.reserveProcess !== 'function') {
    throw new SandboxUnsupportedError('reserveProcess: the driver has no process port (reserveProcess)');
  }
  const { spec } = settle(owner.reserveProcess(input), context, errorFromDescriptor);
  const reserved = readyPort.reserveProcess(Object.freeze({ ...spec, args: Object.freeze([...spec.args]), env: Object.freeze({ ...spec.env }) }));
  if (reserved === null || typeof reserved !== 'object' || typeof reserved.start !== 'function') {
    throw new SandboxStateError('A driver process reservation must have start().');
  }
  const id = parseSandboxProcessId(reserved.id);
  let entered = false;
  // Bad options throw at the call, as the original's; every other failure rejects.
  const start = (options) => begin(parseOperationOptions(options));
  async function begin({ signal }) {
    if (entered) throw new SandboxStateError('Process startup is once-only and requires ready compute.');
    entered = true;
    settle(owner.enterExternalProcess(), context, errorFromDescriptor);
    if (signal?.aborted) {
      // The driver is never asked; as any failed start, the sandbox is fenced and stopped.
      owner.fenceProcess();
      stopSandbox().catch(() => {});
      throw new SandboxOperationError('cancelled', 'Process startup was cancelled before entry.', { cause: signal.reason });
    }
    const controller = new AbortController();
    const slot = { controller, stopping: () => {}, stopped: () => {}, close: async () => {} };
    processSlot.process = slot;
    const actual = Promise.resolve().then(() => reserved.start({ signal: controller.signal }));
    let raw;
    try {
      raw = await observeStartup(actual, startupMs, signal, controller.signal);
    } catch (error) {
      controller.abort(error);
      owner.fenceProcess();
      stopSandbox().catch(() => {});
      // Whatever the driver still starts is closed as soon as it arrives.
      actual.then((late) => closeRaw(late), () => {});
      throw error;
    }
    slot.close = () => closeRaw(raw);
    let streams;
    try {
      const limited = limitedStreams(raw, limits, stopSandbox, owner);
      streams = limited.streams;
      slot.stopping = () => {
        limited.stopping();
        // A driver stop that never settles still ends a lost receipt's wait, at the cleanup bound.
        limited.stoppedBy(cleanupMs);
      };
      slot.stopped = limited.stopped;
      // Past the close wait, what the driver never closed is left: its streams fail instead.
      slot.close = async () => {
        try {
          await closeRaw(raw);
        } finally {
          limited.leave();
        }
      };
    } catch (error) {
      // A driver that started something other than the process port's streams: fenced and
      // stopped first, then what it started is closed (within CLOSE_WAIT_MS).
      owner.fenceProcess();
      stopSandbox().catch(() => {});
      await slot.close();
      throw error;
    }
    if (controller.signal.aborted || owner.state().kind !== 'ready') {
      // The stop entered before these streams existed did not read them on.
      slot.stopping();
      await slot.close();
      throw new SandboxOperationError('cancelled', 'Process startup settled after its admission was closed.');
    }
    return streams;
  }
  return Object.freeze({ id, stopScope: 'sandbox', start, stop: stopSandbox });
}

/** Waits for the driver's start within `startupMs`, the caller's signal and the owner's. */
function observeStartup(actual, startupMs, callerSignal, ownerSignal) {
  let timer;
  const cleanups = [];
  const interrupted = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new SandboxOperationError('deadline_exceeded', `process startup was not observed to settle within ${startupMs} ms`)), startupMs);
    for (const [signal, reason] of [
      [callerSignal, () => new SandboxOperationError('cancelled', 'process startup was cancelled through its signal', { cause: callerSignal.reason })],
      [ownerSignal, () => ownerSignal.reason],
    ]) {
      if (!signal) continue;
      const onAbort = () => reject(reason());
      signal.addEventListener('abort', onAbort, { once: true });
      cleanups.push(() => signal.removeEventListener('abort', onAbort));
    }
  });
  return Promise.race([actual, interrupted]).finally(() => {
    clearTimeout(timer);
    for (const cleanup of cleanups) cleanup();
  });
}

/**
 * How long closing a driver's streams may take: a stream that never reports closing is left,
 * and what still waits on it fails with `cancelled`.
 */
const CLOSE_WAIT_MS = 5_000;
/** How long output still being read may take to reach its own end before it is destroyed. */
const OUTPUT_END_WAIT_MS = 250;

/**
 * Destroys a driver's raw streams and waits until each has closed, `CLOSE_WAIT_MS` at most.
 * Output first gets `OUTPUT_END_WAIT_MS` to end by itself: a consumer that keeps reading then
 * loses nothing, while an unread stream cannot hold the stop.
 */
async function closeRaw(raw) {
  const streams = [raw?.stdin, raw?.stdout, raw?.stderr].filter((stream) => stream && typeof stream.destroy === 'function');
  const outputs = [raw?.stdout, raw?.stderr].filter((stream) => stream && typeof stream.destroy === 'function' && !stream.closed && !stream.destroyed);
  await within(
    OUTPUT_END_WAIT_MS,
    Promise.all(outputs.map((stream) => finished(stream).catch(() => {}))),
  );
  const closed = Promise.all(
    streams.map((stream) => {
      if (stream.closed || stream.destroyed) return undefined;
      const ended = finished(stream).catch(() => {});
      stream.destroy();
      return ended;
    }),
  );
  await within(CLOSE_WAIT_MS, closed);
}

/** Waits for `promise`, `ms` at most. */
async function within(ms, promise) {
  let timer;
  const waited = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([promise, waited]);
  clearTimeout(timer);
}

/** How long after its stop settled a driver may still report its process's fate. */
const RECEIPT_AFTER_STOP_MS = 1_000;
/** `unavailable`, with the cause the owner knows for the stop (`exit`'s `cause`). */
function unavailable(owner) {
  const cause = owner.stopCause();
  return Object.freeze(cause === null ? { kind: 'unavailable', reason: 'sandbox_stopped' } : { kind: 'unavailable', reason: 'sandbox_stopped', cause });
}

/** A driver's reported exit as the contract's `SandboxProcessExit` (a frozen copy), or `undefined` if it is none. */
function exitFate(value, owner) {
  if (value === null || typeof value !== 'object') return undefined;
  if (value.kind === 'exited' && Number.isSafeInteger(value.code)) return Object.freeze({ kind: 'exited', code: value.code });
  if (value.kind === 'signaled' && typeof value.signal === 'string' && value.signal !== '') {
    return Object.freeze(value.reason === 'out_of_memory' ? { kind: 'signaled', signal: value.signal, reason: 'out_of_memory' } : { kind: 'signaled', signal: value.signal });
  }
  if (value.kind === 'unavailable' && value.reason === 'sandbox_stopped') return unavailable(owner);
  return undefined;
}

function limitedStreams(raw, limits, stopSandbox, owner) {
  if (!raw || !(raw.stdin instanceof Writable) || !(raw.stdout instanceof Readable) || !(raw.stderr instanceof Readable)) {
    throw new SandboxStateError('A driver process must start with Node stdin, stdout and stderr streams.');
  }
  let outputTotal = 0;
  // Each output's failure (after the bytes it buffered) and its reading on.
  const outputs = [];
  // Past maxOutputBytes: both streams failed once, and the driver's output is read on and
  // discarded (as at a stop, nothing holds the driver's stop).
  let violated = false;
  const violate = (error) => {
    violated = true;
    for (const { fail, readOn } of outputs) {
      fail(error);
      readOn();
    }
    stopSandbox().catch(() => {});
  };
  const output = (source, name) => {
    let ended = false;
    // Node waits for the source: a read is pending (nothing was pushed since it was asked for).
    let pulling = false;
    let stopping = false;
    // Output discarded while stopping (the staging could not hold it).
    let lost = false;
    // Destroyed by the caller (or after its end): the driver's output is read on and dropped,
    // so the process never blocks on a stream nobody reads.
    let gone = false;
    const stream = new Readable({
      highWaterMark: limits.highWaterMark,
      read() {
        if (deliverPendingFailure(this)) return;
        pulling = true;
        source.resume();
      },
      destroy(error, callback) {
        gone = true;
        source.resume();
        callback(error);
      },
    });
    // A failure of this stream comes after the bytes it already buffered: at once for a pending
    // read, else at the next read (a consumer that never reads is never sent it).
    // The first failure is the one delivered; after it the stream never ends as usual.
    let failed = false;
    const fail = (error) => {
      failed = true;
      if (pulling) failAfterBuffered(stream, error);
      else holdFailure(stream, error);
    };
    source.on('data', (chunk) => {
      if (violated) return;
      outputTotal += chunk.length;
      if (limits.maxOutputBytes !== undefined && outputTotal > limits.maxOutputBytes) {
        const message = `the process wrote more than policy.streams.maxOutputBytes (${limits.maxOutputBytes}); the sandbox is being stopped`;
        owner.stopForLimit(true, message);
        violate(new SandboxOperationError('output_limit', message));
        return;
      }
      if (gone) return;
      if (stopping && (lost || stream.readableLength + chunk.length > limits.maxBufferedOutputBytes)) {
        lost = true;
        return;
      }
      pulling = false;
      // Staging bound: stop reading the driver when the consumer falls behind.
      if ((!stream.push(chunk) || stream.readableLength > limits.maxBufferedOutputBytes) && !stopping) source.pause();
    });
    // Compute is stopping: the driver's output is read on, so a driver whose stop waits for it
    // (as an engine waits for an attached client to read) is never held by a consumer that does
    // not read. What the staging cannot hold then is discarded, and its stream fails.
    const readOn = () => {
      stopping = true;
      source.resume();
    };
    const discarded = () =>
      new SandboxOperationError('cancelled', `the sandbox stopped while the process's ${name} was unread: output past the staging (policy.streams.maxBufferedOutputBytes, ${limits.maxBufferedOutputBytes}) was discarded`);
    source.on('end', () => {
      ended = true;
      if (failed) return;
      if (lost) fail(discarded());
      else stream.push(null);
    });
    source.on('error', (error) => fail(error));
    // Closed before its end (a stop closes what is left): the driver may have held more.
    const cut = (why) => {
      if (ended || failed || stream.destroyed) return;
      fail(lost ? discarded() : new SandboxOperationError('cancelled', `the process's ${name} ${why}: what it still held was not delivered`));
    };
    source.on('close', () => cut('was closed before the driver ended it'));
    const leave = () => cut(`did not close within ${CLOSE_WAIT_MS} ms of the stop`);
    outputs.push({ fail, readOn, leave });
    return stream;
  };
  let inputTotal = 0;
  const target = raw.stdin;
  // Waits on the driver's stdin (a drain, the end's callback), each with how to stop waiting:
  // they all fail when that stdin closes or fails, or when a stop leaves it (it never closed), so
  // no write or end waits for ever.
  const waits = new Set();
  // From a stop on, whatever ends the driver's stdin is the stop's doing (its kill, its close).
  let stopped = false;
  const stoppedInput = () => new SandboxOperationError('cancelled', "the sandbox stopped before the driver took the process's stdin: what was written was not delivered");
  const closedInput = () => new SandboxOperationError('cancelled', "the process's stdin was closed: what was written was not delivered");
  const failedInput = (error) => new SandboxOperationError('stream_failure', `writing the process's stdin failed: ${error?.message ?? error}`, { cause: error });
  // What the driver's stdin's own state says ended it: its error, else a close without one.
  const endedInput = (error) => (target.errored ? failedInput(target.errored) : target.destroyed ? closedInput() : failedInput(error));
  // Ends stdin: destroyed first, so what still waited fails through its callback, not as an
  // 'error' event a caller that only wrote may not listen to; the driver's 'error' never reaches
  // the host unhandled.
  const abandonInput = (failure) => {
    const why = closeInput(stdin, stopped ? stoppedInput() : failure);
    for (const wait of [...waits]) wait.settle(why);
  };
  target.on('error', (error) => abandonInput(failedInput(error)));
  target.on('close', () => abandonInput(closedInput()));
  const waitFor = (callback, begin) => {
    const wait = {
      undo: () => {},
      settle(error) {
        // Once only: the first outcome (the driver's, or its stdin's end) is the one delivered.
        if (!waits.delete(wait)) return;
        wait.undo();
        callback(error);
      },
    };
    waits.add(wait);
    wait.undo =
      begin((error) => {
        if (error === undefined || error === null) wait.settle();
        else abandonInput(endedInput(error));
      }) ?? (() => {});
  };
  // The driver's stdin ended before this write or end reached it: it fails as the waits do.
  const failEnded = (callback) => {
    waitFor(callback, () => undefined);
    abandonInput(endedInput());
  };
  const stdin = new Writable({
    highWaterMark: limits.highWaterMark,
    write(chunk, _encoding, callback) {
      inputTotal += chunk.length;
      if (limits.maxStdinBytes !== undefined && inputTotal > limits.maxStdinBytes) {
        const message = `stdin would exceed policy.streams.maxStdinBytes (${limits.maxStdinBytes}); the sandbox is being stopped`;
        owner.stopForLimit(false, message);
        stopSandbox().catch(() => {});
        callback(new SandboxOperationError('input_limit', message));
        return;
      }
      if (target.destroyed) return void failEnded(callback);
      if (target.write(chunk)) return void callback();
      waitFor(callback, (settle) => {
        const drained = () => settle();
        target.once('drain', drained);
        return () => target.off('drain', drained);
      });
    },
    final(callback) {
      if (target.destroyed) return void failEnded(callback);
      waitFor(callback, (settle) => void target.end(settle));
    },
    // Destroyed (by the caller, a failure or a stop) before it finished: the driver's stdin ends
    // (EOF) after what was already handed to it.
    destroy(error, callback) {
      if (!stdin.writableFinished && !target.destroyed && !target.writableEnded) target.end();
      callback(error);
    },
  });
  guardInput(stdin, { limits, stopSandbox, owner });
  // The leader's fate as the driver reports it; a receipt the driver lost (its exit rejected,
  // was never given, or is no fate) is `unavailable` once the sandbox stopped, as the Docker
  // backend reports a lost wait: `exit` never fabricates a fate, and never stays pending past
  // a stop.
  let receiptLost;
  const lost = new Promise((resolve) => {
    receiptLost = () => resolve(unavailable(owner));
  });
  const reported = Promise.resolve(raw.exit).then((value) => exitFate(value, owner), () => undefined);
  const exit = Promise.race([reported.then((fate) => fate ?? lost), lost]);
  // Timers that end a lost receipt's wait: they hold the event loop (a caller awaiting `exit`
  // must get it) and are cleared once `exit` settled.
  const receiptTimers = new Set();
  let fated = false;
  const stoppedBy = (ms) => {
    if (!fated) receiptTimers.add(setTimeout(receiptLost, ms));
  };
  exit.then(() => {
    fated = true;
    for (const timer of receiptTimers) clearTimeout(timer);
  });
  const stdout = output(raw.stdout, 'stdout');
  const stderr = output(raw.stderr, 'stderr');
  shareFailures(stdout, stderr);
  const streams = Object.freeze({ stdin, stdout, stderr, exit });
  // After a stop's close: outputs the driver never closed fail, and stdin takes nothing more.
  const leave = () => {
    for (const output of outputs) output.leave();
    abandonInput(stoppedInput());
  };
  // As the original's stop: the process's streams close when the stop begins; stdin at once.
  const stopping = () => {
    stopped = true;
    for (const { readOn } of outputs) readOn();
    abandonInput(stoppedInput());
  };
  // The driver may report the fate its stop caused a moment after the stop settled.
  return { streams, stopping, leave, stoppedBy, stopped: () => stoppedBy(RECEIPT_AFTER_STOP_MS) };
}
