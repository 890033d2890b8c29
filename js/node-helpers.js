// native-sandbox/node: host directories in and out of a sandbox. Imports walk and read in Rust
// (by descriptors, for every backend); exports write files in Rust, one descriptor per file, and
// this layer owns the destination.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, realpath, rename, rm, unlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { errorFromDescriptor, SandboxOperationError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { native } from './native.js';
import { nativeTransfersOf } from './owner.js';
import { shared } from './shared.js';
import { parseTransferOptions } from './parsers.js';
import { preEntryRejection, watchAdmitted } from './transfer.js';
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
        this.publishedDirectory = options?.publishedDirectory;
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
  if (typeof directory !== 'string' || !isAbsolute(directory)) throw issue(['directory'], 'invalid_path', 'must be an absolute host path');
  const { chunkBytes, transfer } = splitOptions(options);
  const parsed = parseTransferOptions(transfer);
  const root = await lstat(directory).catch((cause) => {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['directory'], message: `${directory}: ${cause.message}` }]);
  });
  if (!root.isDirectory()) throw issue(['directory'], 'invalid_path', `${directory} is not a directory (symbolic links are not followed)`);
  checkEntry(parsed);
  const native = nativeTransfersOf(sandbox);
  if (!native) return sandbox.importTree(hostEntries(directory, chunkBytes), transfer);
  const { owner, context } = native;
  const ticket = settle(owner.admitTransfer('import'), context, errorFromDescriptor);
  // As importTree: the deadline, the signal, a stop or a destroy end whatever the import waits on.
  const { watch: transferWatch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  try {
    await step(owner.importBegin({ quotas: parsed.quotas }));
    // The whole walk → read → archive loop runs in Rust: one native call.
    await step(owner.importHostDirectory(directory, chunkBytes));
    transferWatch.check();
    return Object.freeze(await step(owner.importFinish()));
  } catch (error) {
    await owner.importAbort(ticket);
    // Interrupted by its caller: the sandbox is stopped, as for importTree.
    if (transferWatch.byCaller) sandbox.stop().catch(() => {});
    throw error;
  } finally {
    transferWatch.close();
  }
}

/**
 * The walk as tree entries for any sandbox's `importTree`: the native import's own walk (by
 * descriptors from the root down, never following a link, so a directory swapped for a link
 * mid-walk cannot lead it outside the tree), each file opened relative to its directory when its
 * bytes are asked for and checked against what the walk saw (device, inode, size), so
 * replacement, truncation and growth fail the import instead of sending other bytes.
 */
async function* hostEntries(directory, chunkBytes) {
  const walk = new native.NativeHostWalk();
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
    // The directories go; files handed out stay readable until read or dropped.
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
 * Exports `selection` into `destination`, which must not exist: it is created exclusively,
 * filled through a private staging directory, and its `files` child is published only after
 * the whole export validated. Resolves `{ directory, summary }`.
 */
export async function exportSandboxDirectory(sandbox, selection, destination, options) {
  sandboxOf(sandbox, 'exportSandboxDirectory');
  if (typeof destination !== 'string' || !isAbsolute(destination)) throw issue(['destination'], 'invalid_path', 'must be an absolute host path');
  const parsed = parseTransferOptions(options);
  checkEntry(parsed);
  try {
    await mkdir(destination, { mode: 0o700 });
  } catch (cause) {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['destination'], message: `${destination} must be absent and creatable: ${cause.message}` }]);
  }
  const staging = join(destination, `.staging-${randomBytes(6).toString('hex')}`);
  const published = join(destination, 'files');
  const native = nativeTransfersOf(sandbox);
  try {
    await mkdir(staging, { mode: 0o700 });
    const summary = native
      ? await exportNatively(native, selection, staging, parsed)
      : await sandbox.exportTree(selection, (entry) => writeEntry(staging, entry), options);
    await rename(staging, published);
    return Object.freeze({ directory: published, summary: Object.freeze(summary) });
  } catch (error) {
    const cleanup = () => rm(destination, { recursive: true, force: true });
    try {
      await cleanup();
    } catch (cause) {
      throw new SandboxDirectoryCleanupError(`the export failed and ${destination} could not be removed`, { cause, retryCleanup: cleanup });
    }
    throw error;
  }
}

/**
 * The export of a native sandbox: every entry written in Rust. As exportTree, the deadline, the
 * signal or a destroy end whatever it waits on.
 */
async function exportNatively({ owner, context }, selection, staging, parsed) {
  const ticket = settle(owner.admitExport(selection), context, errorFromDescriptor);
  const { watch: transferWatch, step } = watchAdmitted({ owner, context }, parsed, ticket);
  let writing;
  try {
    // A failed exportBegin releases the admission itself.
    await step(owner.exportBegin({ quotas: parsed.quotas }));
    // The whole archive → write loop runs in Rust: one native call, which settles only once
    // its writing thread has stopped. An interrupted step rejects at once, so the failure path
    // waits for that settlement: the caller's cleanup never races a late write.
    writing = owner.exportHostDirectory(staging);
    await step(writing);
    transferWatch.check();
    return await step(owner.exportFinish());
  } catch (error) {
    await writing?.catch(() => {});
    // Only this export's own admission is abandoned, never another transfer's.
    await owner.exportAbort(ticket);
    throw error;
  } finally {
    transferWatch.close();
  }
}

function parentOf(staging, path) {
  return path.includes('/') ? join(staging, path.slice(0, path.lastIndexOf('/'))) : staging;
}

/**
 * One exported entry written into the staging directory of any sandbox's export: directories
 * made private, files created exclusively without following links, with owner read/write (and
 * execute when asked), refused when the process umask removed a requested bit.
 */
async function writeEntry(staging, entry) {
  const host = join(staging, entry.path);
  if (entry.kind === 'directory') {
    await mkdir(host, { recursive: true, mode: 0o700 });
    return;
  }
  await mkdir(parentOf(staging, entry.path), { recursive: true, mode: 0o700 });
  const wanted = entry.executable ? 0o700 : 0o600;
  const file = await open(host, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, wanted).catch((cause) => {
    throw new SandboxOperationError('stream_failure', `${host}: cannot be created exclusively: ${cause.message}`);
  });
  try {
    const { mode } = await file.stat();
    if ((mode & wanted) !== wanted) {
      throw new SandboxOperationError('stream_failure', `${host}: was created with mode ${(mode & 0o777).toString(8)}: the process umask removed a requested permission bit`);
    }
    for await (const chunk of entry.bytes) {
      for (let offset = 0; offset < chunk.byteLength; ) {
        const { bytesWritten } = await file.write(chunk, offset, chunk.byteLength - offset);
        offset += bytesWritten;
      }
    }
  } finally {
    await file.close();
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
