// Bounded memory on the JavaScript transfer paths: an import of 512 MiB from the caller's
// entries and an export of it to a `consume` that only counts, on the Docker backend and on a
// JavaScript driver, each raise this process's RSS by at most 64 MiB (bench/js-transfer-rss.mjs
// measures, in a process of its own). And the one wait every transfer step takes keeps nothing
// of what passed through it, and ends with the caller's reason kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { watchTransfer } from '../js/transfer-watch.js';
import { untilAborted } from '../js/until-aborted.js';

const MiB = 1024 ** 2;
const BYTES = 512 * MiB;
const BOUND_MIB = 64;
const worker = fileURLToPath(new URL('../bench/js-transfer-rss.mjs', import.meta.url));

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

/** Whether `make()`'s value is still reachable after `wait(value)` settled and a collection. */
async function kept(wait) {
  let value = { payload: Buffer.alloc(1024) };
  const ref = new WeakRef(value);
  await wait(value);
  value = undefined;
  for (let i = 0; i < 3; i += 1) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return ref.deref() !== undefined;
}

test('a transfer watch keeps no value a settled wait delivered', async () => {
  const watch = watchTransfer({ signal: new AbortController().signal });
  try {
    assert.equal(await kept((value) => watch.race(Promise.resolve(value))), false, 'the race against the transfer end kept the value');
    assert.equal(await kept((value) => untilAborted(Promise.resolve(value), new AbortController().signal)), false);
  } finally {
    watch.close();
  }
});

test("a transfer cancelled through its signal rejects with the contract's error, the signal's reason as its cause", async () => {
  const controller = new AbortController();
  const watch = watchTransfer({ signal: controller.signal });
  const pending = watch.race(new Promise(() => {}));
  const reason = new Error('the caller gave up');
  controller.abort(reason);
  const error = await pending.catch((e) => e);
  assert.equal(error.code, 'cancelled');
  assert.equal(error.cause, reason);
  assert.equal(watch.byCaller, true);
  watch.close();
});

test('untilAborted settles like its promise, rejects with the reason on abort, and removes its listener', async () => {
  const controller = new AbortController();
  let listeners = 0;
  const { signal } = controller;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = (...args) => { listeners += 1; add(...args); };
  signal.removeEventListener = (...args) => { listeners -= 1; remove(...args); };
  assert.equal(await untilAborted(Promise.resolve(7), signal), 7);
  await assert.rejects(untilAborted(Promise.reject(new Error('own')), signal), /own/);
  assert.equal(listeners, 0, 'each settled wait removed its listener');
  const pending = untilAborted(new Promise(() => {}), signal, () => new Error('stopped'));
  controller.abort(new Error('reason'));
  await assert.rejects(pending, /stopped/);
  await assert.rejects(untilAborted(Promise.resolve(1), signal), /reason/, 'an aborted signal rejects at once with its reason');
  assert.equal(await untilAborted(Promise.resolve(2)), 2, 'no signal: the promise itself');
});

function measure(backend) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', worker, backend, String(BYTES)], { encoding: 'utf8', timeout: 300_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${backend}: ${error.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').at(-1)));
    });
  });
}

for (const backend of ['docker', 'driver']) {
  test(`512 MiB in and out through the JavaScript paths (${backend}): RSS at most ${BOUND_MIB} MiB above each transfer's start`, async () => {
    const figures = await measure(backend);
    assert.equal(figures.bytes, BYTES, 'every byte imported came back out');
    assert.ok(figures.importPeakMiB <= BOUND_MIB, `the import raised RSS by ${figures.importPeakMiB.toFixed(1)} MiB`);
    assert.ok(figures.exportPeakMiB <= BOUND_MIB, `the export raised RSS by ${figures.exportPeakMiB.toFixed(1)} MiB`);
  });
}
