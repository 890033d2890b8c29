// native-sandbox/node: host directories in and out of a sandbox. File bytes are read and written
// in Rust, one descriptor per file; this layer walks directories and owns the destination.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, opendir, realpath, rename, rm, unlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { errorFromDescriptor, SandboxOperationError, SandboxUnsupportedError, SandboxValidationError } from './errors.js';
import { settle } from './driver-port.js';
import { nativeTransfersOf } from './owner.js';
import { parseTransferOptions } from './parsers.js';
import { SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_LIMITS } from './constants.js';

/** A failed local cleanup; keep it and call `retryCleanup()` until it succeeds. */
export class SandboxDirectoryCleanupError extends Error {
  constructor(message, options) {
    super(message, { cause: options?.cause });
    this.name = 'SandboxDirectoryCleanupError';
    this.publishedDirectory = options?.publishedDirectory;
    this.retryCleanup = options?.retryCleanup;
  }
}

function issue(path, code, message) {
  return new SandboxValidationError([{ code, path, message }]);
}

function nativeOf(sandbox, helper) {
  const native = nativeTransfersOf(sandbox);
  if (!native) throw new SandboxUnsupportedError(`${helper} needs a sandbox of a native-sandbox backend with native transfers (the Docker backend)`);
  return native;
}

function splitOptions(options) {
  if (options === undefined) return { chunkBytes: SANDBOX_DEFAULT_TRANSFER_BUFFERS.chunkBytes, transfer: undefined };
  if (options === null || typeof options !== 'object') throw issue(['options'], 'invalid_type', 'expected an options object');
  const { chunkBytes = SANDBOX_DEFAULT_TRANSFER_BUFFERS.chunkBytes, ...transfer } = options;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw issue(['options', 'chunkBytes'], 'too_small', 'must be a positive safe integer');
  if (chunkBytes > SANDBOX_LIMITS.chunkBytes) throw issue(['options', 'chunkBytes'], 'too_large', `must be at most ${SANDBOX_LIMITS.chunkBytes} (SANDBOX_LIMITS.chunkBytes)`);
  return { chunkBytes, transfer };
}

function watch(parsed) {
  const check = () => {
    if (parsed.signal?.aborted) throw new SandboxOperationError('cancelled', 'the transfer was cancelled through its signal');
    if (parsed.deadlineAt !== undefined && Date.now() >= parsed.deadlineAt) throw new SandboxOperationError('deadline_exceeded', 'the transfer deadline elapsed');
  };
  return check;
}

/** Incremental depth-first walk: one open directory handle per level, no whole listing. */
async function* walk(root, relative = '') {
  const directory = await opendir(root);
  for await (const dirent of directory) {
    const host = join(root, dirent.name);
    const path = relative === '' ? dirent.name : `${relative}/${dirent.name}`;
    const stat = await lstat(host, { bigint: true });
    if (stat.isSymbolicLink()) throw new SandboxOperationError('stream_failure', `${host}: symbolic links are not imported`);
    if (stat.isDirectory()) {
      yield { kind: 'directory', path, host };
      yield* walk(host, path);
    } else if (stat.isFile()) {
      yield { kind: 'file', path, host, stat };
    } else {
      throw new SandboxOperationError('stream_failure', `${host}: special files are not imported`);
    }
  }
}

/** Imports the regular files and directories under `directory` (absolute, quiescent). */
export async function importSandboxDirectory(sandbox, directory, options) {
  const { owner, context } = nativeOf(sandbox, 'importSandboxDirectory');
  if (typeof directory !== 'string' || !isAbsolute(directory)) throw issue(['directory'], 'invalid_path', 'must be an absolute host path');
  const { chunkBytes, transfer } = splitOptions(options);
  const parsed = parseTransferOptions(transfer);
  const check = watch(parsed);
  const root = await lstat(directory).catch((cause) => {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['directory'], message: `${directory}: ${cause.message}` }]);
  });
  if (!root.isDirectory()) throw issue(['directory'], 'invalid_path', `${directory} is not a directory (symbolic links are not followed)`);
  check();
  settle(owner.admitTransfer('import'), context, errorFromDescriptor);
  settle(await owner.importBegin({ quotas: parsed.quotas }), context, errorFromDescriptor);
  try {
    let index = 0;
    for await (const entry of walk(directory)) {
      check();
      if (entry.kind === 'directory') {
        settle(await owner.importDirectory(index, entry.path), context, errorFromDescriptor);
      } else {
        const { dev, ino, size } = entry.stat;
        settle(await owner.importHostFile(index, entry.path, entry.host, { dev, ino, size }, chunkBytes), context, errorFromDescriptor);
      }
      index += 1;
    }
    check();
    return Object.freeze(settle(await owner.importFinish(), context, errorFromDescriptor));
  } catch (error) {
    await owner.importAbort();
    throw error;
  }
}

/**
 * Exports `selection` into `destination`, which must not exist: it is created exclusively,
 * filled through a private staging directory, and its `files` child is published only after
 * the whole export validated. Resolves `{ directory, summary }`.
 */
export async function exportSandboxDirectory(sandbox, selection, destination, options) {
  const { owner, context } = nativeOf(sandbox, 'exportSandboxDirectory');
  if (typeof destination !== 'string' || !isAbsolute(destination)) throw issue(['destination'], 'invalid_path', 'must be an absolute host path');
  const parsed = parseTransferOptions(options);
  const check = watch(parsed);
  check();
  try {
    await mkdir(destination, { mode: 0o700 });
  } catch (cause) {
    throw new SandboxValidationError([{ code: 'invalid_path', path: ['destination'], message: `${destination} must be absent and creatable: ${cause.message}` }]);
  }
  const staging = join(destination, `.staging-${randomBytes(6).toString('hex')}`);
  const published = join(destination, 'files');
  let entered = false;
  try {
    await mkdir(staging, { mode: 0o700 });
    settle(owner.admitExport(selection), context, errorFromDescriptor);
    // A failed exportBegin releases the admission itself.
    settle(await owner.exportBegin({ quotas: parsed.quotas }), context, errorFromDescriptor);
    entered = true;
    for (;;) {
      check();
      const meta = settle(await owner.exportNext(), context, errorFromDescriptor);
      if (meta === null) break;
      const host = join(staging, meta.path);
      if (meta.kind === 'directory') {
        await mkdir(host, { recursive: true, mode: 0o700 });
      } else {
        const parent = meta.path.includes('/') ? join(staging, meta.path.slice(0, meta.path.lastIndexOf('/'))) : staging;
        await mkdir(parent, { recursive: true, mode: 0o700 });
        settle(await owner.exportWriteFile(host, meta.executable), context, errorFromDescriptor);
      }
    }
    check();
    const summary = settle(await owner.exportFinish(), context, errorFromDescriptor);
    entered = false;
    await rename(staging, published);
    return Object.freeze({ directory: published, summary: Object.freeze(summary) });
  } catch (error) {
    if (entered) await owner.exportAbort();
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
