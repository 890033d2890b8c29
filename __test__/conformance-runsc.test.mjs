// The conformance suite against the Docker backend with `runtime: 'runsc'` (gVisor), which the
// test command registers with the engine (scripts/ensure-runsc.sh).
import { runSandboxConformance } from 'native-sandbox/conformance';
import { dockerBackend, leftovers, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('conformance-runsc');

runSandboxConformance({
  name: 'Docker backend (gVisor, runsc)',
  createBackend: () => dockerBackend(namespace, { runtime: 'runsc' }),
  guest: { shell: '/bin/sh' },
  census: () => Object.entries(leftovers(namespace)).flatMap(([kind, ids]) => ids.map((id) => `${kind} ${id}`)),
});
