'use strict';
// Loads the native addon: a build beside this file (a checkout after `npm install`), else the
// platform package that npm installs as an optional dependency.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

function platformTriple() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    return `${process.platform}-${process.arch}`;
  }
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
  const glibc = report && report.header && report.header.glibcVersionRuntime;
  return glibc ? 'linux-x64-gnu' : 'linux-x64-musl';
}

function load() {
  const triple = platformTriple();
  const local = join(__dirname, `native-sandbox.${triple}.node`);
  const failures = [];
  if (existsSync(local)) {
    try {
      return require(local);
    } catch (error) {
      failures.push(error);
    }
  }
  try {
    return require(`native-sandbox-${triple}`);
  } catch (error) {
    failures.push(error);
  }
  throw new Error(
    `native-sandbox: no native addon for ${triple}; supported: linux-x64-gnu ` +
      `(install the optional package native-sandbox-${triple}, or run npm install in a checkout with cargo available)`,
    { cause: failures.length === 1 ? failures[0] : new AggregateError(failures, 'addon load attempts') },
  );
}

module.exports = load();
