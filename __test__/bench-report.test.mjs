// The README's performance section is generated from bench/results.json: every number in it
// comes from that one recorded run of `npm run bench`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BEGIN, ceilingsOf, END, goalsOf, readmeWith } from '../bench/report.mjs';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const results = JSON.parse(readFileSync(new URL('../bench/results.json', import.meta.url), 'utf8'));

test('the README performance section is exactly what bench/report.mjs renders from bench/results.json', () => {
  assert.ok(readme.includes(BEGIN) && readme.includes(END), 'the README has the generated section');
  assert.equal(readmeWith(readme, results), readme);
});

test('bench/results.json records when, where and with what it ran, and its goals follow from its samples', () => {
  assert.match(results.date, /^\d{4}-\d{2}-\d{2}T/);
  assert.ok(results.machine.cpus > 0 && results.engine.version && results.versions.node && results.versions.nativeSandbox);
  assert.ok(results.rounds.length >= 1);
  assert.deepEqual(goalsOf(results), results.goals);
});

test('what the engine allows: each round\'s baseline time over the faster client\'s, only where every round recorded it', () => {
  const round = (dockerode, raw, rawLarge, limit, download) => ({
    stdin: { dockerode: { seconds: dockerode }, raw: { seconds: raw }, ...(rawLarge ? { 'raw-large': { seconds: rawLarge } } : {}) },
    'transfer-large': { limit: { exportSeconds: limit }, ...(download ? { download: { exportSeconds: download } } : {}) },
  });
  const config = { stdinWriteBytes: 64 * 1024, stdinLargeWriteBytes: 1024 * 1024 };
  const all = ceilingsOf({ config, rounds: [round(2, 2, 1, 3, 2), round(1, 2, 1, 4, 2), round(3, 3, 2, 3, 3)] });
  assert.deepEqual(
    all.map(({ name, measured, shown }) => [name.split(':')[0], measured, shown]),
    [
      ['stdin', 1, '1.00 (0.50–1.00)'],
      ['stdin', 1.5, '1.50 (1.00–2.00)'],
      ['export, one large file', 1.5, '1.50 (1.00–2.00)'],
    ],
  );
  assert.match(all[1].name, /1,024 KiB writes vs dockerode in 64 KiB writes/);
  // A contender missing from one round leaves its row out rather than computing it from the rest.
  const partial = ceilingsOf({ config, rounds: [round(2, 2, 1, 3, 2), round(2, 2, undefined, 3, undefined)] });
  assert.deepEqual(partial.map(({ name }) => name), [all[0].name]);
});
