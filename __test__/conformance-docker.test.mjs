// The conformance suite against the Docker backend on the engine's default runtime (runc).
import { runSandboxConformance } from 'native-sandbox/conformance';
import { dockerBackend, leftovers, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('conformance');

runSandboxConformance({
  name: 'Docker backend (runc)',
  createBackend: () => dockerBackend(namespace),
  guest: { shell: '/bin/sh' },
  census: () => Object.entries(leftovers(namespace)).flatMap(([kind, ids]) => ids.map((id) => `${kind} ${id}`)),
});
