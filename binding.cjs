'use strict';
// Loads the native addon: a build beside this file (a checkout after `npm install`), else the
// platform package that npm installs as an optional dependency (napi-rs's naming:
// `native-sandbox-<os>-<arch>[-<abi>]` holding `native-sandbox.<same>.node`).
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const SUPPORTED = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-x64', 'darwin-arm64'];

/**
 * True when this Node.js runs on musl. `ldd` first (a file read): glibc's is a script naming
 * the GNU C Library, musl's is musl's own loader. Else the process report (slower): a glibc
 * runtime version, or musl's loader among the loaded objects.
 */
function isMusl() {
  try {
    const ldd = readFileSync('/usr/bin/ldd', 'latin1');
    if (ldd.includes('musl')) return true;
    if (ldd.includes('GNU C Library')) return false;
  } catch {
    // No ldd (a minimal image): ask the process report.
  }
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
  const header = report && report.header;
  if (header && header.glibcVersionRuntime) return false;
  if (report && Array.isArray(report.sharedObjects)) {
    return report.sharedObjects.some((object) => /(?:^|\/)(?:ld-musl-|libc\.musl-)/.test(object));
  }
  return false;
}

/** This process's platform in the packages' naming, e.g. `linux-arm64-gnu` or `darwin-x64`. */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  return `${platform}-${arch}`;
}

function advice(name) {
  if (process.platform === 'win32') {
    return 'Windows is not supported natively: run Node.js and the Docker engine inside WSL 2 (a linux-x64-gnu or linux-arm64-gnu platform)';
  }
  if (SUPPORTED.includes(name)) {
    return `reinstall so that npm installs the optional package native-sandbox-${name} (optional dependencies must not be omitted, e.g. no --omit=optional or --no-optional; a lockfile made on another platform may lack it: npm install native-sandbox-${name})`;
  }
  return 'this platform has no prebuilt addon; run a supported platform (a Linux container or VM on this machine works), or build from a checkout with Rust (npm install runs cargo)';
}

function load() {
  const name = platformName();
  const file = `native-sandbox.${name}.node`;
  const local = join(__dirname, file);
  const failures = [];
  if (existsSync(local)) {
    try {
      return require(local);
    } catch (error) {
      failures.push(error);
    }
  }
  if (SUPPORTED.includes(name)) {
    try {
      return require(`native-sandbox-${name}`);
    } catch (error) {
      failures.push(error);
    }
  }
  const seen = `${name} (Node.js ${process.version}, ${process.platform}/${process.arch})`;
  const error = new Error(
    `native-sandbox: no native addon loaded for ${seen}; prebuilt platforms: ${SUPPORTED.join(', ')}. ${advice(name)}`,
    failures.length === 0 ? undefined : { cause: failures.length === 1 ? failures[0] : new AggregateError(failures, 'addon load attempts') },
  );
  error.code = 'ERR_NATIVE_SANDBOX_NO_ADDON';
  throw error;
}

module.exports = load();
