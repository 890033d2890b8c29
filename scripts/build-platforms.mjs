// `npm run build:platforms [name ...]`: builds the release addon of every platform package (or of
// those named) on this Linux machine with cargo-zigbuild, into npm/<platform>/ and beside
// package.json (where a checkout's loader finds it: an arm64 Node.js under qemu-user loads the
// linux-arm64-gnu one). scripts/ensure-cross.sh installs the toolchain.
import { join } from 'node:path';
import { addonFile, buildPlatform, packageDirectory, PLATFORMS, root, runs } from './platforms.mjs';

const wanted = process.argv.slice(2);
const unknown = wanted.filter((name) => !PLATFORMS.some((p) => p.name === name));
if (unknown.length > 0) {
  console.error(`build-platforms: no platform ${unknown.join(', ')}; the platforms are ${PLATFORMS.map((p) => p.name).join(', ')}`);
  process.exit(2);
}
if (!runs('cargo-zigbuild')) {
  console.error('build-platforms: cargo-zigbuild is not on PATH (bash scripts/ensure-cross.sh installs it)');
  process.exit(1);
}
const chosen = wanted.length > 0 ? PLATFORMS.filter((p) => wanted.includes(p.name)) : PLATFORMS;
for (const platform of chosen) {
  console.log(`build-platforms: ${platform.name} (${platform.rust})`);
  try {
    const { seconds } = buildPlatform(platform, [join(root, addonFile(platform)), join(packageDirectory(platform), addonFile(platform))]);
    console.log(`build-platforms: ${platform.name} built in ${seconds.toFixed(0)} s`);
  } catch (error) {
    console.error(`build-platforms: ${error.message}`);
    process.exit(1);
  }
}
