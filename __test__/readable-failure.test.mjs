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

test('a failure after buffered bytes comes after them, and only the first one', async () => {
  const stream = fed();
  for (const piece of ['one ', 'two ', 'three']) stream.push(piece);
  failAfterBuffered(stream, new Error('cut'));
  failAfterBuffered(stream, new Error('a later one'));
  assert.equal(stream.destroyed, false, 'the buffered bytes are still there');
  assert.deepEqual(await consume(stream), { bytes: 'one two three', outcome: 'cut' });
});

test('a failure with nothing buffered is delivered at once', async () => {
  const stream = fed();
  const errored = new Promise((resolve) => stream.once('error', resolve));
  failAfterBuffered(stream, new Error('now'));
  assert.equal((await errored).message, 'now');
});

test('a held failure waits for a read: a stream nobody reads never emits it', async () => {
  const stream = fed();
  let emitted = false;
  stream.on('error', () => {
    emitted = true;
  });
  holdFailure(stream, new Error('held'));
  await tick();
  await tick();
  assert.equal(emitted, false);
  assert.deepEqual(await consume(stream), { bytes: '', outcome: 'held' });
});
