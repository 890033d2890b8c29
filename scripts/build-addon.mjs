// Builds this machine's release addon and places it where the package loader looks for it:
// beside package.json (for this checkout) and in npm/linux-x64-gnu (for the platform package).
// With cargo-zigbuild on PATH (scripts/ensure-cross.sh installs it) the addon links against
// glibc 2.28 like every shipped build; without it, plain cargo links against this machine's glibc.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { addonFile, buildPlatform, HELPER_TARGETS, packageDirectory, placeAddon, PLATFORMS, root, runs, targetDirectory } from './platforms.mjs';

const platform = PLATFORMS.find((p) => p.name === 'linux-x64-gnu');
if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`native-sandbox: addons are built on linux-x64 (npm run build:platforms makes every platform's); this machine is ${process.platform}-${process.arch}`);
  process.exit(1);
}
if (!runs('cargo')) {
  console.error("native-sandbox: building the native addon needs Rust's cargo on PATH (install Rust with rustup, then run npm install again)");
  process.exit(1);
}
// build.rs builds the guest helper for both engine architectures.
if (runs('rustup')) {
  const added = spawnSync('rustup', ['target', 'add', ...HELPER_TARGETS], { stdio: 'inherit' });
  if (added.status !== 0) console.error(`native-sandbox: rustup target add ${HELPER_TARGETS.join(' ')} failed; the build needs them`);
}
const destinations = [join(root, addonFile(platform)), join(packageDirectory(platform), addonFile(platform))];
if (runs('cargo-zigbuild')) {
  try {
    buildPlatform(platform, destinations);
  } catch (error) {
    console.error(`native-sandbox: ${error.message}`);
    process.exit(1);
  }
} else {
  console.error('native-sandbox: cargo-zigbuild is not on PATH: building with plain cargo, linked against this machine\'s glibc (bash scripts/ensure-cross.sh installs the cross toolchain)');
  const build = spawnSync('cargo', ['build', '--release', '--locked', '--lib'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) {
    console.error('native-sandbox: cargo build --release failed (see the output above)');
    process.exit(build.status ?? 1);
  }
  try {
    placeAddon(join(targetDirectory(), 'release', platform.library), destinations);
  } catch (error) {
    console.error(`native-sandbox: ${error.message}`);
    process.exit(1);
  }
}
