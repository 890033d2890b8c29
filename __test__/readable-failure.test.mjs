// A Readable's failure delivered after the bytes it already buffered (js/readable-failure.js).
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { test } from 'node:test';
import { deliverPendingFailure, failAfterBuffered, holdFailure, shareFailures } from '../js/readable-failure.js';

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

test('streams sharing failures: one unheard error per cause; a listener always hears its own', { timeout: 5_000 }, async () => {
  const coded = (code) => Object.assign(new Error(code), { code });
  const [a, b, c] = [fed(), fed(), fed()];
  shareFailures(a, b, c);
  for (const stream of [a, b]) stream.on('data', () => {});
  const heard = [];
  c.on('error', (error) => heard.push(`c: ${error.code}`));
  const closed = (stream) => new Promise((resolve) => stream.once('close', resolve));
  const ends = [a, b, c].map(closed);
  // Unheard: a's 'error' is emitted with no listener; it is caught here as the host would see it.
  const uncaught = [];
  const emit = a.emit;
  a.emit = function (event, ...args) {
    if (event === 'error' && this.listenerCount('error') === 0) return void uncaught.push(`a: ${args[0].code}`);
    return emit.call(this, event, ...args);
  };
  failAfterBuffered(a, coded('output_limit'));
  b.emit = function (event, ...args) {
    if (event === 'error' && this.listenerCount('error') === 0) return void uncaught.push(`b: ${args[0].code}`);
    return emit.call(this, event, ...args);
  };
  failAfterBuffered(b, coded('output_limit'));
  failAfterBuffered(c, coded('output_limit'));
  await Promise.all(ends);
  assert.deepEqual(uncaught, ['a: output_limit'], 'the second unheard copy of the same cause is not emitted');
  assert.deepEqual(heard, ['c: output_limit'], 'a stream with a listener hears its own');
  assert.equal(b.destroyed, true, 'the quiet copy still closed its stream');
  assert.equal(b.errored?.code, 'output_limit', 'and failed it: finished() and later readers see why');
  // Another cause is a failure of its own.
  const [d, e] = [fed(), fed()];
  shareFailures(d, e);
  const seen = [];
  for (const stream of [d, e]) stream.on('error', (error) => seen.push(error.code));
  failAfterBuffered(d, coded('cancelled'));
  failAfterBuffered(e, coded('stream_failure'));
  await Promise.all([closed(d), closed(e)]);
  assert.deepEqual(seen.sort(), ['cancelled', 'stream_failure']);
});
