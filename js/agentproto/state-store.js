// The provider's state files: one per live sandbox in a caller-owned directory, holding what a
// new process needs to connect (the recovery record, the request, the image ID, the private
// token, the port a private URL was given with). Written whole (a temporary file renamed over the last one), 0600; read back only if
// it is a regular file of this user that nobody else may read, and exactly the expected shape.
// Nothing here blocks the JavaScript thread.
import { constants as fsConstants } from 'node:fs';
import { lstat, open, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { isAbsolute, join } from 'node:path';
import { SandboxValidationError } from '../errors.js';
import { parseSandboxRecoveryRecord, parseSandboxRequest } from '../parsers.js';
import { SandboxProviderError } from './errors.js';

const FORMAT = 'native-sandbox/agentproto-state';
const VERSION = 1;
const STATE_BYTES_MAX = 1024 * 1024;
const SANDBOX_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const TOKEN = /^[A-Za-z0-9_-]{43,}$/;
const KEYS = ['format', 'version', 'namespace', 'sandboxId', 'image', 'daemon', 'expose', 'token', 'port', 'request', 'record'];

/** A sandbox id as a file name: the provider's ids, nothing that could leave the directory. */
export function checkSandboxId(sandboxId) {
  if (typeof sandboxId !== 'string' || !SANDBOX_ID.test(sandboxId)) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['sandboxId'], message: 'expected a sandbox id this provider gave out' }]);
  }
  return sandboxId;
}

/** The synchronous part of the directory check: an absolute path. */
export function checkStateDirectoryPath(directory) {
  if (typeof directory !== 'string' || !isAbsolute(directory)) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['stateDirectory'], message: 'expected an absolute path to an existing directory the caller owns' }]);
  }
  return directory;
}

/** The directory exists, is a directory (not a link), belongs to this user, and only it may write there. */
export async function checkStateDirectory(directory) {
  let stat;
  try {
    stat = await lstat(directory);
  } catch (cause) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['stateDirectory'], message: `cannot be read (${cause.code ?? cause.message})` }]);
  }
  const problem = !stat.isDirectory()
    ? 'is not a directory (a link is not followed)'
    : typeof process.getuid === 'function' && stat.uid !== process.getuid()
      ? 'belongs to another user'
      : (stat.mode & 0o022) !== 0
        ? 'may be written by group or others'
        : undefined;
  if (problem !== undefined) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['stateDirectory'], message: `${directory} ${problem}` }]);
  }
}

const fileOf = (directory, sandboxId) => join(directory, `${sandboxId}.json`);

/** Writes `state` whole, 0600, replacing the previous version atomically. */
export async function writeState(directory, state) {
  const target = fileOf(directory, checkSandboxId(state.sandboxId));
  const temporary = join(directory, `.${state.sandboxId}.${randomBytes(6).toString('hex')}.tmp`);
  const body = JSON.stringify({ format: FORMAT, version: VERSION, ...state });
  const handle = await open(temporary, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
  try {
    await handle.writeFile(body, 'utf8');
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await unlink(temporary).catch(() => {});
    throw error;
  }
  await handle.close();
  try {
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => {});
    throw error;
  }
}

/** Removes the state file of `sandboxId`; an absent file is already removed. */
export async function removeState(directory, sandboxId) {
  try {
    await unlink(fileOf(directory, checkSandboxId(sandboxId)));
  } catch (error) {
    if (error?.code !== 'ENOENT') throw error;
  }
}

function invalid(sandboxId, why, cause) {
  return new SandboxProviderError('sandbox_state_invalid', `the state file of sandbox ${sandboxId} ${why}; it was left as it is`, { sandboxId, cause });
}

async function readBytes(file, sandboxId) {
  let handle;
  try {
    handle = await open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    if (error?.code === 'ENOENT') {
      throw new SandboxProviderError('sandbox_not_found', `no sandbox ${sandboxId} is known to this provider's state directory`, { sandboxId });
    }
    throw invalid(sandboxId, `cannot be opened (${error?.code ?? error})`, error);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw invalid(sandboxId, 'is not a regular file');
    if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) throw invalid(sandboxId, 'belongs to another user');
    if ((stat.mode & 0o077) !== 0) throw invalid(sandboxId, 'may be read by group or others (expected mode 0600)');
    if (stat.size > STATE_BYTES_MAX) throw invalid(sandboxId, `is larger than ${STATE_BYTES_MAX} bytes`);
    const bytes = Buffer.alloc(stat.size + 1);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    if (bytesRead > stat.size) throw invalid(sandboxId, 'grew while it was read');
    return bytes.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

/**
 * Reads the state of `sandboxId` for a provider of `namespace`. A missing file is
 * `sandbox_not_found`; another namespace's is `sandbox_foreign`; anything malformed, foreign to
 * this user or readable by others is `sandbox_state_invalid`.
 */
export async function readState(directory, sandboxId, namespace) {
  const text = await readBytes(fileOf(directory, checkSandboxId(sandboxId)), sandboxId);
  let data;
  try {
    data = JSON.parse(text);
  } catch (cause) {
    throw invalid(sandboxId, 'is not JSON', cause);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data) || data.format !== FORMAT) throw invalid(sandboxId, 'is not a native-sandbox agentproto state file');
  if (data.version !== VERSION) throw invalid(sandboxId, `has format version ${JSON.stringify(data.version)}, this version reads ${VERSION}`);
  const unknown = Object.keys(data).filter((key) => !KEYS.includes(key));
  if (unknown.length > 0) throw invalid(sandboxId, `has unknown fields (${unknown.join(', ')})`);
  if (data.sandboxId !== sandboxId) throw invalid(sandboxId, 'names another sandbox');
  if (typeof data.namespace !== 'string') throw invalid(sandboxId, 'has no namespace');
  if (data.namespace !== namespace) {
    throw new SandboxProviderError('sandbox_foreign', `sandbox ${sandboxId} belongs to another namespace than this provider's (${namespace}); it was left untouched`, { sandboxId });
  }
  if (typeof data.image !== 'string' || data.image === '') throw invalid(sandboxId, 'has no image');
  const daemon = data.daemon;
  if (
    daemon === null ||
    typeof daemon !== 'object' ||
    typeof daemon.executable !== 'string' ||
    (daemon.args !== undefined && !(Array.isArray(daemon.args) && daemon.args.every((arg) => typeof arg === 'string'))) ||
    (daemon.cwd !== undefined && typeof daemon.cwd !== 'string')
  ) {
    throw invalid(sandboxId, 'has no daemon');
  }
  if (data.expose !== 'public' && data.expose !== 'private') throw invalid(sandboxId, 'has no exposure');
  if (data.expose === 'private' ? typeof data.token !== 'string' || !TOKEN.test(data.token) : data.token !== undefined) {
    throw invalid(sandboxId, 'has a token that does not match its exposure');
  }
  if (data.port !== undefined && !(Number.isInteger(data.port) && data.port >= 1 && data.port <= 65_535)) {
    throw invalid(sandboxId, 'has a port that is no TCP port');
  }
  let record;
  let request;
  try {
    record = parseSandboxRecoveryRecord(data.record);
    request = parseSandboxRequest(data.request);
  } catch (cause) {
    const issues = Array.isArray(cause?.issues) ? cause.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ') : '';
    throw invalid(sandboxId, `holds an invalid record or request (${issues || cause.message})`, cause);
  }
  if (record.sandboxId !== sandboxId || record.namespace !== namespace) throw invalid(sandboxId, 'holds a record of another sandbox or namespace');
  return Object.freeze({ sandboxId, namespace, image: data.image, daemon: Object.freeze({ ...daemon }), expose: data.expose, token: data.token, port: data.port, request, record });
}
