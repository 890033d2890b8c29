// Every package packed and installed offline into empty projects, as npm picks for a user: on
// this machine only linux-x64-gnu is installed; with npm's --cpu=arm64 --os=linux --libc=glibc
// only linux-arm64-gnu, and an arm64 Node.js under qemu-user loads it from there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLATFORMS, packageDirectory, root } from '../../scripts/platforms.mjs';

const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const nodes = (process.env.NATIVE_SANDBOX_ARM64_NODES ?? '').split(':').filter(Boolean);
const work = mkdtempSync(join(tmpdir(), 'native-sandbox-platform-pack-'));
const tarballs = join(work, 'tarballs');

const run = (command, args, cwd) => execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

before(() => {
  mkdirSync(tarballs);
  run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', tarballs], root);
  for (const platform of PLATFORMS) run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', tarballs], packageDirectory(platform));
});
after(() => rmSync(work, { recursive: true, force: true }));

/** An empty project depending on the packed root; npm resolves its optional platform packages to the tarballs. */
function consumer(label, flags) {
  const project = join(work, label);
  mkdirSync(project);
  const tarball = (name) => `file:${join(tarballs, `${name}-${version}.tgz`)}`;
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({
      name: `consumer-${label}`,
      private: true,
      type: 'module',
      dependencies: { 'native-sandbox': tarball('native-sandbox') },
      overrides: Object.fromEntries(PLATFORMS.map((p) => [`native-sandbox-${p.name}`, tarball(`native-sandbox-${p.name}`)])),
    }),
  );
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', ...flags], project);
  const installed = readdirSync(join(project, 'node_modules')).filter((name) => name.startsWith('native-sandbox')).sort();
  return { project, installed };
}

const probe = "import { createRequire } from 'node:module'; const m = await import('native-sandbox'); console.log(m.parseSandboxGuestPath('/sandbox/workspace/a'), Object.keys(createRequire(import.meta.url).cache).filter((f) => f.endsWith('.node')).join(','))";

test('every platform tarball holds its addon', () => {
  for (const platform of PLATFORMS) {
    const listing = run('tar', ['-tzf', join(tarballs, `native-sandbox-${platform.name}-${version}.tgz`)], work).split('\n');
    assert.ok(listing.includes(`package/native-sandbox.${platform.name}.node`), platform.name);
  }
});

test('on this machine npm installs only the linux-x64-gnu package, and it is what loads', () => {
  const { project, installed } = consumer('here', []);
  assert.deepEqual(installed, ['native-sandbox', 'native-sandbox-linux-x64-gnu']);
  const [parsed, addon] = run(process.execPath, ['--input-type=module', '-e', probe], project).trim().split(' ');
  assert.equal(parsed, '/sandbox/workspace/a');
  assert.match(addon, /node_modules\/native-sandbox-linux-x64-gnu\/native-sandbox\.linux-x64-gnu\.node$/);
});

test('for linux/arm64 npm installs only the linux-arm64-gnu package, and arm64 Node.js loads it under qemu', () => {
  const { project, installed } = consumer('arm64', ['--cpu=arm64', '--os=linux', '--libc=glibc']);
  assert.deepEqual(installed, ['native-sandbox', 'native-sandbox-linux-arm64-gnu']);
  assert.ok(nodes[1], 'NATIVE_SANDBOX_ARM64_NODES names the arm64 Node.js binaries (scripts/test-platforms.sh)');
  const out = run('qemu-aarch64-static', ['-L', '/usr/aarch64-linux-gnu', nodes[1], '--input-type=module', '-e', probe], project);
  const [parsed, addon] = out.trim().split(' ');
  assert.equal(parsed, '/sandbox/workspace/a');
  assert.match(addon, /node_modules\/native-sandbox-linux-arm64-gnu\/native-sandbox\.linux-arm64-gnu\.node$/);
});

test('a platform without an addon gets an error naming it, the supported list, and what to do', () => {
  const { project } = consumer('wrong', []);
  // The linux-x64-gnu package removed, as `--omit=optional` would leave it.
  rmSync(join(project, 'node_modules', 'native-sandbox-linux-x64-gnu'), { recursive: true });
  let message = '';
  try {
    run(process.execPath, ['--input-type=module', '-e', "await import('native-sandbox')"], project);
  } catch (error) {
    message = String(error.stderr);
  }
  assert.match(message, /no native addon loaded for linux-x64-gnu \(Node\.js v\d+/);
  assert.match(message, /prebuilt platforms: linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64/);
  assert.match(message, /optional package native-sandbox-linux-x64-gnu/);
});
