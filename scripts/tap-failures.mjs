// Prints the failing tests of a node:test report, each with its diagnostic (bounded), so the end
// of a long CI log says what failed: `node scripts/tap-failures.mjs REPORT`. A TAP report (the
// default off a terminal up to Node.js 22) gives each `not ok` with its block; a spec report
// (Node.js 23 on) lists them itself under "failing tests", which is printed from there.
import { readFileSync } from 'node:fs';

const LINES_PER_FAILURE = 40;
const FAILURES_MAX = 20;

const report = process.argv[2];
if (!report) {
  console.error('usage: node scripts/tap-failures.mjs REPORT');
  process.exit(2);
}
const lines = readFileSync(report, 'utf8').split('\n');
const SPEC_FAILURES = /^\u2716 failing tests:/;
const spec = lines.findIndex((line) => SPEC_FAILURES.test(line));
if (spec >= 0) {
  const listed = lines.slice(spec, spec + LINES_PER_FAILURE * FAILURES_MAX);
  console.log(listed.join('\n'));
  process.exit(0);
}
const out = [];
let failures = 0;
for (let index = 0; index < lines.length && failures < FAILURES_MAX; index += 1) {
  const failing = /^(\s*)not ok \d+ - /.exec(lines[index]);
  if (!failing) continue;
  failures += 1;
  const indent = failing[1].length;
  out.push(lines[index]);
  let shown = 0;
  for (let next = index + 1; next < lines.length; next += 1) {
    const line = lines[next];
    const depth = line.length - line.trimStart().length;
    if (line.trim() !== '' && depth <= indent) break;
    if (shown < LINES_PER_FAILURE) out.push(line);
    shown += 1;
  }
  if (shown > LINES_PER_FAILURE) out.push(`${' '.repeat(indent + 2)}… ${shown - LINES_PER_FAILURE} more lines`);
}
if (failures === FAILURES_MAX) out.push(`… (only the first ${FAILURES_MAX} failures are shown)`);
console.log(out.length === 0 ? 'no failing test in the report (the run itself failed: see above)' : out.join('\n'));
