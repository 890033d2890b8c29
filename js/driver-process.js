// The process port of a JavaScript driver. Its process runs through the same native process
// streams as the Docker backend's (src/process/: admission, the execution deadline, the stream
// limits and staging, stalls, the exit's cause): the driver's raw Node streams only feed them,
// through a native feed (src/process/external/). Here: output offered event by event (the
// driver's streams pause while the feed's queue is full), stdin written to the driver's as its
// stdin takes it, the reported exit, and the close of the driver's streams at a stop.
import { finished } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { SandboxStateError, SandboxUnsupportedError } from './errors.js';
import { messageOf } from './driver-port.js';
import { native } from './native.js';
import { parseSandboxProcessId } from './parsers.js';
import { reserveProcess } from './process.js';
import { untilAborted } from './until-aborted.js';

/**
 * `sandbox.reserveProcess(spec)` for a JavaScript driver with a `reserveProcess` port: the
 * native owner reserves (and later starts) the process; the driver's reservation is asked with
 * the parsed spec and kept in `ports.reservedProcess` for the port's `startProcess`.
 */
export function reserveDriverProcess({ owner, context, readyPort, limits, stopSandbox, ports }, input) {
  if (typeof readyPort?.reserveProcess !== 'function') {
    throw new SandboxUnsupportedError('reserveProcess: the driver has no process port (reserveProcess)');
  }
  const driverReservation = (spec) => {
    const reserved = readyPort.reserveProcess(Object.freeze({ ...spec, args: Object.freeze([...spec.args]), env: Object.freeze({ ...spec.env }) }));
    if (reserved === null || typeof reserved !== 'object' || typeof reserved.start !== 'function') {
      throw new SandboxStateError('A driver process reservation must have start().');
    }
    const id = parseSandboxProcessId(reserved.id);
    ports.reservedProcess = reserved;
    return id;
  };
  return reserveProcess({ owner, spec: input, context, limits, stopSandbox, driverReservation });
}

/**
 * The driver port's process operations, which the native owner calls: `startProcess` (the
 * driver's start, under an owner signal `abortProcess` aborts), and the feed's wakes
 * (`processInput`, `processRoom`). `ports.process` is the running process the port's stop
 * closes (`closeDriverProcess`). `remember` keeps a driver error for its caller (a ref);
 * `toError` turns a native descriptor into the contract's error.
 */
export function driverProcessHandlers(ports, { remember, toError }) {
  return {
    async startProcess({ feed: token }) {
      const feed = native.takeProcessFeed(token);
      const reserved = ports.reservedProcess;
      if (!feed || !reserved) throw new SandboxStateError('The process start has no reserved driver process.');
      const controller = new AbortController();
      // An abort that came before this start (a stop right after it was entered) still holds.
      if (ports.processAborted !== undefined) controller.abort(ports.processAborted);
      const running = { controller, wakeInput: () => {}, wakeRoom: () => {}, close: async () => {} };
      ports.process = running;
      const actual = Promise.resolve().then(() => reserved.start({ signal: controller.signal }));
      let raw;
      try {
        raw = await untilAborted(actual, controller.signal);
      } catch (error) {
        // Whatever the driver still starts is closed as soon as it arrives.
        actual.then((late) => closeRaw(late), () => {});
        throw error;
      }
      if (!raw || !(raw.stdin instanceof Writable) || !(raw.stdout instanceof Readable) || !(raw.stderr instanceof Readable)) {
        await closeRaw(raw);
        throw new SandboxStateError('A driver process must start with Node stdin, stdout and stderr streams.');
      }
      Object.assign(running, feedFrom(raw, feed, remember));
      if (controller.signal.aborted) {
        // The stop came while the driver started: what it started is closed, and the start fails.
        await running.close();
        throw controller.signal.reason;
      }
      return null;
    },
    abortProcess(reason) {
      const error = toError(reason);
      ports.processAborted ??= error;
      ports.process?.controller.abort(error);
    },
    processInput() {
      ports.process?.wakeInput();
    },
    processRoom() {
      ports.process?.wakeRoom();
    },
  };
}

/**
 * A stop's close of the driver's process (the port's stop calls it as the driver's stop
 * begins): the driver's streams are closed and waited for (`closeRaw`); an output the driver
 * never closed then fails, and its stdin takes nothing more.
 */
export function closeDriverProcess(ports) {
  return ports.process?.close() ?? Promise.resolve();
}

/**
 * How long closing a driver's streams may take: a stream that never reports closing is left,
 * and its process stream fails with `cancelled`.
 */
const CLOSE_WAIT_MS = 5_000;
/**
 * How long output may take to reach its own end at a stop before it is destroyed: twice what an
 * unread stream's output waits for staging space once compute stops (then it is discarded,
 * `ROOM_WAIT_WHILE_STOPPING` in src/process/output_pump.rs), so a driver whose stop waits for
 * its output to be read is read on in time, while an unread stream cannot hold the stop long.
 */
const OUTPUT_END_WAIT_MS = 2 * native.outputRoomWaitWhileStoppingMs();

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

/**
 * Wires the driver's streams to the native feed; returns the running process's wakes and its
 * close. Only the feed holds what the owner decides (limits, staging, failures' order).
 */
function feedFrom(raw, feed, remember) {
  const sources = [raw.stdout, raw.stderr];
  // Offers the feed refused for room, in order: nothing is offered past them. A source whose
  // bytes wait here is paused, so each holds at most one chunk here (its end may follow).
  const queue = [];
  const paused = new Set();
  // The owner reads nothing more: the driver's output is read on and dropped, so its process
  // never blocks on a stream nobody reads.
  let closed = false;
  const drop = () => {
    closed = true;
    queue.length = 0;
    paused.clear();
    for (const source of sources) source.resume();
  };
  const offer = (attempt, source) => {
    if (closed) return;
    if (queue.length === 0) {
      const outcome = attempt();
      if (outcome === 'taken') return;
      if (outcome === 'closed') return void drop();
    }
    queue.push(attempt);
    if (source) {
      source.pause();
      paused.add(source);
    }
  };
  const wakeRoom = () => {
    while (queue.length > 0 && !closed) {
      const outcome = queue[0]();
      if (outcome === 'full') return;
      queue.shift();
      if (outcome === 'closed') return void drop();
    }
    for (const source of paused) source.resume();
    paused.clear();
  };
  // Per output: whether its end, failure or cut was offered (the first one counts).
  const lefts = [];
  for (const [name, source] of [['stdout', raw.stdout], ['stderr', raw.stderr]]) {
    let over = false;
    const last = (attempt) => {
      if (over) return;
      over = true;
      offer(attempt);
    };
    source.on('data', (chunk) => {
      if (over) return;
      let bytes;
      try {
        bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      } catch {
        // Not bytes (an object-mode stream): the stream fails; the host is never thrown at.
        const error = new SandboxStateError(`A driver process's ${name} must carry bytes (Buffers or strings).`);
        last(() => feed.offerFailure(name, remember(error), error.message));
        return;
      }
      offer(() => feed.offer(name, bytes), source);
    });
    source.on('end', () => last(() => feed.offerEnd(name)));
    source.on('error', (error) => last(() => feed.offerFailure(name, remember(error), messageOf(error))));
    // Closed before its end: the driver may have held more.
    source.on('close', () => last(() => feed.offerCut(name, null)));
    lefts.push(() => last(() => feed.offerCut(name, CLOSE_WAIT_MS)));
    if (source.errored) last(() => feed.offerFailure(name, remember(source.errored), messageOf(source.errored)));
    else if (source.readableEnded) last(() => feed.offerEnd(name));
    else if (source.destroyed) last(() => feed.offerCut(name, null));
    // A stream the driver left paused flows too: the feed alone pauses it (while its queue is full).
    else source.resume();
  }

  const target = raw.stdin;
  let ending = false;
  const failed = (error) => feed.inputFailed(remember(error), messageOf(error));
  // Writes what the feed holds for the driver's stdin while that stdin takes it; a full stdin
  // goes on at its 'drain'.
  const wakeInput = () => {
    while (!ending && !target.destroyed && !target.writableNeedDrain) {
      const next = feed.inputTake();
      if (next === null || next === 'over') return;
      if (next === 'end') {
        ending = true;
        target.end((error) => {
          if (!error) feed.inputEnded();
          // What the driver's stdin's own state says ended it: its error, else a close.
          else if (target.errored) failed(target.errored);
          else if (target.destroyed) feed.inputClosed();
          else failed(error);
        });
        return;
      }
      target.write(next);
    }
  };
  target.on('drain', wakeInput);
  target.on('error', failed);
  target.on('close', () => feed.inputClosed());
  if (target.errored) failed(target.errored);
  else if (target.destroyed) feed.inputClosed();
  // Nothing to take yet: the feed now wakes this side when there is.
  wakeInput();

  Promise.resolve(raw.exit).then(
    (fate) => {
      try {
        feed.exit(fate);
      } catch {
        feed.exitLost();
      }
    },
    () => feed.exitLost(),
  );

  const close = async () => {
    try {
      await closeRaw(raw);
    } finally {
      // Past the close wait, what the driver never closed is left: its streams fail instead.
      for (const left of lefts) left();
      feed.inputClosed();
    }
  };
  return { wakeInput, wakeRoom, close };
}
