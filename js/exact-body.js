// The once-only body of one exported file, whoever produces its bytes (the native export, or a
// JavaScript driver): it delivers exactly `byteLength` bytes and then ends without pulling again
// (an empty file or an exact final chunk needs no EOF-only pull), a second iteration or a read
// while another is pending rejects, and a source that ends short or runs long fails.
import { SandboxOperationError, SandboxStateError } from './errors.js';

/**
 * `pull()` resolves the next chunk (a Uint8Array) or `null` at the source's end; `done()` is
 * told once every declared byte was delivered (a driver's iterator is returned there).
 * Returns `{ iterable, state }`; `state.drained` says whether every byte was delivered.
 */
export function exactBody(path, byteLength, pull, done = async () => {}) {
  let taken = false;
  let pending = false;
  let delivered = 0n;
  const state = { drained: byteLength === 0n };
  const iterable = Object.freeze({
    [Symbol.asyncIterator]() {
      if (taken) throw new SandboxStateError(`the bytes of ${path} can be read once only`);
      taken = true;
      return {
        async next() {
          if (pending) throw new SandboxStateError(`concurrent reads of ${path} are not allowed`);
          if (state.drained) return { done: true, value: undefined };
          pending = true;
          try {
            const chunk = await pull();
            if (chunk === null) {
              throw new SandboxOperationError('stream_failure', `${path} ended ${byteLength - delivered} bytes short of its byteLength`);
            }
            if (!(chunk instanceof Uint8Array)) throw new SandboxOperationError('stream_failure', `${path} delivered something other than a Uint8Array`);
            delivered += BigInt(chunk.byteLength);
            if (delivered > byteLength) throw new SandboxOperationError('stream_failure', `${path} delivered more bytes than its byteLength`);
            if (delivered === byteLength) {
              state.drained = true;
              await done();
            }
            return { done: false, value: chunk };
          } finally {
            pending = false;
          }
        },
        async return() {
          await done();
          return { done: true, value: undefined };
        },
      };
    },
  });
  return { iterable, state };
}
