// importTree and exportTree through a JavaScript driver's ready port. The Rust owner admits the
// transfer; this layer hands the driver validated entries with once-only controlled bodies,
// checks what the driver delivers, keeps the accounting, and runs the spill-backed ledger.
import { reportProgress } from './progress.js';
import { SandboxOperationError, SandboxStateError, SandboxValidationError } from './errors.js';
import { parseSandboxRelativePath, parseTransferOptions } from './parsers.js';
import { exactBody } from './exact-body.js';
import { SpillLedger } from './spill-ledger.js';
import { checkedEntry, enterTransfer, observeTransfer, watchAdmitted } from './transfer.js';

function quotaError(name, limit, what) {
  return new SandboxValidationError([{ code: 'too_large', path: ['quotas', name], message: `${what} exceeds quotas.${name} (${limit})` }]);
}

class Counters {
  constructor(quotas) {
    this.quotas = quotas;
    this.directories = 0n;
    this.files = 0n;
    this.fileBytes = 0n;
  }

  directory() {
    this.directories += 1n;
  }

  file(path, byteLength) {
    const { maxFiles, maxFileBytes, maxTotalBytes } = this.quotas;
    if (maxFileBytes !== undefined && byteLength > maxFileBytes) throw quotaError('maxFileBytes', maxFileBytes, `${path} (${byteLength} bytes)`);
    this.files += 1n;
    this.fileBytes += byteLength;
    if (maxFiles !== undefined && this.files > maxFiles) throw quotaError('maxFiles', maxFiles, `the file count (${this.files})`);
    if (maxTotalBytes !== undefined && this.fileBytes > maxTotalBytes) throw quotaError('maxTotalBytes', maxTotalBytes, `the total file bytes (${this.fileBytes})`);
  }

  /** The driver's summary must agree with what passed through; bigints come back. */
  settle(summary) {
    if (summary === null || typeof summary !== 'object') throw new SandboxStateError('the driver returned no transfer summary');
    const big = (v) => (typeof v === 'bigint' ? v : Number.isSafeInteger(v) ? BigInt(v) : -1n);
    const result = { directories: big(summary.directories), files: big(summary.files), fileBytes: big(summary.fileBytes), archiveBytes: big(summary.archiveBytes) };
    if (result.directories !== this.directories || result.files !== this.files || result.fileBytes !== this.fileBytes || result.archiveBytes < 0n) {
      throw new SandboxStateError('the driver reported a transfer summary that does not match what was transferred');
    }
    const { maxArchiveBytes } = this.quotas;
    if (maxArchiveBytes !== undefined && result.archiveBytes > maxArchiveBytes) throw quotaError('maxArchiveBytes', maxArchiveBytes, `the archive bytes (${result.archiveBytes})`);
    return Object.freeze(result);
  }
}

/** A once-only body that reaches real EOF with exactly `byteLength` bytes of bounded chunks. */
function controlledBody({ open, path, byteLength, chunkBytes, signal, index }) {
  let used = false;
  return Object.freeze({
    async *[Symbol.asyncIterator]() {
      if (used) throw new SandboxStateError(`the body of ${path} can be read once only`);
      used = true;
      let seen = 0n;
      for await (const chunk of open({ signal })) {
        signal.throwIfAborted();
        if (!(chunk instanceof Uint8Array)) throw new SandboxValidationError([{ code: 'invalid_type', path: [index, 'open'], message: `${path}: the body yielded something other than a Uint8Array` }]);
        if (chunk.byteLength > chunkBytes) throw new SandboxValidationError([{ code: 'too_large', path: [index, 'open'], message: `${path}: a chunk of ${chunk.byteLength} bytes is larger than chunkBytes (${chunkBytes})` }]);
        seen += BigInt(chunk.byteLength);
        if (seen > byteLength) throw new SandboxValidationError([{ code: 'too_large', path: [index, 'byteLength'], message: `${path}: the body is longer than its declared byteLength` }]);
        yield chunk;
      }
      if (seen < byteLength) throw new SandboxValidationError([{ code: 'too_small', path: [index, 'byteLength'], message: `${path}: the body ended ${byteLength - seen} bytes short of its declared byteLength` }]);
    },
  });
}

/**
 * The body of one file a driver delivers: its iterator is returned once every byte came. A
 * consumer that outlived its export (interrupted or failed) reads nothing more.
 */
function driverBody(path, byteLength, source, watch) {
  let iterator;
  const pull = async () => {
    watch.check();
    if (iterator === undefined) {
      const open = source?.[Symbol.asyncIterator] ?? source?.[Symbol.iterator];
      if (typeof open !== 'function') throw new SandboxOperationError('stream_failure', `the driver's bytes of ${path} are not iterable`);
      iterator = open.call(source);
    }
    const step = await iterator.next();
    return step.done ? null : step.value;
  };
  return exactBody(path, byteLength, pull, async () => {
    await iterator?.return?.();
  });
}

async function withSpill(readyPort, signal, fn) {
  if (typeof readyPort.openSpill !== 'function') throw new SandboxStateError('the driver has no spill-storage port (openSpill)');
  const store = await readyPort.openSpill({ signal });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * `sandbox.importTree` for a JavaScript driver: options and state are checked and the import
 * admitted synchronously; only what happens after admission rejects.
 */
export function importViaDriver(port, entries, options) {
  if (typeof port.readyPort?.importTree !== 'function') throw new SandboxStateError('the driver has no import port (importTree)');
  const parsed = parseTransferOptions(options);
  return enterTransfer(port, () => port.owner.admitTransfer('import'), parsed, (ticket) => runImport(port, entries, parsed, ticket));
}

function runImport(port, entries, parsed, ticket) {
  const { watch } = watchAdmitted(port, parsed, ticket);
  // Interrupted by its caller: the sandbox is stopped, as the original does.
  return observeTransfer(watch, importWork(port, entries, parsed, ticket, watch), () => {
    if (watch.byCaller) port.stop?.().catch(() => {});
  });
}

/**
 * The import's own work: the driver's `importTree` (and through it the caller's source) is
 * awaited until it settles, also after an interruption, and the slot is released only then.
 */
async function importWork({ owner, readyPort, request }, entries, parsed, ticket, watch) {
  let failed = true;
  let progress;
  try {
    const buffers = request.policy.transfers;
    const counters = new Counters(parsed.quotas);
    progress = driverProgress(parsed, counters, watch);
    const result = await withSpill(readyPort, watch.signal, async (store) => {
      const ledger = new SpillLedger(store, buffers);
      async function* validated() {
        let index = 0;
        for await (const raw of entries) {
          watch.check();
          const entry = checkedEntry(raw, index);
          let path;
          try {
            path = parseSandboxRelativePath(entry.path);
          } catch (error) {
            throw new SandboxValidationError(error.issues.map((issue) => ({ ...issue, path: [index, 'path'] })));
          }
          await ledger.add(path, entry.kind);
          if (entry.kind === 'directory') {
            counters.directory();
            yield Object.freeze({ kind: 'directory', path });
          } else {
            const byteLength = BigInt(entry.byteLength);
            counters.file(path, byteLength);
            const bytes = controlledBody({ open: entry.open, path, byteLength, chunkBytes: buffers.chunkBytes, signal: watch.signal, index });
            yield Object.freeze({ kind: 'file', path, byteLength, executable: entry.executable, bytes });
          }
          index += 1;
        }
      }
      // The caller is answered at once when interrupted (observeTransfer); the driver's
      // import stays owned until it settles, with the transfer's signal aborted.
      const summary = await readyPort.importTree(validated(), { signal: watch.signal, quotas: parsed.quotas, buffers });
      watch.check();
      await ledger.check();
      return counters.settle(summary);
    });
    failed = false;
    progress.finish(result);
    return result;
  } finally {
    if (failed) progress?.stop();
    watch.close();
    // Only this call's own admission is released, and only once; once admitted, any failure
    // fences the sandbox (the original's rule: an import is never replayed).
    owner.endTransfer(ticket, failed);
  }
}

function rootsOf(selection) {
  if (selection === null || typeof selection !== 'object') throw new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected a selection object' }]);
  const relative = (path, at) => {
    try {
      return parseSandboxRelativePath(path);
    } catch (error) {
      throw new SandboxValidationError(error.issues.map((issue) => ({ ...issue, path: at })));
    }
  };
  switch (selection.kind) {
    case 'workspace':
      return { kind: 'workspace', roots: [] };
    case 'subtree':
      return { kind: 'subtree', roots: [relative(selection.path, ['path'])] };
    case 'files':
      if (!Array.isArray(selection.paths)) throw new SandboxValidationError([{ code: 'invalid_type', path: ['paths'], message: 'expected an array of paths' }]);
      return { kind: 'files', roots: selection.paths.map((path, i) => relative(path, ['paths', i])) };
    default:
      throw new SandboxValidationError([{ code: 'invalid_value', path: ['kind'], message: "expected 'workspace', 'files' or 'subtree'" }]);
  }
}

/**
 * `sandbox.exportTree` for a JavaScript driver: options, `consume`, the selection and the state
 * are checked synchronously; only what happens after admission rejects.
 */
export function exportViaDriver(port, selection, consume, options) {
  if (typeof port.readyPort?.exportTree !== 'function') throw new SandboxStateError('the driver has no export port (exportTree)');
  if (typeof consume !== 'function') throw new SandboxValidationError([{ code: 'invalid_type', path: ['consume'], message: 'expected a function' }]);
  const parsed = parseTransferOptions(options);
  const { kind, roots } = rootsOf(selection);
  if (parsed.quotas.maxPaths !== undefined && BigInt(roots.length) > parsed.quotas.maxPaths) {
    throw quotaError('maxPaths', parsed.quotas.maxPaths, `the selection's ${roots.length} path(s)`);
  }
  return enterTransfer(port, () => port.owner.admitTransfer('export'), parsed, (ticket) => runExport(port, { kind, roots }, consume, parsed, ticket));
}

function runExport(port, selection, consume, parsed, ticket) {
  const { watch } = watchAdmitted(port, parsed, ticket);
  return observeTransfer(watch, exportWork(port, selection, consume, parsed, ticket, watch));
}

/**
 * The export's own work: the driver's `exportTree` and every call of `consume` are awaited
 * until they settle, also after an interruption, and the slot is released only then.
 */
async function exportWork({ owner, readyPort, request }, { kind, roots }, consume, parsed, ticket, watch) {
  let progress;
  let finished = false;
  try {
    const buffers = request.policy.transfers;
    const counters = new Counters(parsed.quotas);
    progress = driverProgress(parsed, counters, watch);
    const wanted = new Set(kind === 'files' ? roots : []);
    let rootSeen = 0;
    return await withSpill(readyPort, watch.signal, async (store) => {
      if (kind === 'files') {
        const selectionLedger = new SpillLedger(store, buffers);
        for (const root of roots) await selectionLedger.add(root, 'file');
        await selectionLedger.check();
      }
      const ledger = new SpillLedger(store, buffers);
      const inside = (path) =>
        kind === 'workspace' || (kind === 'subtree' && (path === roots[0] || path.startsWith(`${roots[0]}/`))) || (kind === 'files' && wanted.has(path));
      const frozenSelection = Object.freeze(kind === 'files' ? { kind, paths: Object.freeze([...roots]) } : kind === 'subtree' ? { kind, path: roots[0] } : { kind });
      const summary = await readyPort.exportTree(
        frozenSelection,
        async (entry) => {
          watch.check();
          const path = parseSandboxRelativePath(entry?.path);
          if (!inside(path)) throw new SandboxOperationError('stream_failure', `the driver delivered ${path}, outside the selection`);
          await ledger.add(path, entry.kind === 'file' ? 'file' : 'directory');
          if (entry.kind === 'directory') {
            if (kind === 'files') throw new SandboxOperationError('stream_failure', `${path} is not a regular file`);
            if (kind === 'subtree' && path === roots[0]) rootSeen += 1;
            counters.directory();
            await consume(Object.freeze({ kind: 'directory', path }));
            watch.check();
            return;
          }
          if (entry.kind !== 'file') throw new SandboxOperationError('stream_failure', `the driver delivered ${path} of an unknown kind`);
          const byteLength = BigInt(entry.byteLength);
          counters.file(path, byteLength);
          const body = driverBody(path, byteLength, entry.bytes, watch);
          await consume(Object.freeze({ kind: 'file', path, byteLength, executable: entry.executable === true, bytes: body.iterable }));
          watch.check();
          if (!body.state.drained) throw new SandboxOperationError('stream_failure', `the consumer returned before reading all bytes of ${path}`);
        },
        { signal: watch.signal, quotas: parsed.quotas, buffers },
      );
      watch.check();
      await ledger.check();
      if (kind === 'subtree' && rootSeen !== 1) throw new SandboxOperationError('stream_failure', `the driver delivered the root ${roots[0]} ${rootSeen} times instead of once`);
      const settled = counters.settle(summary);
      finished = true;
      progress.finish(settled);
      return settled;
    });
  } finally {
    if (!finished) progress?.stop();
    watch.close();
    owner.endTransfer(ticket, false);
  }
}

/** `onProgress` of a driver's transfer: the counts of what passed through so far. */
function driverProgress(parsed, counters, watch) {
  return reportProgress({
    onProgress: parsed.onProgress,
    read: () => ({ files: counters.files, bytes: counters.fileBytes }),
    fail: (error) => watch.interrupt(error),
  });
}
