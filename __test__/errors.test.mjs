import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  SandboxCleanupError,
  SandboxOperationError,
  SandboxRunError,
  SandboxStartError,
  SandboxStateError,
  SandboxUnsupportedError,
  SandboxValidationError,
  TransferBody,
} from '../index.js';

function owner() {
  const calls = [];
  return {
    calls,
    recoveryRecord: undefined,
    stop: async () => void calls.push('stop'),
    destroy: async () => void calls.push('destroy'),
  };
}

describe('error classes', () => {
  test('SandboxOperationError carries its code, message and cause', () => {
    const cause = new Error('engine gone');
    const error = new SandboxOperationError('driver_failure', 'start failed', { cause });
    assert.ok(error instanceof Error && error instanceof SandboxOperationError);
    assert.equal(error.name, 'SandboxOperationError');
    assert.equal(error.code, 'driver_failure');
    assert.equal(error.message, 'start failed');
    assert.equal(error.cause, cause);
    assert.match(error.stack, /SandboxOperationError: start failed/);
  });

  test('every contract code of SandboxOperationError round-trips', () => {
    for (const code of ['cancelled', 'deadline_exceeded', 'output_limit', 'input_limit', 'stream_failure', 'persistence_failure', 'driver_failure']) {
      assert.equal(new SandboxOperationError(code, code).code, code);
    }
  });

  test('SandboxValidationError freezes its issues; its message is the original\'s', () => {
    const issues = [{ code: 'required', path: ['policy', 'resources'], message: 'resources is required' }];
    const error = new SandboxValidationError(issues);
    assert.equal(error.name, 'SandboxValidationError');
    assert.deepEqual(error.issues, issues);
    assert.ok(Object.isFrozen(error.issues) && Object.isFrozen(error.issues[0]) && Object.isFrozen(error.issues[0].path));
    assert.notEqual(error.issues[0], issues[0]);
    assert.equal(error.message, 'Invalid sandbox input');
  });

  test('SandboxUnsupportedError and SandboxStateError', () => {
    for (const [Class, name] of [
      [SandboxUnsupportedError, 'SandboxUnsupportedError'],
      [SandboxStateError, 'SandboxStateError'],
    ]) {
      const error = new Class('nope');
      assert.ok(error instanceof Error && error instanceof Class);
      assert.equal(error.name, name);
      assert.equal(error.message, 'nope');
    }
  });

  test('SandboxCleanupError retries exactly its operation on the same owner', async () => {
    const o = owner();
    const cause = new Error('kill failed');
    const stop = new SandboxCleanupError('stop failed', { cause, owner: o, operation: 'stop' });
    assert.equal(stop.name, 'SandboxCleanupError');
    assert.equal(stop.owner, o);
    assert.equal(stop.operation, 'stop');
    assert.equal(stop.cause, cause);
    await stop.retryCleanup();
    await new SandboxCleanupError('destroy failed', { cause, owner: o, operation: 'destroy' }).retryCleanup();
    assert.deepEqual(o.calls, ['stop', 'destroy']);
    // The constructor accepts what the original's accepts: the operation is recorded as given.
    assert.equal(new SandboxCleanupError('x', { cause, owner: o, operation: 'start' }).operation, 'start');
  });

  test('SandboxValidationError keeps every field of an issue, as the original does', () => {
    const issue = { code: 'custom', path: ['a', 0], message: 'bad', expected: 'string', received: 42 };
    const error = new SandboxValidationError([issue]);
    assert.deepEqual(error.issues, [{ ...issue, path: ['a', 0] }]);
    assert.ok(Object.isFrozen(error.issues[0]) && Object.isFrozen(error.issues[0].path));
    assert.notEqual(error.issues[0].path, issue.path, 'the path is a copy');
  });

  test('SandboxStartError keeps the cleanup owner', () => {
    const o = owner();
    const cause = new Error('image missing');
    const error = new SandboxStartError('startup failed', { cause, owner: o });
    assert.ok(error instanceof SandboxStartError && error instanceof Error);
    assert.equal(error.name, 'SandboxStartError');
    assert.equal(error.owner, o);
    assert.equal(error.cause, cause);
  });

  test('SandboxRunError keeps both errors and destroys through the same owner', async () => {
    const o = owner();
    const primaryError = new Error('callback failed');
    const cleanupError = new Error('destroy failed');
    const error = new SandboxRunError({ primaryError, cleanupError, owner: o });
    assert.equal(error.name, 'SandboxRunError');
    assert.equal(error.primaryError, primaryError);
    assert.equal(error.cleanupError, cleanupError);
    assert.equal(error.cause, primaryError);
    await error.retryCleanup();
    assert.deepEqual(o.calls, ['destroy']);
    assert.equal(error.primaryError, primaryError, 'a later cleanup never erases the original failure');
  });
});

describe('TransferBody', () => {
  const body = (chunks, { byteLength = 4, chunkBytes = 2, requireEof = false, signal = new AbortController().signal, interrupted = [] } = {}) =>
    new TransferBody(byteLength, chunkBytes, requireEof, signal, () => chunks, (error) => interrupted.push(error));

  test('delivers exactly byteLength bytes, once, without an EOF pull unless required', async () => {
    let pulledAfterLast = false;
    const source = (function* () {
      yield Buffer.from('ab');
      yield Buffer.from('cd');
      pulledAfterLast = true;
    })();
    const exact = body(source);
    const got = [];
    for await (const chunk of exact) got.push(Buffer.from(chunk).toString());
    assert.deepEqual(got, ['ab', 'cd']);
    assert.equal(exact.complete, true);
    assert.equal(pulledAfterLast, false);
    exact.assertComplete();
    assert.throws(() => exact[Symbol.asyncIterator](), SandboxStateError);
    const eof = body([Buffer.from('ab'), Buffer.from('cd')], { requireEof: true });
    const reader = eof[Symbol.asyncIterator]();
    await reader.next();
    await reader.next();
    assert.equal(eof.complete, false, 'the end of the source was not seen yet');
    assert.deepEqual(await reader.next(), { done: true, value: undefined });
    assert.equal(eof.complete, true);
  });

  test('short, long and oversized bodies fail and report to interrupt; concurrent reads reject', async () => {
    const interrupted = [];
    const short = body([Buffer.from('ab')], { interrupted });
    const error = await (async () => {
      for await (const chunk of short) void chunk;
    })().catch((e) => e);
    assert.ok(error instanceof SandboxValidationError);
    assert.equal(interrupted[0], error);
    assert.throws(() => short.assertComplete(), SandboxValidationError);
    const drain = async (b) => {
      for await (const chunk of b) void chunk;
    };
    const oversized = await drain(body([Buffer.from('abc')], { chunkBytes: 2 })).catch((e) => e);
    assert.deepEqual([oversized.issues[0].code, oversized.issues[0].path], ['too_large', ['open']]);
    const long = await drain(body([Buffer.from('ab'), Buffer.from('cd'), Buffer.from('e')], { byteLength: 4, requireEof: true })).catch((e) => e);
    assert.deepEqual([long.issues[0].code, long.issues[0].path], ['too_large', ['byteLength']]);
    const slow = body({ [Symbol.asyncIterator]: () => ({ next: () => new Promise((r) => setTimeout(() => r({ done: false, value: Buffer.from('ab') }), 20)) }) });
    const reader = slow[Symbol.asyncIterator]();
    const [first, second] = await Promise.allSettled([reader.next(), reader.next()]);
    assert.equal(first.status, 'fulfilled');
    assert.ok(second.reason instanceof SandboxStateError);
  });

  test('an aborted signal ends the next read', async () => {
    const controller = new AbortController();
    const aborted = body([Buffer.from('ab'), Buffer.from('cd')], { signal: controller.signal });
    const reader = aborted[Symbol.asyncIterator]();
    await reader.next();
    controller.abort(new SandboxOperationError('cancelled', 'stop'));
    await assert.rejects(reader.next(), { code: 'cancelled' });
  });
});

describe('TransferBody failures and endings', () => {
  test('a source failure is remembered and reported; an abort ends a read stuck in the source', async () => {
    const interrupted = [];
    const failing = new TransferBody(4, 4, false, new AbortController().signal, () => ({
      [Symbol.asyncIterator]: () => ({ next: async () => { throw new SandboxOperationError('stream_failure', 'source broke'); } }),
    }), (error) => interrupted.push(error));
    const reader = failing[Symbol.asyncIterator]();
    const first = await reader.next().catch((e) => e);
    assert.equal(first.message, 'source broke');
    assert.deepEqual(interrupted, [first]);
    assert.equal(await reader.next().catch((e) => e), first, 'every later read rethrows it');

    const controller = new AbortController();
    const stuck = new TransferBody(4, 4, false, controller.signal, () => ({
      [Symbol.asyncIterator]: () => ({ next: () => new Promise(() => {}) }),
    }), () => {});
    const pending = stuck[Symbol.asyncIterator]().next().catch((e) => e);
    controller.abort();
    const aborted = await pending;
    assert.ok(aborted instanceof SandboxOperationError, String(aborted));
    assert.equal(aborted.code, 'cancelled');
  });

  test('complete without an EOF pull, the source is returned (its cleanup runs)', async () => {
    let cleaned = false;
    const source = (function* () {
      try {
        yield Buffer.from('ab');
      } finally {
        cleaned = true;
      }
    })();
    const body = new TransferBody(2, 2, false, new AbortController().signal, () => source, () => {});
    for await (const chunk of body) void chunk;
    assert.equal(body.complete, true);
    assert.equal(cleaned, true);
  });
});
