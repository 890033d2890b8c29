// The README's performance section is generated from bench/results.json: every number in it
// comes from that one recorded run of `npm run bench`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BEGIN, END, goalsOf, readmeWith } from '../bench/report.mjs';

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
