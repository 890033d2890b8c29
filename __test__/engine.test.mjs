// The engine and guest image that every Docker-backed test relies on, checked as the backend
// will use them: hardened, non-root, no network, read-only root, fixed environment.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';

function docker(...args) {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

test('a Docker engine answers', () => {
  const version = docker('version', '--format', '{{.Server.APIVersion}}').trim();
  assert.match(version, /^1\.\d+$/);
});

test('the guest image holds only the admitted environment', () => {
  const env = JSON.parse(docker('image', 'inspect', '--format', '{{json .Config.Env}}', IMAGE));
  assert.deepEqual([...env].sort(), ['HOME=/sandbox/home', 'PATH=/usr/local/bin:/usr/bin:/bin', 'TMPDIR=/sandbox/tmp']);
});

test('the guest image runs busybox applets as a non-root user under full hardening', () => {
  const out = docker(
    'run', '--rm', '--user', '65532:65532', '--read-only', '--network', 'none', '--cap-drop', 'ALL',
    '--security-opt', 'no-new-privileges', '--init', '--log-driver', 'none', IMAGE,
    'sh', '-c', 'id -u; echo "$HOME $TMPDIR"; touch /x 2>/dev/null && echo writable || echo read-only',
  );
  assert.deepEqual(out.trim().split('\n'), ['65532', '/sandbox/home /sandbox/tmp', 'read-only']);
});
