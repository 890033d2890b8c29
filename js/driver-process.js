// The process port of a JavaScript driver: the Rust owner admits the one process and runs its
// execution deadline; the driver's raw streams are wrapped here with the policy's stream limits
// (the Docker backend applies the same limits in Rust, src/process/io.rs).
import { Readable, Writable } from 'node:stream';
import { errorFromDescriptor, SandboxOperationError, SandboxStateError, SandboxUnsupportedError } from './errors.js';
import { settle } from './driver-port.js';
import { parseOperationOptions } from './options.js';
import { parseSandboxProcessId } from './parsers.js';

/** `sandbox.reserveProcess(spec)` for a JavaScript driver with a `reserveProcess` port. */
export function reserveDriverProcess({ owner, context, readyPort, limits, stopSandbox }, input) {
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
  async function start(options) {
    const { signal } = parseOperationOptions(options);
    if (entered) throw new SandboxStateError('Process startup is once-only.');
    entered = true;
    if (signal?.aborted) throw new SandboxOperationError('cancelled', 'process startup was cancelled before entry');
    settle(owner.enterExternalProcess(), context, errorFromDescriptor);
    let raw;
    try {
      raw = await reserved.start(signal === undefined ? {} : { signal });
    } catch (error) {
      stopSandbox().catch(() => {});
      throw error;
    }
    return limitedStreams(raw, limits, stopSandbox);
  }
  return Object.freeze({ id, stopScope: 'sandbox', start, stop: stopSandbox });
}

function limitedStreams(raw, limits, stopSandbox) {
  if (!raw || !(raw.stdin instanceof Writable) || !(raw.stdout instanceof Readable) || !(raw.stderr instanceof Readable)) {
    throw new SandboxStateError('A driver process must start with Node stdin, stdout and stderr streams.');
  }
  let outputTotal = 0;
  const outputs = [];
  const violate = (error) => {
    for (const stream of outputs) stream.destroy(error);
    stopSandbox().catch(() => {});
  };
  const output = (source) => {
    const stream = new Readable({
      highWaterMark: limits.highWaterMark,
      read() {
        source.resume();
      },
    });
    source.on('data', (chunk) => {
      outputTotal += chunk.length;
      if (limits.maxOutputBytes !== undefined && outputTotal > limits.maxOutputBytes) {
        violate(new SandboxOperationError('output_limit', `the process wrote more than policy.streams.maxOutputBytes (${limits.maxOutputBytes}); the sandbox is being stopped`));
        return;
      }
      // Staging bound: stop reading the driver when the consumer falls behind.
      if (!stream.push(chunk) || stream.readableLength > limits.maxBufferedOutputBytes) source.pause();
    });
    source.on('end', () => stream.push(null));
    source.on('error', (error) => stream.destroy(error));
    outputs.push(stream);
    return stream;
  };
  let inputTotal = 0;
  const target = raw.stdin;
  const stdin = new Writable({
    highWaterMark: limits.highWaterMark,
    write(chunk, _encoding, callback) {
      inputTotal += chunk.length;
      if (limits.maxStdinBytes !== undefined && inputTotal > limits.maxStdinBytes) {
        stopSandbox().catch(() => {});
        callback(new SandboxOperationError('input_limit', `stdin would exceed policy.streams.maxStdinBytes (${limits.maxStdinBytes}); the sandbox is being stopped`));
        return;
      }
      if (target.write(chunk)) callback();
      else target.once('drain', () => callback());
    },
    final(callback) {
      target.end(callback);
    },
  });
  const write = stdin.write.bind(stdin);
  stdin.write = (chunk, encoding, callback) => {
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk?.byteLength ?? 0;
    if (stdin.writableLength + length > limits.maxBufferedInputBytes) {
      const error = new SandboxOperationError('input_limit', `stdin would queue past policy.streams.maxBufferedInputBytes (${limits.maxBufferedInputBytes}); the sandbox is being stopped`);
      stdin.destroy(error);
      stopSandbox().catch(() => {});
      return false;
    }
    return write(chunk, encoding, callback);
  };
  const exit = Promise.resolve(raw.exit).then((value) => Object.freeze({ ...value }));
  return Object.freeze({ stdin, stdout: output(raw.stdout), stderr: output(raw.stderr), exit });
}
