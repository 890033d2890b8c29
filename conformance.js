// native-sandbox/conformance: the backend conformance suite, as node:test tests.
export { runSandboxConformance } from './js/conformance.js';
