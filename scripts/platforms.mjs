// The platforms native-sandbox ships prebuilt addons for, in napi-rs's conventions: a package
// `native-sandbox-<platform>` under npm/<platform>, holding `native-sandbox.<platform>.node`.
// Every one is built on this Linux machine with cargo-zigbuild (zig as C compiler and linker):
// the gnu builds against glibc 2.28 (what Node.js 20 and 22 themselves need), the musl builds
// linked dynamically to musl as Node.js on Alpine is, the darwin builds as Mach-O bundles.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, renameSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The glibc version the gnu builds link against: no symbol newer than this. */
export const GLIBC_FLOOR = '2.28';

export const PLATFORMS = [
  { name: 'linux-x64-gnu', rust: 'x86_64-unknown-linux-gnu', os: 'linux', cpu: 'x64', libc: 'glibc', library: 'libnative_sandbox.so' },
  { name: 'linux-arm64-gnu', rust: 'aarch64-unknown-linux-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc', library: 'libnative_sandbox.so' },
  { name: 'linux-x64-musl', rust: 'x86_64-unknown-linux-musl', os: 'linux', cpu: 'x64', libc: 'musl', library: 'libnative_sandbox.so' },
  { name: 'linux-arm64-musl', rust: 'aarch64-unknown-linux-musl', os: 'linux', cpu: 'arm64', libc: 'musl', library: 'libnative_sandbox.so' },
  { name: 'darwin-x64', rust: 'x86_64-apple-darwin', os: 'darwin', cpu: 'x64', library: 'libnative_sandbox.dylib' },
  { name: 'darwin-arm64', rust: 'aarch64-apple-darwin', os: 'darwin', cpu: 'arm64', library: 'libnative_sandbox.dylib' },
];

/** The Rust targets of the guest helper, which build.rs builds into every addon. */
export const HELPER_TARGETS = ['x86_64-unknown-linux-gnu', 'aarch64-unknown-linux-musl'];

export const addonFile = (platform) => `native-sandbox.${platform.name}.node`;
export const packageDirectory = (platform) => join(root, 'npm', platform.name);

/** The target cargo-zigbuild is given: a gnu target carries the glibc version to link against. */
function zigTarget(platform) {
  return platform.libc === 'glibc' ? `${platform.rust}.${GLIBC_FLOOR}` : platform.rust;
}

/** A musl addon links musl dynamically (Node.js on Alpine loads it into its own process). */
function rustflags(platform) {
  return platform.libc === 'musl' ? '-C target-feature=-crt-static' : '';
}

export function targetDirectory() {
  return process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, 'target');
}

/** True when `command --version` runs. */
export function runs(command, args = ['--version']) {
  const probe = spawnSync(command, args, { stdio: 'ignore' });
  return !probe.error && probe.status === 0;
}

/**
 * Builds `platform`'s release addon with cargo-zigbuild and copies it to `destinations`.
 * Throws with the step that failed.
 */
export function buildPlatform(platform, destinations) {
  const started = Date.now();
  const env = { ...process.env };
  const flags = rustflags(platform);
  if (flags) env[`CARGO_TARGET_${platform.rust.toUpperCase().replaceAll('-', '_')}_RUSTFLAGS`] = flags;
  const build = spawnSync('cargo', ['zigbuild', '--release', '--locked', '--lib', '--target', zigTarget(platform)], { cwd: root, env, stdio: 'inherit' });
  if (build.status !== 0) throw new Error(`cargo zigbuild for ${platform.name} (${zigTarget(platform)}) failed (see the output above)`);
  const built = join(targetDirectory(), platform.rust, 'release', platform.library);
  placeAddon(built, destinations);
  return { built, seconds: (Date.now() - started) / 1000 };
}

/** Copies the addon cargo `built` to each of `destinations`; throws when it is missing. */
export function placeAddon(built, destinations) {
  if (!existsSync(built)) throw new Error(`cargo reported success but ${built} is missing`);
  for (const destination of destinations) {
    // Copy then rename: a process that has the old addon loaded keeps its mapping intact.
    const staged = `${destination}.${process.pid}.tmp`;
    copyFileSync(built, staged);
    renameSync(staged, destination);
  }
}
