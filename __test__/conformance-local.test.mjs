// The conformance suite against a JavaScript driver through createSandboxBackend: a host
// directory and a local process group (a fixture that isolates nothing; see its header).
import { after } from 'node:test';
import { runSandboxConformance } from 'native-sandbox/conformance';
import { localProcessBackend } from './fixtures/local-process-backend.mjs';

const local = localProcessBackend();
after(() => local.close());

runSandboxConformance({
  name: 'local-process JavaScript driver',
  createBackend: () => local.backend,
  guest: { shell: '/bin/sh' },
  census: local.census,
});
