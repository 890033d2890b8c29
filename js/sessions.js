// Sessions (0.4): `sandbox.exec`, `sandbox.run` and `sandbox.files` over a native owner. The
// recipe and command options are parsed natively (each issue names its field), and the bounds,
// the deadline's SIGTERM-then-SIGKILL and run's collection are native
// (src/lifecycle/owner/sessions.rs); paths are judged natively against the guest's roots. This
// file turns those calls into Node streams, Buffers and the contract's errors.
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { errorFromDescriptor, SandboxUnsupportedError, SandboxValidationError, withSignalReason } from './errors.js';
import { settle } from './driver-port.js';
import { onAbort } from './options.js';
import { untilAborted } from './until-aborted.js';
import { processStreams } from './process.js';

const UNSUPPORTED =
  "this backend runs no commands or file calls beside the sandbox's process (its support.sessions is false)";

/**
 * The session members of a started sandbox. `owner` is its native owner; a backend without
 * sessions gets members that throw `SandboxUnsupportedError`.
 */
export function sessionMembers({ owner, context, request, sandboxId }) {
  if (owner?.sessionsSupported?.() !== true) {
    const refuse = () => {
      throw new SandboxUnsupportedError(UNSUPPORTED);
    };
    const files = Object.freeze(Object.fromEntries(FILE_MEMBERS.map((name) => [name, refuse])));
    return { exec: refuse, run: refuse, files };
  }
  const limits = request.policy.streams;
  const toError = (descriptor) => errorFromDescriptor(descriptor, context);

  async function exec(spec, options) {
    const signal = signalOf(options);
    const command = owner.command();
    const detach = onAbort(signal, () => command.abort());
    try {
      settle(await command.start(spec, options, 'exec'), context, errorFromDescriptor);
    } catch (error) {
      detach();
      throw withSignalReason(error, signal);
    }
    // A queue past maxBufferedInputBytes ends this command only (its stopForInputLimit), never
    // the sandbox; a command's stdin may stay open by design (a server), so no stdin warning.
    const streams = processStreams({ owner: command, context, limits, stopSandbox: async () => {}, sandboxId, openStdin: true });
    streams.exit.then(detach, detach);
    const stdin = options?.stdin === false ? null : streams.stdin;
    if (stdin === null) command.processEnd().catch(() => {});
    return Object.freeze({
      id: `cmd-${randomUUID()}`,
      stdin,
      stdout: streams.stdout,
      stderr: streams.stderr,
      exit: streams.exit,
      kill(name = 'SIGTERM') {
        settle(command.kill(name), context, errorFromDescriptor);
      },
    });
  }

  async function run(spec, options) {
    const signal = signalOf(options);
    const input = inputOf(options);
    const command = owner.command();
    const detach = onAbort(signal, () => command.abort());
    try {
      settle(await command.start(spec, options, 'run'), context, errorFromDescriptor);
      const collected = await command.collect(input);
      if (!Buffer.isBuffer(collected.stdout)) throw toError(collected.error);
      return Object.freeze({ exit: Object.freeze(collected.exit), stdout: collected.stdout, stderr: collected.stderr });
    } catch (error) {
      throw withSignalReason(error, signal);
    } finally {
      detach();
    }
  }

  return { exec, run, files: filesOf({ owner, context }) };
}

/** The most `files.read` holds in one Buffer (`READ_MAX_BYTES` in src/binding/files.rs). */
const READ_BYTES_MAX = 1024 ** 3;

const FILE_MEMBERS = ['read', 'readStream', 'write', 'stat', 'list', 'remove', 'mkdir'];

/** `sandbox.files`: each call is one native file call, cancelled by its own signal. */
function filesOf({ owner, context }) {
  const outcomeOf = (outcome) => settle(outcome, context, errorFromDescriptor);
  /** Runs `body(call)` on a fresh native call, under `signal`. */
  async function withCall(signal, body) {
    const call = owner.files();
    const detach = onAbort(signal, () => call.abort());
    try {
      return await body(call);
    } catch (error) {
      throw withSignalReason(error, signal);
    } finally {
      detach();
    }
  }
  const readResult = (result) => {
    if (result === null || Buffer.isBuffer(result)) return result;
    return outcomeOf(result);
  };

  return Object.freeze({
    async read(path, options) {
      checkPath(path);
      const { signal, maxBytes } = fileOptions(options, { maxBytes: 'size' });
      return withCall(signal, async (call) => readResult(await call.read(path, maxBytes ?? -1)));
    },
    async readStream(path, options) {
      checkPath(path);
      const { signal } = fileOptions(options, {});
      const call = owner.files();
      const detach = onAbort(signal, () => call.abort());
      let opened;
      try {
        opened = outcomeOf(await call.readOpen(path));
      } catch (error) {
        detach();
        throw withSignalReason(error, signal);
      }
      if (!opened) {
        detach();
        return null;
      }
      return new Readable({
        read() {
          call.readChunk().then(
            (chunk) => {
              if (chunk === null) {
                detach();
                this.push(null);
              } else if (Buffer.isBuffer(chunk)) this.push(chunk);
              else this.destroy(withSignalReason(errorFromDescriptor(chunk.error, context), signal));
            },
            (error) => this.destroy(error),
          );
        },
        destroy(error, callback) {
          detach();
          call.readClose();
          callback(error);
        },
      });
    },
    async write(path, data, options) {
      checkPath(path);
      const { signal, mode } = fileOptions(options, { mode: 'mode' });
      const source = dataSource(data);
      return withCall(signal, async (call) => {
        outcomeOf(call.writeOpen(path, mode ?? 0o644));
        // The write may end while the source is still producing (an abort, a stop, a refusal):
        // then the source is left, never awaited again, and writeEnd says how the write ended.
        const settled = new AbortController();
        call.writeSettled().then(() => settled.abort(), () => settled.abort());
        const iterator = (source[Symbol.asyncIterator] ?? source[Symbol.iterator]).call(source);
        let failure;
        let exhausted = false;
        try {
          for (;;) {
            let next;
            try {
              next = await untilAborted(iterator.next(), settled.signal, () => ENDED);
            } catch (error) {
              if (error !== ENDED) throw error;
              break;
            }
            if (next.done) {
              exhausted = true;
              break;
            }
            const chunk = next.value;
            if (!(chunk instanceof Uint8Array)) {
              throw new SandboxValidationError([{ code: 'invalid_type', path: ['data'], message: 'an async iterable of data must yield Uint8Array chunks' }]);
            }
            if (chunk.byteLength === 0) continue;
            // false: the write ended already (aborted, refused, failed); writeEnd says why.
            if (!outcomeOf(await call.writeChunk(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)))) break;
          }
        } catch (error) {
          failure = error;
        } finally {
          // A source left before its end is closed (a file stream's descriptor with it); never
          // awaited: a source that never yields again never answers.
          if (!exhausted) Promise.resolve(iterator.return?.()).catch(() => {});
        }
        const ended = await call.writeEnd(failure === undefined ? undefined : `the data source failed: ${failure?.message ?? failure}`);
        if (failure !== undefined) throw failure;
        outcomeOf(ended);
      });
    },
    async stat(path, options) {
      checkPath(path);
      const { signal } = fileOptions(options, {});
      return withCall(signal, async (call) => {
        const stat = outcomeOf(await call.stat(path));
        return stat === null ? null : Object.freeze({ ...stat, size: BigInt(stat.size) });
      });
    },
    async list(path, options) {
      checkPath(path);
      const { signal } = fileOptions(options, {});
      return withCall(signal, async (call) => {
        const entries = outcomeOf(await call.list(path));
        return entries === null ? null : Object.freeze(entries.map((entry) => Object.freeze(entry)));
      });
    },
    async remove(path, options) {
      checkPath(path);
      const { signal, recursive } = fileOptions(options, { recursive: 'boolean' });
      return withCall(signal, async (call) => outcomeOf(await call.remove(path, recursive === true)));
    },
    async mkdir(path, options) {
      checkPath(path);
      const { signal, recursive } = fileOptions(options, { recursive: 'boolean' });
      return withCall(signal, async (call) => {
        outcomeOf(await call.mkdir(path, recursive === true));
      });
    },
  });
}

function checkPath(path) {
  if (typeof path !== 'string') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['path'], message: `expected a string path, received ${path === null ? 'null' : typeof path}` }]);
  }
}

/** The caller's signal, checked before anything starts; the rest of the options is native. */
function signalOf(options) {
  if (options === null || (options !== undefined && typeof options !== 'object')) return undefined;
  const signal = options?.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['options', 'signal'], message: 'expected an AbortSignal' }]);
  }
  return signal;
}

/** run's `input`: a string (UTF-8) or bytes, written then EOF; absent: EOF at once. */
function inputOf(options) {
  const input = options?.input;
  if (input === undefined) return undefined;
  if (typeof input === 'string') return Buffer.from(input, 'utf8');
  if (input instanceof Uint8Array) return Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  throw new SandboxValidationError([{ code: 'invalid_type', path: ['options', 'input'], message: 'expected a string or a Uint8Array' }]);
}

/** What a write's wait on its source rejects with once the write ended. */
const ENDED = Symbol('the write ended');

/** write's data: a string (UTF-8), bytes, or an async iterable of Uint8Array chunks. */
function dataSource(data) {
  if (typeof data === 'string') return [Buffer.from(data, 'utf8')];
  if (data instanceof Uint8Array) return [data];
  if (data !== null && typeof data === 'object' && typeof data[Symbol.asyncIterator] === 'function') return data;
  throw new SandboxValidationError([{ code: 'invalid_type', path: ['data'], message: 'expected a string, a Uint8Array or an async iterable of Uint8Array' }]);
}

/**
 * A file call's options: `signal` and the fields `shape` names (`size`: a safe integer 0..1 GiB,
 * `mode`: an integer in 0..0o7777, `boolean`), every other key refused, each issue naming its field.
 */
function fileOptions(options, shape) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['options'], message: 'expected an options object' }]);
  }
  const issues = [];
  const parsed = {};
  for (const key of Object.keys(options)) {
    const value = options[key];
    if (value === undefined) continue;
    const at = ['options', key];
    if (key === 'signal') {
      if (!(value instanceof AbortSignal)) issues.push({ code: 'invalid_type', path: at, message: 'expected an AbortSignal' });
      else parsed.signal = value;
      continue;
    }
    const kind = shape[key];
    if (kind === undefined) issues.push({ code: 'unknown_field', path: at, message: `unknown field ${key}` });
    else if (kind === 'boolean') {
      if (typeof value !== 'boolean') issues.push({ code: 'invalid_type', path: at, message: 'expected a boolean' });
      else parsed[key] = value;
    } else if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      issues.push({ code: 'invalid_type', path: at, message: 'expected a safe integer' });
    } else if (kind === 'size' && value < 0) {
      issues.push({ code: 'too_small', path: at, message: `must be at least 0, received ${value}` });
    } else if (kind === 'size' && value > READ_BYTES_MAX) {
      issues.push({ code: 'too_large', path: at, message: `must be at most ${READ_BYTES_MAX} (1 GiB; use readStream beyond it), received ${value}` });
    } else if (kind === 'mode' && (value < 0 || value > 0o7777)) {
      issues.push({ code: 'invalid_value', path: at, message: `must be a file mode between 0 and 0o7777, received ${value}` });
    } else parsed[key] = value;
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  return parsed;
}
