// native-sandbox/node: host directories in and out of a sandbox. Imports walk and read in Rust
// (by descriptors, for every backend); exports write files in Rust, one descriptor per file, and
// this layer owns the destination.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, realpath, rename, rm, rmdir, unlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { errorFromDescriptor, SandboxOperationError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { native } from './native.js';
import { nativeTransfersOf } from './owner.js';
import { shared } from './shared.js';
import { traced, transferCounts } from './debug.js';
import { parseTransferOptions } from './parsers.js';
import { nativeProgress, preEntryRejection, watchAdmitted } from './transfer.js';
import { SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_LIMITS } from './constants.js';

/** A failed local cleanup; keep it and call `retryCleanup()` until it succeeds. */
/** Defined once per process, like the contract's other classes (see shared.js). */
export const SandboxDirectoryCleanupError = shared(
  'SandboxDirectoryCleanupError',
  () =>
    class SandboxDirectoryCleanupError extends Error {
      constructor(message, options) {
        super(message, { cause: options?.cause });
        this.name = 'SandboxDirectoryCleanupError';
        /** The committed result, when the cleanup failed after publication. */
        this.publishedDirectory = options?.publishedDirectory;
        /** The export's own failure, when the cleanup after it failed too (`cause` is the cleanup's). */
        this.exportError = options?.exportError;
        this.retryCleanup = options?.retryCleanup;
      }
    },
);

function issue(path, code, message) {
  return new SandboxValidationError([{ code, path, message }]);
}

function sandboxOf(sandbox, helper) {
  if (sandbox === null || typeof sandbox !== 'object' || typeof sandbox.importTree !== 'function' || typeof sandbox.exportTree !== 'function') {
    throw issue(['sandbox'], 'invalid_type', `${helper} needs a started Sandbox (with importTree and exportTree)`);
  }
  return sandbox;
}

function splitOptions(options) {
  if (options === undefined) return { chunkBytes: SANDBOX_DEFAULT_TRANSFER_BUFFERS.chunkBytes, transfer: undefined };
  if (options === null || typeof options !== 'object') throw issue(['options'], 'invalid_type', 'expected an options object');
  const { chunkBytes = SANDBOX_DEFAULT_TRANSFER_BUFFERS.chunkBytes, ...transfer } = options;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw issue(['options', 'chunkBytes'], 'too_small', 'must be a positive safe integer');
  if (chunkBytes > SANDBOX_LIMITS.chunkBytes) throw issue(['options', 'chunkBytes'], 'too_large', `must be at most ${SANDBOX_LIMITS.chunkBytes} (SANDBOX_LIMITS.chunkBytes)`);
  return { chunkBytes, transfer };
}

/** A signal already aborted or a deadline already past ends the helper before it starts. */
function checkEntry(parsed) {
  const early = preEntryRejection(parsed);
  if (early) throw early;
}

/** Imports the regular files and directories under `directory` (absolute, quiescent). */
export async function importSandboxDirectory(sandbox, directory, options) {
  sandboxOf(sandbox, 'importSandboxDirectory');
  // A native import bypasses importTree, so it prints its own line; any other goes through
  // importTree, which prints one.
  if (!nativeTransfersOf(sandbox)) return importDirectory(sandbox, directory, options);
  return traced(sandbox.id, 'import', () => importDirectory(sandbox, directory, options), transferCounts);
}

async function importDirectory(sandbox, directory, options) {
  if (typeof directory !== 'string' || !isAbsolute(directory)) throw issue(['directory'], 'invalid_path', 'must be an absolute host path');
  const { chunkBytes, transfer } = splitOptions(options);
  const parsed = parseTransferOptions(transfer);
  const root = await lstat(directory).catch((cause) => {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['directory'], message: `${directory}: ${cause.message}` }]);
  });
  if (!root.isDirectory()) throw issue(['directory'], 'invalid_path', `${directory} is not a directory (symbolic links are not followed)`);
  checkEntry(parsed);
  const native = nativeTransfersOf(sandbox);
  if (!native) {
    // Whatever the driver did not read (or read in part) is let go once its import settled.
    const walk = newHostWalk();
    try {
      return await sandbox.importTree(hostEntries(walk, directory, chunkBytes), transfer);
    } finally {
      walk.release();
    }
  }
  const { owner, context } = native;
  const ticket = settle(owner.admitTransfer('import'), context, errorFromDescriptor);
  // As importTree: the deadline, the signal, a stop or a destroy end whatever the import waits on.
  const { watch: transferWatch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  let progress;
  let summary;
  try {
    await step(owner.importBegin({ quotas: parsed.quotas }));
    progress = nativeProgress({ owner }, parsed, ticket, transferWatch);
    // The whole walk → read → archive loop runs in Rust: one native call.
    await step(owner.importHostDirectory(directory, chunkBytes));
    transferWatch.check();
    summary = Object.freeze(await step(owner.importFinish()));
  } catch (error) {
    progress?.stop();
    await owner.importAbort(ticket);
    // Interrupted by its caller: the sandbox is stopped, as for importTree.
    if (transferWatch.byCaller) sandbox.stop().catch(() => {});
    throw error;
  } finally {
    transferWatch.close();
  }
  progress.finish(summary);
  return summary;
}

/** A native host walk (`native` is shadowed where the import's path is chosen). */
const newHostWalk = () => new native.NativeHostWalk();

/**
 * The walk as tree entries for any sandbox's `importTree`: the native import's own walk (by
 * descriptors from the root down, never following a link, so a directory swapped for a link
 * mid-walk cannot lead it outside the tree), each file opened relative to its directory when its
 * bytes are asked for and checked against what the walk saw (device, inode, size), so
 * replacement, truncation and growth fail the import instead of sending other bytes.
 */
async function* hostEntries(walk, directory, chunkBytes) {
  const context = {};
  try {
    settle(await walk.open(directory), context, errorFromDescriptor);
    for (;;) {
      const entry = settle(await walk.nextEntry(), context, errorFromDescriptor);
      if (entry === null) return;
      if (entry.kind === 'directory') {
        yield Object.freeze({ kind: 'directory', path: entry.path });
      } else {
        yield Object.freeze({
          kind: 'file',
          path: entry.path,
          byteLength: entry.size,
          executable: entry.executable,
          open: () => hostFileBytes(walk, entry.id, chunkBytes),
        });
      }
    }
  } finally {
    // The directories go; files handed out stay readable until read, or until the import settled.
    walk.closeWalk();
  }
}

/** File `id` of `walk`, in chunks of at most `chunkBytes`, exactly the size the walk saw. */
async function* hostFileBytes(walk, id, chunkBytes) {
  try {
    for (;;) {
      const chunk = await walk.readFile(id, chunkBytes);
      if (chunk === null) return;
      if (!Buffer.isBuffer(chunk)) throw errorFromDescriptor(chunk.error, {});
      yield chunk;
    }
  } finally {
    walk.closeFile(id);
  }
}

/**
 * Exports `selection` into `destination`, which must not exist: it is created exclusively as a
 * private namespace, filled through a private staging directory (its directories' identities
 * recorded in a private identity directory beside it, so distinct archive paths a folding file
 * system would merge are refused), and its `files` child is published only after the whole
 * export validated. Resolves `{ directory, summary }`.
 *
 * On failure only what the helper owns goes (the staging, the identities, then the namespace
 * if nothing else is in it), and the export's own error is thrown; a cleanup that fails throws
 * `SandboxDirectoryCleanupError` with both errors (`cause`: the cleanup's; `exportError`: the
 * export's). A cleanup that fails after publication names the committed result
 * (`publishedDirectory`); its `retryCleanup()` keeps those files.
 */
export async function exportSandboxDirectory(sandbox, selection, destination, options) {
  sandboxOf(sandbox, 'exportSandboxDirectory');
  // As importSandboxDirectory: a native export prints its own line, any other exportTree's.
  if (!nativeTransfersOf(sandbox)) return exportDirectory(sandbox, selection, destination, options);
  return traced(sandbox.id, 'export', () => exportDirectory(sandbox, selection, destination, options), (result) => transferCounts(result?.summary));
}

async function exportDirectory(sandbox, selection, destination, options) {
  if (typeof destination !== 'string' || !isAbsolute(destination)) throw issue(['destination'], 'invalid_path', 'must be an absolute host path');
  const parsed = parseTransferOptions(options);
  checkEntry(parsed);
  try {
    await mkdir(destination, { mode: 0o700 });
  } catch (cause) {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['destination'], message: `${destination} must be absent and creatable: ${cause.message}` }]);
  }
  const suffix = randomBytes(6).toString('hex');
  const staging = join(destination, `.staging-${suffix}`);
  const identities = join(destination, `.identities-${suffix}`);
  const published = join(destination, 'files');
  const native = nativeTransfersOf(sandbox);
  let summary;
  try {
    await mkdir(staging, { mode: 0o700 });
    await mkdir(identities, { mode: 0o700 });
    summary = native ? await exportNatively(native, selection, staging, identities, parsed) : await exportThroughTree(sandbox, selection, staging, identities, options);
    await rename(staging, published);
  } catch (error) {
    const cleanup = async () => {
      await rm(staging, { recursive: true, force: true });
      await rm(identities, { recursive: true, force: true });
      // The namespace goes only while empty: what someone else put there is not the helper's.
      await rmdir(destination).catch((cause) => {
        if (cause?.code !== 'ENOENT' && cause?.code !== 'ENOTEMPTY') throw cause;
      });
    };
    try {
      await cleanup();
    } catch (cause) {
      throw new SandboxDirectoryCleanupError(`the export failed (${error?.message ?? error}) and its staging in ${destination} could not be removed: ${cause?.message ?? cause}`, {
        cause,
        exportError: error,
        retryCleanup: cleanup,
      });
    }
    throw error;
  }
  // Published: the private identities go; the committed files stay whatever happens to them.
  const cleanup = () => rm(identities, { recursive: true, force: true });
  try {
    await cleanup();
  } catch (cause) {
    throw new SandboxDirectoryCleanupError(`${published} was published, but the export's private records in ${identities} could not be removed: ${cause?.message ?? cause}`, {
      cause,
      publishedDirectory: published,
      retryCleanup: cleanup,
    });
  }
  return Object.freeze({ directory: published, summary: Object.freeze(summary) });
}

/**
 * The export of a native sandbox: every entry written in Rust. As exportTree, the deadline, the
 * signal or a destroy end whatever it waits on.
 */
async function exportNatively({ owner, context }, selection, staging, identities, parsed) {
  const ticket = settle(owner.admitExport(selection), context, errorFromDescriptor);
  const { watch: transferWatch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  let writing;
  let progress;
  let summary;
  try {
    // A failed exportBegin releases the admission itself.
    await step(owner.exportBegin({ quotas: parsed.quotas }));
    progress = nativeProgress({ owner }, parsed, ticket, transferWatch);
    // The whole archive → write loop runs in Rust: one native call, which settles only once
    // its writing thread has stopped. An interrupted step rejects at once, so the failure path
    // waits for that settlement: the caller's cleanup never races a late write.
    writing = owner.exportHostDirectory(staging, identities);
    await step(writing);
    transferWatch.check();
    summary = await step(owner.exportFinish());
  } catch (error) {
    progress?.stop();
    await writing?.catch(() => {});
    // Only this export's own admission is abandoned, never another transfer's.
    await owner.exportAbort(ticket);
    throw error;
  } finally {
    transferWatch.close();
  }
  progress.finish(summary);
  return summary;
}

/**
 * The export of any other sandbox, through its `exportTree`: each entry written by the native
 * export's own writer (`NativeStagingWriter`), one call at a time.
 */
async function exportThroughTree(sandbox, selection, staging, identities, options) {
  const writer = new native.NativeStagingWriter(staging, identities);
  const wrote = async (call) => settle(await call, {}, errorFromDescriptor);
  // The entry being written: a failed export waits for it, so the cleanup never races a write.
  let writing = Promise.resolve();
  let ended = false;
  const write = async (entry) => {
    if (entry.kind === 'directory') return void (await wrote(writer.directory(entry.path)));
    await wrote(writer.file(entry.path, entry.executable === true));
    for await (const chunk of entry.bytes) {
      if (ended) throw new SandboxOperationError('cancelled', 'the export ended');
      if (chunk.byteLength > 0) await wrote(writer.write(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)));
    }
    await wrote(writer.fileEnd());
  };
  try {
    return await sandbox.exportTree(
      selection,
      (entry) => {
        writing = write(entry);
        return writing;
      },
      options,
    );
  } catch (error) {
    ended = true;
    await writing.catch(() => {});
    throw error;
  }
}

/**
 * Spill storage for JavaScript drivers: files created exclusively under the canonical
 * `directory` and unlinked at once, so only their open handles keep them.
 */
export async function createSandboxSpillStore(directory) {
  if (typeof directory !== 'string' || !isAbsolute(directory)) throw issue(['directory'], 'invalid_path', 'must be an absolute host path');
  const canonical = await realpath(directory);
  if (canonical !== directory) throw issue(['directory'], 'invalid_path', `must be canonical (it resolves to ${canonical})`);
  const handles = new Set();
  return Object.freeze({
    async createFile() {
      const path = join(directory, `.native-sandbox-${randomBytes(8).toString('hex')}.spill`);
      const handle = await open(path, 'wx+', 0o600);
      await unlink(path);
      handles.add(handle);
      return Object.freeze({
        read: async (buffer, offset, length, position) => Object.freeze({ bytesRead: (await handle.read(buffer, offset, length, position)).bytesRead }),
        write: async (buffer, offset, length, position) => Object.freeze({ bytesWritten: (await handle.write(buffer, offset, length, position)).bytesWritten }),
        truncate: (size) => handle.truncate(size),
        close: async () => {
          handles.delete(handle);
          await handle.close();
        },
      });
    },
    async close() {
      const open = [...handles];
      handles.clear();
      await Promise.all(open.map((handle) => handle.close()));
    },
  });
}
