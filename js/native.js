// The native addon, loaded once per process through the package loader (never from target/),
// whichever installed copy of the package asks first (see shared.js).
import { createRequire } from 'node:module';
import { shared } from './shared.js';
import { warnIfUntestedNode } from './node-version.js';

const require = createRequire(import.meta.url);

/** @type {Record<string, Function>} */
export const native = shared('native', () => require('../binding.cjs'));

// Told once per process, however many copies of the package load.
shared('untestedNodeWarned', () => warnIfUntestedNode());
