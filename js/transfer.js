// importTree and exportTree over a native owner, with the caller's signal and deadline observed
// at every step: an import's steps are taken at once and cross to the engine in batches, an
// export's entries and bodies cross to JavaScript in batches.
import { reportProgress } from './progress.js';
import { errorFromDescriptor, SandboxOperationError, SandboxStateError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { parseTransferOptions } from './parsers.js';
import { exactBody } from './exact-body.js';
import { watchTransfer } from './transfer-watch.js';

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

/**
 * The caller's signal or deadline already ended before entry: the admitted transfer is released
 * unentered and the call rejects, as the original does.
 */
export function preEntryRejection(parsed) {
  if (parsed.signal?.aborted) return new SandboxOperationError('cancelled', 'Sandbox file transfer was cancelled before entry.', { cause: parsed.signal.reason });
  if (parsed.deadlineAt !== undefined && Number(parsed.deadlineAt) <= Date.now()) {
    return new SandboxOperationError('deadline_exceeded', 'Sandbox file transfer deadline elapsed before entry.');
  }
  return undefined;
}

/**
 * `sandbox.importTree(entries, options)` over a native owner. Options and state are checked and
 * the import admitted synchronously (so a wrong state throws, and concurrent calls are admitted
 * in call order); only what happens after admission rejects.
 */
export function importTree({ owner, context, stop }, entries, options) {
  const parsed = parseTransferOptions(options);
  return enterTransfer({ owner, context }, () => owner.admitTransfer('import'), parsed, (ticket) =>
    runImport({ owner, context, stop }, entries, parsed, ticket),
  );
}

/**
 * Admits a transfer at the call (`admit` returns the native outcome; a refusal throws), then
 * either rejects without entering (a signal already aborted, a deadline already past: the
 * admission is released unentered) or runs it with its ticket.
 */
export function enterTransfer({ owner, context }, admit, parsed, run) {
  const ticket = settle(admit(), context, errorFromDescriptor);
  const early = preEntryRejection(parsed);
  if (early) {
    owner.endTransfer(ticket, false);
    return Promise.reject(early);
  }
  return run(ticket);
}

/**
 * The watch of an admitted transfer, tied to its native admission: the owner's interruption
 * (stop, destroy) ends the watch, and the caller's signal or deadline cancels every pending
 * native step. `step(promise)` awaits one native step within the watch and settles its outcome.
 */
export function watchAdmitted({ owner, context }, parsed, ticket) {
  const watch = watchTransfer(parsed);
  owner.transferEnded(ticket).then(
    (descriptor) => {
      if (descriptor) watch.interrupt(errorFromDescriptor(descriptor, context));
    },
    () => {},
  );
  const onAbort = () => {
    const reason = watch.signal.reason;
    if (watch.byCaller) owner.cancelTransfer(ticket, reason?.code === 'deadline_exceeded', String(reason?.message ?? 'the transfer was interrupted'));
  };
  if (watch.signal.aborted) onAbort();
  else watch.signal.addEventListener('abort', onAbort, { once: true });
  const step = async (promise) => settle(await watch.race(promise), context, errorFromDescriptor);
  return { watch, step };
}

/**
 * The caller observes a transfer's work (`actual`), which runs on by itself: an interruption
 * (its signal, its deadline, a stop, a destroy) rejects the call at once, while the work still
 * owns what it entered (the caller's source and bodies, its `consume`, a driver's transfer)
 * until each settled, and only then releases the transfer slot, as the original's owner does.
 * `onInterrupt` runs when the call was answered by an interruption.
 */
export function observeTransfer(watch, actual, onInterrupt = () => {}) {
  actual.catch(() => {});
  return watch.race(actual).catch((error) => {
    if (watch.signal.aborted && error === watch.signal.reason) onInterrupt();
    throw error;
  });
}

/**
 * Iterates a sync or async iterable of the caller's. Each pull is awaited until it settles (an
 * interrupted transfer still owns it), then the watch is checked; `close()` returns the source's
 * `return()`, awaited the same way.
 */
function ownedIterator(watch, iterable, notIterable) {
  const open = iterable?.[Symbol.asyncIterator] ?? iterable?.[Symbol.iterator];
  if (typeof open !== 'function') throw notIterable();
  const iterator = open.call(iterable);
  return {
    async next() {
      const next = await iterator.next();
      watch.check();
      return next;
    },
    async close() {
      try {
        await iterator.return?.();
      } catch {
        // A source whose return() fails is closed as far as the transfer is concerned.
      }
    },
  };
}

function runImport({ owner, context, stop }, entries, parsed, ticket) {
  const { watch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  // Interrupted by its caller: the sandbox is stopped, as the original does.
  return observeTransfer(watch, importWork({ owner, context }, entries, parsed, ticket, watch, step), () => {
    if (watch.byCaller) stop?.().catch(() => {});
  });
}

/** `onProgress` of a native transfer: the owner's running counts, polled. */
export function nativeProgress({ owner }, parsed, ticket, watch) {
  return reportProgress({
    onProgress: parsed.onProgress,
    read: () => owner.transferProgress(),
    fail: (error) => {
      watch.interrupt(error);
      owner.cancelTransfer(ticket, false, 'the onProgress callback threw');
    },
  });
}

async function importWork({ owner, context }, entries, parsed, ticket, watch, step) {
  let source;
  let body;
  let progress;
  let summary;
  try {
    await step(owner.importBegin({ quotas: parsed.quotas }));
    progress = nativeProgress({ owner }, parsed, ticket, watch);
    source = ownedIterator(watch, entries, () => new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected a (sync or async) iterable of tree entries' }]));
    // Each step is checked and taken at once, natively (the same error at the same step as
    // ever); what the steps took crosses to the engine in one awaited drain when the step says
    // one is due: per 64 KiB of archive, full ledger batch, or 256 steps (each drain turns the
    // event loop, so a deadline or a signal ends even a body of endless empty chunks).
    const drainDue = (outcome) => settle(outcome, context, errorFromDescriptor) === true;
    for (let index = 0; ; index += 1) {
      const next = await source.next();
      if (next.done) break;
      const entry = checkedEntry(next.value, index);
      if (entry.kind === 'directory') {
        if (drainDue(owner.importDirectoryNow(index, entry.path))) await step(owner.importDrain());
        continue;
      }
      if (drainDue(owner.importFileNow(index, entry.path, BigInt(entry.byteLength), entry.executable))) await step(owner.importDrain());
      body = ownedIterator(watch, entry.open({ signal: watch.signal }), () =>
        entryIssue(index, 'open', 'invalid_type', 'open() must return a (sync or async) iterable of Uint8Array'),
      );
      for (;;) {
        const chunk = await body.next();
        if (chunk.done) break;
        if (drainDue(owner.importChunkNow(asBuffer(chunk.value, index)))) await step(owner.importDrain());
      }
      body = undefined;
      if (drainDue(owner.importFileEndNow())) await step(owner.importDrain());
    }
    source = undefined;
    watch.check();
    summary = Object.freeze(await step(owner.importFinish()));
  } catch (error) {
    progress?.stop();
    // The caller's iterators are closed and their closing awaited: the import owns them until then.
    await body?.close();
    await source?.close();
    // Released and fenced: an admitted import that failed is never replayed.
    await owner.importAbort(ticket);
    throw error;
  } finally {
    watch.close();
  }
  // Done: the last report carries the totals (a callback that throws then fails the call).
  progress.finish(summary);
  return summary;
}

/**
 * The body of one file of a native export: the chunks its batch brought (`chunks`, views of the
 * batch's bytes), then, when the batch stopped inside it, the rest through `exportRead`. A
 * consumer that outlived its export (interrupted or failed) reads nothing more: the engine's
 * bytes now may belong to another transfer.
 */
function fileBytes({ owner, context, watch }, meta, chunks, failure) {
  let next = 0;
  return exactBody(meta.path, meta.byteLength, async () => {
    watch.check();
    if (next < chunks.length) return chunks[next++];
    if (meta.complete) return null;
    // The batch stopped inside this body: where its read failed, or at its size.
    if (failure) throw failure;
    const chunk = await watch.race(owner.exportRead());
    if (chunk !== null && !Buffer.isBuffer(chunk)) throw errorFromDescriptor(chunk.error, context);
    return chunk;
  });
}

/** The chunks of each entry of a batch, as views of the batch's one Buffer. */
function chunksOf(batch) {
  let offset = 0;
  return batch.entries.map((meta) =>
    meta.chunks.map((length) => {
      const chunk = batch.bytes.subarray(offset, offset + length);
      offset += length;
      return chunk;
    }),
  );
}

/**
 * `sandbox.exportTree(selection, consume, options)` over a native owner: options, `consume`, the
 * selection and the state are checked synchronously; only what happens after admission rejects.
 */
export function exportTree({ owner, context }, selection, consume, options) {
  const parsed = parseTransferOptions(options);
  if (typeof consume !== 'function') throw new SandboxValidationError([{ code: 'invalid_type', path: ['consume'], message: 'expected a function' }]);
  return enterTransfer({ owner, context }, () => owner.admitExport(selection), parsed, (ticket) =>
    runExport({ owner, context }, consume, parsed, ticket),
  );
}

function runExport({ owner, context }, consume, parsed, ticket) {
  const { watch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  return observeTransfer(watch, exportWork({ owner, context }, consume, parsed, ticket, watch, step));
}

async function exportWork({ owner, context }, consume, parsed, ticket, watch, step) {
  let progress;
  let summary;
  try {
    try {
      // A failed open released the admission itself; the abort below then finds nothing.
      await step(owner.exportBegin({ quotas: parsed.quotas }));
      progress = nativeProgress({ owner }, parsed, ticket, watch);
      // Entries and their bodies cross in batches (about chunkBytes of bodies each); each
      // entry still reaches the consumer only after the one before it returned, and a failure
      // read with a batch comes after the entries before it, where a one-by-one read has it.
      // The consumer's every call is awaited until it settles: the export owns it until then.
      for (;;) {
        const batch = await watch.race(owner.exportNextBatch());
        if (batch.ok === false) throw errorFromDescriptor(batch.error, context);
        const failure = batch.failure ? errorFromDescriptor(batch.failure, context) : undefined;
        const chunks = chunksOf(batch);
        for (const [index, meta] of batch.entries.entries()) {
          if (meta.kind === 'directory') {
            await consume(Object.freeze({ kind: 'directory', path: meta.path }));
          } else {
            const body = fileBytes({ owner, context, watch }, meta, chunks[index], failure);
            await consume(Object.freeze({ kind: 'file', path: meta.path, byteLength: meta.byteLength, executable: meta.executable, bytes: body.iterable }));
            // An interruption meanwhile is the reason, not the bytes it left unread.
            watch.check();
            if (!body.state.drained) {
              throw new SandboxOperationError('stream_failure', `the consumer returned before reading all bytes of ${meta.path}`);
            }
          }
          watch.check();
        }
        if (batch.end) break;
        // The next entry failed (not a body: that failure is its body's).
        if (failure && batch.entries.at(-1)?.complete !== false) throw failure;
      }
      summary = Object.freeze(await step(owner.exportFinish()));
    } catch (error) {
      progress?.stop();
      await owner.exportAbort(ticket);
      throw error;
    }
  } finally {
    watch.close();
  }
  progress.finish(summary);
  return summary;
}
