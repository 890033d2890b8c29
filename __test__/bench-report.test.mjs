// docs/performance.md's tables and the README's headline table are generated from
// bench/results.json: every number in them comes from that one recorded run of `npm run bench`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BEGIN, END, HEADLINE_BEGIN, HEADLINE_END, goalsOf, performanceWith, readmeWith, referencesOf, render } from '../bench/report.mjs';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const performance = readFileSync(new URL('../docs/performance.md', import.meta.url), 'utf8');
const results = JSON.parse(readFileSync(new URL('../bench/results.json', import.meta.url), 'utf8'));

test('docs/performance.md and the README headline are exactly what bench/report.mjs renders from bench/results.json', () => {
  assert.ok(performance.includes(BEGIN) && performance.includes(END), 'docs/performance.md has the generated section');
  assert.equal(performanceWith(performance, results), performance);
  assert.ok(readme.includes(HEADLINE_BEGIN) && readme.includes(HEADLINE_END), 'the README has the headline section');
  assert.equal(readmeWith(readme, results), readme);
});

test('bench/results.json records when, where and with what it ran, and its goals follow from its samples', () => {
  assert.match(results.date, /^\d{4}-\d{2}-\d{2}T/);
  assert.ok(results.machine.cpus > 0 && results.engine.version && results.versions.node && results.versions.nativeSandbox);
  assert.ok(results.rounds.length >= 1);
  assert.deepEqual(goalsOf(results), results.goals);
});

test('beside the goals: each round\'s baseline time over the other client\'s, only where every round recorded it', () => {
  const round = (dockerode, raw, rawLarge, limit, download, blocking) => ({
    stdin: {
      dockerode: { seconds: dockerode },
      raw: { seconds: raw },
      ...(rawLarge ? { 'raw-large': { seconds: rawLarge } } : {}),
      ...(blocking ? { blocking: { seconds: blocking } } : {}),
    },
    'transfer-large': { limit: { exportSeconds: limit }, ...(download ? { download: { exportSeconds: download } } : {}) },
  });
  const config = { stdinWriteBytes: 64 * 1024, stdinLargeWriteBytes: 1024 * 1024 };
  const all = referencesOf({ config, rounds: [round(2, 2, 1, 3, 2, 4), round(1, 2, 1, 4, 2, 1), round(3, 3, 2, 3, 3, 1)] });
  assert.deepEqual(
    all.map(({ name, measured, shown }) => [name.split(':')[0], measured, shown]),
    [
      ['stdin', 1, '1.00 (0.50–1.00)'],
      ['stdin', 1.5, '1.50 (1.00–2.00)'],
      ['stdin', 1, '1.00 (0.50–3.00)'],
      ['export, one large file', 1.5, '1.50 (1.00–2.00)'],
    ],
  );
  assert.match(all[1].name, /in 1 MiB writes vs dockerode in 64 KiB writes/);
  assert.match(all[2].name, /a blocking writer outside Node .* vs dockerode, both in 64 KiB writes/);
  // A contender missing from one round leaves its row out rather than computing it from the rest.
  const partial = referencesOf({ config, rounds: [round(2, 2, 1, 3, 2, 1), round(2, 2, undefined, 3, undefined, undefined)] });
  assert.deepEqual(partial.map(({ name }) => name), [all[0].name]);
});

test('the README shows the other clients\' rows and cells only when every round of the run recorded them', () => {
  // The run's notes (prose) may name these clients too: only the tables are looked at.
  const withClients = { ...structuredClone(results), notes: [] };
  withClients.config.stdinLargeWriteBytes = 1024 ** 2;
  for (const round of withClients.rounds) {
    round.stdin['raw-large'] = { seconds: round.stdin.raw.seconds / 2, cpuSeconds: 0.1 };
    round.stdin.blocking = { seconds: round.stdin.dockerode.seconds / 3, cpuSeconds: 0.2 };
    round['transfer-large'].download = { importSeconds: 1, exportSeconds: round['transfer-large'].limit.exportSeconds / 2 };
  }
  const shown = render(withClients);
  assert.match(shown, /export's archive downloaded alone \(no file written\) \| \| \| `curl > \/dev\/null`: [\d,]+ MB\/s/);
  assert.match(shown, /raw attach-socket write: [\d,]+ MB\/s, [\d.]+ CPU-s; in 1 MiB writes: [\d,]+ MB\/s, 0\.10 CPU-s; a blocking writer outside Node \(python3\): [\d,]+ MB\/s, 0\.20 CPU-s \|/);
  assert.match(shown, /\| stdin: the raw attach-socket writer in 1 MiB writes vs dockerode in 64 KiB writes \| [\d.]+ \(/);
  assert.match(shown, /\| stdin: a blocking writer outside Node .* vs dockerode, both in 64 KiB writes \| 3\.00 \(3\.00–3\.00\) \|/);
  assert.match(shown, /`curl > \/dev\/null`: no tar, no file written\) vs `curl \\\| tar -xf -` \| 2\.00 \(2\.00–2\.00\) \|/);
  // One round without the blocking writer alone: its cell and row go, the others stay.
  const withoutBlocking = structuredClone(withClients);
  delete withoutBlocking.rounds[0].stdin.blocking;
  const others = render(withoutBlocking);
  assert.doesNotMatch(others, /blocking writer/);
  assert.match(others, /in 1 MiB writes: [\d,]+ MB\/s, 0\.10 CPU-s \|/);
  assert.match(others, /\| stdin: the raw attach-socket writer in 1 MiB writes vs dockerode in 64 KiB writes \| [\d.]+ \(/);
  // One round without them: none of it.
  delete withClients.rounds[0].stdin['raw-large'];
  delete withClients.rounds[0].stdin.blocking;
  delete withClients.rounds[0]['transfer-large'].download;
  const partial = render(withClients);
  assert.doesNotMatch(partial, /downloaded alone|in 1 MiB writes|no tar, no file written|blocking writer/);
});
