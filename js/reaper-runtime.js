// Whether this process can run its reaper (src/docker/reaper/) as `process.execPath` with the
// package's reaper script. It cannot when `process.execPath` is not a Node.js that runs a script
// it is given: a single-executable application runs itself whatever its arguments, and another
// runtime's executable is not Node.js. Where it cannot, in_process starts fail, naming why
// (src/docker/reaper/link.rs), instead of starting copies of the application as reapers.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * Why the reaper cannot run here, or `undefined` when it can. `runtime` is what Node.js exposes:
 * `isSea` (`require('node:sea').isSea()`, Node.js 20.12, 21.7 and later), `releaseName`
 * (`process.release.name`, always `'node'` on Node.js), `execPath`, and `script`, the reaper's
 * script (`undefined` when this module was not loaded from a file) with `scriptExists`.
 */
export function reaperRuntimeProblem({ isSea, releaseName, execPath, script, scriptExists }) {
  if (isSea) return `process.execPath (${execPath}) is a single-executable application, which runs itself instead of the reaper's script`;
  if (releaseName !== 'node') return `this runtime is not Node.js (process.release.name is ${JSON.stringify(releaseName)}), so process.execPath (${execPath}) does not run the reaper's script`;
  if (script === undefined) return "the package was not loaded from files (a bundle), so there is no reaper script to run";
  if (!scriptExists) return `the reaper's script ${script} does not exist (a bundle that left out the package's js/ directory)`;
  return undefined;
}

/** The reaper's script beside this module, or `undefined` when this module is not a file. */
export function reaperScript(moduleUrl = import.meta.url) {
  try {
    return fileURLToPath(new URL('./reaper-main.js', moduleUrl));
  } catch {
    return undefined;
  }
}

/** What `reaperRuntimeProblem` reads, of this process. */
export function thisRuntime() {
  const script = reaperScript();
  let isSea = false;
  try {
    isSea = createRequire(import.meta.url)('node:sea').isSea() === true;
  } catch {
    // No `node:sea` (before Node.js 20.12, or another runtime): a single-executable application
    // is not told apart here; its reaper never says it runs, and the link gives up on it.
  }
  return { isSea, releaseName: process.release?.name, execPath: process.execPath, script, scriptExists: script !== undefined && existsSync(script) };
}
