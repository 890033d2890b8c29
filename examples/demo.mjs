// The demo of what native-sandbox does today: validate a sandbox request and a process recipe
// in the Rust core, print the normalized, frozen results, and show how a bad request is
// reported (every issue, each naming its field). Starting a sandbox arrives with the Docker
// backend; until then this demo says so instead of pretending.
import {
  parseSandboxProcessSpec,
  parseSandboxRequest,
  SANDBOX_DEFAULT_STREAM_LIMITS,
  SANDBOX_DEFAULT_TRANSFER_BUFFERS,
  SandboxValidationError,
} from 'native-sandbox';

const request = parseSandboxRequest({
  policy: {
    resources: { cpus: 1, memoryBytes: 256 * 1024 * 1024, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 * 1024, tempBytes: 64 * 1024 * 1024 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
});
console.log('validated request (defaults filled, deeply frozen: %s):', Object.isFrozen(request.policy.resources));
console.log(JSON.stringify(request, null, 2));

const recipe = parseSandboxProcessSpec({
  executable: '/bin/sh',
  args: ['-c', 'cat; echo done >&2'],
  env: { LANG: 'C.UTF-8' },
  cwd: '/sandbox/workspace',
});
console.log('\nvalidated process recipe:');
console.log(JSON.stringify(recipe, null, 2));

try {
  parseSandboxRequest({
    policy: {
      ...request.policy,
      resources: { cpus: Number.NaN, memoryBytes: -1, pids: 1.5 },
      deadlines: { startupMs: 30_000, cleanupMs: 30_000, executionMs: 600_000 },
    },
  });
  throw new Error('a bad request was accepted');
} catch (error) {
  if (!(error instanceof SandboxValidationError)) throw error;
  console.log('\nrejected request, every issue at once:');
  for (const issue of error.issues) console.log(`  ${issue.path.join('.')}: ${issue.code}: ${issue.message}`);
}

console.log('\nThe Docker backend (native-sandbox/docker) is not built yet: no sandbox was started.');
