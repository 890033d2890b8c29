// fileFromBytes: a tree entry over bytes the caller already holds, yielding bounded views.
import { SANDBOX_DEFAULT_TRANSFER_BUFFERS } from './constants.js';
import { SandboxValidationError } from './errors.js';
import { parseSandboxRelativePath } from './parsers.js';

/** Borrows `bytes` (keep them unchanged until the transfer settles) and yields views of at most `chunkBytes`. */
export function fileFromBytes(path, bytes, options = {}) {
  const relative = parseSandboxRelativePath(path);
  if (!(bytes instanceof Uint8Array)) {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['bytes'], message: 'expected a Uint8Array' }]);
  }
  if (options === null || typeof options !== 'object') {
    throw new SandboxValidationError([{ code: 'invalid_type', path: ['options'], message: 'expected an options object' }]);
  }
  const { executable = false, chunkBytes = SANDBOX_DEFAULT_TRANSFER_BUFFERS.chunkBytes } = options;
  const issues = [];
  if (typeof executable !== 'boolean') issues.push({ code: 'invalid_type', path: ['options', 'executable'], message: 'expected a boolean' });
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) issues.push({ code: 'too_small', path: ['options', 'chunkBytes'], message: 'must be a positive safe integer' });
  for (const key of Object.keys(options)) {
    if (key !== 'executable' && key !== 'chunkBytes') issues.push({ code: 'unknown_field', path: ['options', key], message: `unknown field ${key}` });
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  let opened = false;
  return Object.freeze({
    kind: 'file',
    path: relative,
    byteLength: bytes.byteLength,
    executable,
    open() {
      if (opened) throw new SandboxValidationError([{ code: 'invalid_value', path: ['open'], message: `${relative} can be opened once only` }]);
      opened = true;
      return (function* views() {
        for (let offset = 0; offset < bytes.byteLength; offset += chunkBytes) {
          yield bytes.subarray(offset, Math.min(offset + chunkBytes, bytes.byteLength));
        }
      })();
    },
  });
}
