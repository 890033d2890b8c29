// The Node.js releases this package is tested on. Any other runtime is not refused (`engines`
// says `>=20`), but told so once per process: a `process.emitWarning` with its own code.

/** The majors the test suites run on: 26 and 22 every suite; 20 and 24 the contract, loader and Docker smoke suites. */
export const TESTED_NODE_MAJORS = Object.freeze([20, 22, 24, 26]);

/** The warning's text for a runtime of `version` (`process.versions.node`), or `undefined` if it is tested. */
export function untestedNodeMessage(version) {
  const major = Number.parseInt(String(version).split('.')[0], 10);
  if (TESTED_NODE_MAJORS.includes(major)) return undefined;
  return `native-sandbox is tested on Node.js ${TESTED_NODE_MAJORS.join(', ')}; this is Node.js ${version}, on which nothing was tested (it may work; see docs/install.md)`;
}

/** Warns once, through `emit` (`process.emitWarning`), when this runtime is not a tested one. */
export function warnIfUntestedNode(version = process.versions.node, emit = process.emitWarning) {
  const message = untestedNodeMessage(version);
  if (message !== undefined) emit(message, { type: 'Warning', code: 'NATIVE_SANDBOX_UNTESTED_NODE' });
  return message !== undefined;
}
