// importTree and exportTree over a native owner: entries and bytes cross one at a time, with
// the caller's signal and deadline observed at every step.
import { errorFromDescriptor, SandboxOperationError, SandboxStateError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { parseTransferOptions } from './parsers.js';

function observer(options) {
  const controller = new AbortController();
  const { signal, deadlineAt } = options;
  const onAbort = () => controller.abort(new SandboxOperationError('cancelled', 'the transfer was cancelled through its signal'));
  if (signal) signal.addEventListener('abort', onAbort, { once: true });
  let timer;
  if (deadlineAt !== undefined) {
    const wait = deadlineAt - Date.now();
    const fire = () => controller.abort(new SandboxOperationError('deadline_exceeded', 'the transfer deadline elapsed'));
    if (wait <= 0) fire();
    else timer = setTimeout(fire, Math.min(wait, 2 ** 31 - 1));
  }
  return {
    signal: controller.signal,
    check() {
      if (controller.signal.aborted) throw controller.signal.reason;
    },
    close() {
      if (signal) signal.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
    },
  };
}

function entryIssue(index, field, code, message) {
  return new SandboxValidationError([{ code, path: [index, field], message }]);
}

export function checkedEntry(entry, index) {
  if (entry === null || typeof entry !== 'object') throw new SandboxValidationError([{ code: 'invalid_type', path: [index], message: 'expected a tree entry object' }]);
  if (entry.kind !== 'directory' && entry.kind !== 'file') throw entryIssue(index, 'kind', 'invalid_value', "expected 'directory' or 'file'");
  if (typeof entry.path !== 'string') throw entryIssue(index, 'path', 'invalid_type', 'expected a path string');
  if (entry.kind === 'directory') return entry;
  const { byteLength } = entry;
  if (typeof byteLength === 'bigint') {
    if (byteLength < 0n || byteLength >= 2n ** 64n) throw entryIssue(index, 'byteLength', 'too_small', 'must be a nonnegative 64-bit amount');
  } else if (typeof byteLength === 'number') {
    if (!Number.isFinite(byteLength)) throw entryIssue(index, 'byteLength', 'not_finite', 'must be finite');
    if (!Number.isInteger(byteLength)) throw entryIssue(index, 'byteLength', 'not_integer', 'must be an integer');
    if (!Number.isSafeInteger(byteLength)) throw entryIssue(index, 'byteLength', 'unsafe_integer', 'must be a safe integer');
    if (byteLength < 0) throw entryIssue(index, 'byteLength', 'too_small', 'must be at least 0');
  } else {
    throw entryIssue(index, 'byteLength', 'invalid_type', 'expected a number or bigint');
  }
  if (typeof entry.executable !== 'boolean') throw entryIssue(index, 'executable', 'invalid_type', 'expected a boolean');
  if (typeof entry.open !== 'function') throw entryIssue(index, 'open', 'invalid_type', 'expected a function');
  return entry;
}

function asBuffer(chunk, index) {
  if (!(chunk instanceof Uint8Array)) throw entryIssue(index, 'open', 'invalid_type', 'the body yielded something other than a Uint8Array');
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** `sandbox.importTree(entries, options)` over a native owner. */
export async function importTree({ owner, context }, entries, options) {
  const parsed = parseTransferOptions(options);
  const watch = observer(parsed);
  const step = async (promise) => {
    const outcome = await promise;
    watch.check();
    return settle(outcome, context, errorFromDescriptor);
  };
  try {
    watch.check();
    // Admitted synchronously, so concurrent calls are admitted in the order they were made.
    settle(owner.admitTransfer('import'), context, errorFromDescriptor);
    settle(await owner.importBegin({ quotas: parsed.quotas }), context, errorFromDescriptor);
    let index = 0;
    try {
      for await (const raw of entries) {
        watch.check();
        const entry = checkedEntry(raw, index);
        if (entry.kind === 'directory') {
          await step(owner.importDirectory(index, entry.path));
        } else {
          await step(owner.importFileBegin(index, entry.path, BigInt(entry.byteLength), entry.executable));
          const body = entry.open({ signal: watch.signal });
          if (body === null || (typeof body[Symbol.asyncIterator] !== 'function' && typeof body[Symbol.iterator] !== 'function')) {
            throw entryIssue(index, 'open', 'invalid_type', 'open() must return a (sync or async) iterable of Uint8Array');
          }
          for await (const chunk of body) {
            watch.check();
            await step(owner.importChunk(asBuffer(chunk, index)));
          }
          await step(owner.importFileEnd());
        }
        index += 1;
      }
      watch.check();
      return Object.freeze(settle(await owner.importFinish(), context, errorFromDescriptor));
    } catch (error) {
      await owner.importAbort();
      throw error;
    }
  } finally {
    watch.close();
  }
}

/** The once-only byte iterable of one exported file. */
function fileBytes(owner, context, path) {
  let taken = false;
  let pending = false;
  const state = { drained: false };
  const iterable = {
    [Symbol.asyncIterator]() {
      if (taken) throw new SandboxStateError(`the bytes of ${path} can be read once only`);
      taken = true;
      return {
        async next() {
          if (pending) throw new SandboxStateError(`concurrent reads of ${path} are not allowed`);
          if (state.drained) return { done: true, value: undefined };
          pending = true;
          try {
            const chunk = await owner.exportRead();
            if (chunk === null) {
              state.drained = true;
              return { done: true, value: undefined };
            }
            if (!Buffer.isBuffer(chunk)) throw errorFromDescriptor(chunk.error, context);
            return { done: false, value: chunk };
          } finally {
            pending = false;
          }
        },
        async return() {
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { iterable: Object.freeze(iterable), state };
}

/** `sandbox.exportTree(selection, consume, options)` over a native owner. */
export async function exportTree({ owner, context }, selection, consume, options) {
  const parsed = parseTransferOptions(options);
  if (typeof consume !== 'function') throw new SandboxValidationError([{ code: 'invalid_type', path: ['consume'], message: 'expected a function' }]);
  const watch = observer(parsed);
  try {
    watch.check();
    settle(owner.admitExport(selection), context, errorFromDescriptor);
    settle(await owner.exportBegin({ quotas: parsed.quotas }), context, errorFromDescriptor);
    try {
      for (;;) {
        const meta = settle(await owner.exportNext(), context, errorFromDescriptor);
        watch.check();
        if (meta === null) break;
        if (meta.kind === 'directory') {
          await consume(Object.freeze({ kind: 'directory', path: meta.path }));
        } else {
          const body = fileBytes(owner, context, meta.path);
          await consume(Object.freeze({ kind: 'file', path: meta.path, byteLength: meta.byteLength, executable: meta.executable, bytes: body.iterable }));
          if (!body.state.drained) {
            // An empty file needs no pull; anything else must be read to its end.
            const rest = await owner.exportRead();
            if (rest !== null) {
              throw new SandboxOperationError('stream_failure', `the consumer returned before reading all bytes of ${meta.path}`);
            }
          }
        }
        watch.check();
      }
      return Object.freeze(settle(await owner.exportFinish(), context, errorFromDescriptor));
    } catch (error) {
      await owner.exportAbort();
      throw error;
    }
  } finally {
    watch.close();
  }
}
