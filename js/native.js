// The native addon, loaded once through the package loader (never from target/).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** @type {Record<string, Function>} */
export const native = require('../binding.cjs');
