// Strict tsc of the framework adapters' declarations and their typed consumers against the
// frameworks' own types (tsconfig.adapters.json). Declarations are checked too (skipLibCheck is
// off), so a name of ours that does not resolve fails; errors inside a framework's own
// declarations (Mastra's do not compile on their own) are the framework's and are only counted.
// Exits 1 on any error in this package's files, or on anything tsc says that is not an error in
// a file.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.adapters.json'], { cwd: root, encoding: 'utf8' });
if (run.error) throw run.error;
const lines = `${run.stdout}${run.stderr}`.split('\n').filter((line) => line.length > 0 && !line.startsWith(' '));
const located = /^(.+?)\(\d+,\d+\): error TS\d+:/;
const ours = lines.filter((line) => !located.test(line) || !located.exec(line)[1].startsWith('node_modules/'));
const theirs = lines.length - ours.length;
if (ours.length > 0) {
  console.error(ours.join('\n'));
  console.error(`check-adapter-types: ${ours.length} error(s) in this package's adapter declarations or consumers`);
  process.exit(1);
}
console.log(`check-adapter-types: the adapters' declarations and consumers check; ${theirs} error(s) inside the frameworks' own declarations not counted`);
