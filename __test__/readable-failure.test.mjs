// A Readable's failure delivered after the bytes it already buffered (js/readable-failure.js).
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { test } from 'node:test';
import { deliverPendingFailure, failAfterBuffered, holdFailure } from '../js/readable-failure.js';

/** A Readable fed by the test, whose reads honour a held failure. */
function fed() {
  return new Readable({
    highWaterMark: 64,
    read() {
      deliverPendingFailure(this);
    },
  });
}

/** Everything a slow consumer takes with `for await`, and how the stream ended. */
async function consume(stream) {
  const chunks = [];
  try {
    for await (const chunk of stream) {
      chunks.push(chunk);
      await tick();
    }
    return { bytes: Buffer.concat(chunks).toString(), outcome: 'end' };
  } catch (error) {
    return { bytes: Buffer.concat(chunks).toString(), outcome: error.message };
  }
}

test('a failure after buffered bytes comes after them, and only the first one', { timeout: 5_000 }, async () => {
  const stream = fed();
  for (const piece of ['one ', 'two ', 'three']) stream.push(piece);
  failAfterBuffered(stream, new Error('cut'));
  failAfterBuffered(stream, new Error('a later one'));
  assert.equal(stream.destroyed, false, 'the buffered bytes are still there');
  assert.deepEqual(await consume(stream), { bytes: 'one two three', outcome: 'cut' });
});

test('a failure with nothing buffered is delivered at once', { timeout: 5_000 }, async () => {
  const stream = fed();
  const errored = new Promise((resolve) => stream.once('error', resolve));
  failAfterBuffered(stream, new Error('now'));
  assert.equal((await errored).message, 'now');
});

test('behind buffered bytes nobody reads, a failure is never emitted', { timeout: 5_000 }, async () => {
  const stream = fed();
  stream.push('waiting');
  failAfterBuffered(stream, new Error('behind'));
  for (let i = 0; i < 5; i++) await tick();
  assert.equal(stream.destroyed, false);
  assert.equal(stream.listenerCount('error'), 0, 'no listener: an emitted failure would have thrown');
  assert.deepEqual(await consume(stream), { bytes: 'waiting', outcome: 'behind' });
});

test('a held failure waits for a read', { timeout: 5_000 }, async () => {
  const stream = fed();
  holdFailure(stream, new Error('held'));
  for (let i = 0; i < 5; i++) await tick();
  assert.equal(stream.destroyed, false);
  assert.deepEqual(await consume(stream), { bytes: '', outcome: 'held' });
});

test('flowing consumers get the bytes first too', { timeout: 5_000 }, async () => {
  const flowing = fed();
  flowing.push('one ');
  flowing.push('two');
  failAfterBuffered(flowing, new Error('cut'));
  const seen = [];
  const error = await new Promise((resolve) => {
    flowing.on('data', (chunk) => seen.push(chunk));
    flowing.on('error', resolve);
  });
  assert.equal(Buffer.concat(seen).toString(), 'one two');
  assert.equal(error.message, 'cut');
});
