// Builds the release addon with cargo and places it where the package loader looks for it:
// beside package.json (for this checkout) and in npm/linux-x64-gnu (for the platform package).
import { spawnSync } from 'node:child_process';
import { copyFileSync, renameSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const triple = 'linux-x64-gnu';
const addon = `native-sandbox.${triple}.node`;

if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`native-sandbox: only linux-x64-gnu builds are set up; this machine is ${process.platform}-${process.arch}`);
  process.exit(1);
}
const probe = spawnSync('cargo', ['--version'], { stdio: 'ignore' });
if (probe.error || probe.status !== 0) {
  console.error('native-sandbox: building the native addon needs Rust\'s cargo on PATH (install Rust with rustup, then run npm install again)');
  process.exit(1);
}
const build = spawnSync('cargo', ['build', '--release', '--locked', '--lib'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  console.error('native-sandbox: cargo build --release failed (see the output above)');
  process.exit(build.status ?? 1);
}
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, 'target');
const built = join(targetDir, 'release', 'libnative_sandbox.so');
if (!existsSync(built)) {
  console.error(`native-sandbox: cargo reported success but ${built} is missing`);
  process.exit(1);
}
for (const destination of [join(root, addon), join(root, 'npm', triple, addon)]) {
  // Copy then rename: a process that has the old addon loaded keeps its mapping intact.
  const staged = `${destination}.${process.pid}.tmp`;
  copyFileSync(built, staged);
  renameSync(staged, destination);
}
