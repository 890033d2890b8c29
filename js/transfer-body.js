// TransferBody, as the original exports it: the controlled, once-only body of one file in a
// transfer. It opens its source lazily (once), yields chunks of at most `chunkBytes`, delivers
// exactly `byteLength` bytes, and, when `requireEof`, reads the source to its real end. A failure
// is remembered, reported to `interrupt`, and rethrown by every later read; a read while another
// is pending rejects; the caller's signal ends it at any read.
import { SandboxOperationError, SandboxStateError, SandboxValidationError } from './errors.js';
import { untilAborted } from './until-aborted.js';

export class TransferBody {
  #chunkBytes;
  #requireEof;
  #signal;
  #open;
  #interrupt;
  #iterator;
  #used = false;
  #retired = false;
  #remaining;
  #eof = false;
  #pending = false;
  #failure;

  constructor(byteLength, chunkBytes, requireEof, signal, open, interrupt) {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw new SandboxValidationError([{ code: 'invalid_value', path: ['byteLength'], message: 'must be a nonnegative safe integer' }]);
    if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw new SandboxValidationError([{ code: 'invalid_value', path: ['chunkBytes'], message: 'must be a positive safe integer' }]);
    this.#remaining = byteLength;
    this.#chunkBytes = chunkBytes;
    this.#requireEof = requireEof === true;
    this.#signal = signal;
    this.#open = open;
    this.#interrupt = typeof interrupt === 'function' ? interrupt : () => {};
  }

  /** Every declared byte was delivered (and, when required, the source's end was seen). */
  get complete() {
    return this.#remaining === 0 && (this.#eof || !this.#requireEof) && this.#failure === undefined;
  }

  [Symbol.asyncIterator]() {
    if (this.#used) this.rejectReuse();
    this.#used = true;
    return {
      next: () => this.#next(),
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  /** Remembers the body's first failure, reports it to `interrupt`, and throws it. */
  #fail(error) {
    if (this.#failure === undefined) {
      this.#failure = error;
      this.#interrupt(error);
    }
    throw this.#failure;
  }

  /** The signal's reason as the contract's error (an AbortSignal's default is a DOMException). */
  #cancelled() {
    const reason = this.#signal.reason;
    if (reason instanceof SandboxOperationError) return reason;
    return new SandboxOperationError('cancelled', 'the transfer body was cancelled through its signal', { cause: reason });
  }

  /** Settles like `promise`, or rejects as soon as the signal aborts. */
  #raced(promise) {
    return untilAborted(promise, this.#signal, () => this.#cancelled());
  }

  async #next() {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#pending) throw new SandboxStateError('concurrent reads of one transfer body are not allowed');
    if (this.#retired || this.complete) return { done: true, value: undefined };
    this.#pending = true;
    try {
      if (this.#signal?.aborted) throw this.#cancelled();
      if (this.#iterator === undefined) {
        const source = this.#open?.();
        const open = source?.[Symbol.asyncIterator] ?? source?.[Symbol.iterator];
        if (typeof open !== 'function') throw new SandboxValidationError([{ code: 'invalid_type', path: ['open'], message: 'open() must return a (sync or async) iterable of Uint8Array' }]);
        this.#iterator = open.call(source);
      }
      const step = await this.#raced(Promise.resolve(this.#iterator.next()));
      if (step.done) {
        if (this.#remaining > 0) throw new SandboxValidationError([{ code: 'too_small', path: ['byteLength'], message: `the body ended ${this.#remaining} bytes short of its declared byteLength` }]);
        this.#eof = true;
        return { done: true, value: undefined };
      }
      const chunk = step.value;
      if (!(chunk instanceof Uint8Array)) throw new SandboxValidationError([{ code: 'invalid_type', path: ['open'], message: 'the body yielded something other than a Uint8Array' }]);
      if (chunk.byteLength > this.#chunkBytes) throw new SandboxValidationError([{ code: 'too_large', path: ['open'], message: `a chunk of ${chunk.byteLength} bytes is larger than chunkBytes (${this.#chunkBytes})` }]);
      if (chunk.byteLength > this.#remaining) throw new SandboxValidationError([{ code: 'too_large', path: ['byteLength'], message: 'the body is longer than its declared byteLength' }]);
      this.#remaining -= chunk.byteLength;
      // Complete without an EOF pull: the source is returned now (its cleanup runs), since a
      // reader that stops here never asks again.
      if (this.#remaining === 0 && !this.#requireEof) await this.#iterator.return?.();
      return { done: false, value: chunk };
    } catch (error) {
      // Whatever failed (the caller's open, the source, a check, the signal) fails the body.
      return this.#fail(error);
    } finally {
      this.#pending = false;
    }
  }

  /** Throws unless the body is complete (see `complete`). */
  assertComplete() {
    if (this.#failure !== undefined) throw this.#failure;
    if (!this.complete) throw new SandboxOperationError('stream_failure', `the body was not read to its end (${this.#remaining} bytes left)`);
  }

  /** A second iteration of a once-only body. */
  rejectReuse() {
    throw new SandboxStateError('a transfer body can be read once only');
  }

  /**
   * Retires the body and returns its source (further reads end); `retry` is accepted for the
   * original's signature. A read still pending is not waited for: the source is told to return.
   */
  async close(retry = false) {
    void retry;
    this.#retired = true;
    const iterator = this.#iterator;
    this.#iterator = undefined;
    const returned = Promise.resolve(iterator?.return?.()).catch(() => {});
    if (!this.#pending) await returned;
  }
}
