// Packs the package, its linux-x64-gnu platform package and the Docker companion package, installs
// them into empty projects and uses them from there, as a user would: every entry point, and the
// original packages' names swapped in with no edit.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const tarball = (name) => `${name}-${version}.tgz`;
let project;
let aliased;

function run(command, args, cwd) {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Installs as a consumer does (scripts allowed): npm's warnings, which must say nothing of install scripts. */
function consumerInstall(args, cwd) {
  const installed = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', ...args], { cwd, encoding: 'utf8' });
  assert.equal(installed.status, 0, installed.stderr);
  assert.doesNotMatch(installed.stderr, /install-scripts|install script/i, 'installing the published packages warns of no install script');
  return installed.stderr;
}

/** Scripts npm runs when a package is installed. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare', 'preprepare', 'postprepare'];

before(() => {
  project = mkdtempSync(join(tmpdir(), 'native-sandbox-pack-'));
  run('npm', ['pack', '--silent', '--pack-destination', project], root);
  run('npm', ['pack', '--silent', '--pack-destination', project], join(root, 'npm', 'linux-x64-gnu'));
  const tarballs = readdirSync(project).filter((f) => f.endsWith('.tgz')).sort();
  assert.deepEqual(tarballs, [tarball('native-sandbox'), tarball('native-sandbox-linux-x64-gnu')]);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  consumerInstall(tarballs.map((t) => `./${t}`), project);
});

after(() => {
  if (project) rmSync(project, { recursive: true, force: true });
  if (aliased) rmSync(aliased, { recursive: true, force: true });
});

test('no published package has an install-time script', () => {
  for (const name of ['native-sandbox', 'native-sandbox-linux-x64-gnu']) {
    const manifest = JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8'));
    assert.deepEqual(Object.keys(manifest.scripts ?? {}).filter((script) => INSTALL_SCRIPTS.includes(script)), [], name);
  }
  const companion = JSON.parse(readFileSync(join(root, 'packages', 'docker', 'package.json'), 'utf8'));
  assert.deepEqual(Object.keys(companion.scripts ?? {}).filter((script) => INSTALL_SCRIPTS.includes(script)), []);
});

test('the main tarball ships the JS layer and no addon; the platform tarball ships the addon', () => {
  const main = run('tar', ['-tzf', join(project, tarball('native-sandbox'))], project).split('\n');
  assert.ok(main.includes('package/index.js') && main.includes('package/binding.cjs') && main.includes('package/js/parsers.js'));
  assert.ok(main.includes('package/index.d.ts') && main.includes('package/LICENSE') && main.includes('package/README.md'));
  assert.equal(main.some((f) => f.endsWith('.node') || f.startsWith('package/src/') || f.startsWith('package/target/')), false);
  const platform = run('tar', ['-tzf', join(project, tarball('native-sandbox-linux-x64-gnu'))], project).split('\n');
  assert.ok(platform.includes('package/native-sandbox.linux-x64-gnu.node'));
});

test('an installed consumer imports every entry point, loading the platform package', () => {
  const script = `
    import { createRequire } from 'node:module';
    const root = await import('native-sandbox');
    const subpaths = {};
    for (const name of ['backend', 'node', 'acp', 'docker', 'conformance', 'agentproto']) subpaths[name] = Object.keys(await import('native-sandbox/' + name));
    const parsed = root.parseSandboxGuestPath('/sandbox/workspace');
    const require = createRequire(import.meta.url);
    const addon = Object.keys(require.cache).filter((f) => f.endsWith('.node'));
    console.log(JSON.stringify({ root: Object.keys(root).length, subpaths, parsed, addon }));
  `;
  const out = JSON.parse(run(process.execPath, ['--input-type=module', '-e', script], project));
  assert.equal(out.root, 27);
  assert.deepEqual(out.subpaths, { backend: ['createSandboxBackend'], node: ['SandboxDirectoryCleanupError', 'createSandboxSpillStore', 'exportSandboxDirectory', 'importSandboxDirectory'], acp: ['createSandboxAcpIntegration'], docker: ['DOCKER_SANDBOX_GUEST', 'createDockerSandboxBackend', 'dockerSandboxEgress', 'dockerSandboxRuntime', 'prepareDockerSandboxImage'], conformance: ['runSandboxConformance'], agentproto: ['SandboxProviderError', 'createDockerSandboxProvider', 'resolveLifecyclePolicy'] });
  assert.equal(out.parsed, '/sandbox/workspace');
  assert.equal(out.addon.length, 1);
  assert.match(out.addon[0], /node_modules\/native-sandbox-linux-x64-gnu\/native-sandbox\.linux-x64-gnu\.node$/);
});

test('without the optional MCP SDK, the agentproto entry imports and a boot is refused typed before any engine call', () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    const { createDockerSandboxProvider } = await import('native-sandbox/agentproto');
    const dir = () => mkdtempSync(join(tmpdir(), 'agentproto-pack-'));
    const provider = createDockerSandboxProvider({ namespace: 'pack-no-sdk', spillDirectory: dir(), stateDirectory: dir() });
    const spec = { provider: 'docker', config: { image: 'sha256:${'0'.repeat(64)}', daemon: { executable: '/bin/daemon' } } };
    try { await provider.boot(spec, { env: {} }); console.log('booted') } catch (e) { console.log(e.name, e.code) }
  `;
  const out = run(process.execPath, ['--input-type=module', '-e', script], project);
  assert.equal(out.trim(), 'SandboxProviderError sandbox_sdk_missing');
});

test('installing the package pulls no framework; each adapter entry then fails at import, naming the package to add', () => {
  for (const name of ['ai', '@mastra/core', '@openai/agents-core']) {
    assert.equal(spawnSync('test', ['-e', join(project, 'node_modules', name)]).status, 1, `${name} was not installed`);
  }
  const script = `
    for (const name of ['ai-sdk', 'mastra', 'openai-agents']) {
      try { await import('native-sandbox/' + name); console.log(name, 'imported') } catch (e) { console.log(name, e.name, e.message) }
    }
  `;
  const out = run(process.execPath, ['--input-type=module', '-e', script], project).trim().split('\n');
  assert.equal(out.length, 3, out.join('\n'));
  assert.match(out[0], /^ai-sdk SandboxUnsupportedError .*'ai' is not installed here.*npm install ai@7/);
  assert.match(out[1], /^mastra SandboxUnsupportedError .*'@mastra\/core' is not installed here.*npm install @mastra\/core@1/);
  assert.match(out[2], /^openai-agents SandboxUnsupportedError .*'@openai\/agents-core' is not installed here.*npm install @openai\/agents@0\.20/);
});

test('an installed consumer gets typed validation errors from the native parsers', () => {
  const out = run(process.execPath, ['--input-type=module', '-e', "const m = await import('native-sandbox'); try { m.parseSandboxRequest({}) } catch (e) { console.log(e.name, e.issues[0].code, e.issues[0].path.join('.')) }"], project);
  assert.equal(out.trim(), 'SandboxValidationError required policy');
});

test('the original packages swap in with no edit: both copies behave as one', () => {
  // The companion and the root are versioned together.
  assert.equal(JSON.parse(readFileSync(join(root, 'packages', 'docker', 'package.json'), 'utf8')).dependencies['native-sandbox'], version);
  // What `"@agen-ai/sandbox": "npm:native-sandbox@…"` and `"@agen-ai/sandbox-docker":
  // "npm:native-sandbox-docker@…"` install: native-sandbox under the original's name, and again
  // as the companion's own dependency. Offline, from the tarballs, with the same layout.
  aliased = mkdtempSync(join(tmpdir(), 'native-sandbox-alias-'));
  for (const tarball of readdirSync(project).filter((f) => f.endsWith('.tgz'))) copyFileSync(join(project, tarball), join(aliased, tarball));
  run('npm', ['pack', '--silent', '--pack-destination', aliased], join(root, 'packages', 'docker'));
  writeFileSync(
    join(aliased, 'package.json'),
    JSON.stringify({
      name: 'original-consumer',
      private: true,
      type: 'module',
      dependencies: {
        '@agen-ai/sandbox': `file:./${tarball('native-sandbox')}`,
        '@agen-ai/sandbox-docker': `file:./${tarball('native-sandbox-docker')}`,
        'native-sandbox': `file:./${tarball('native-sandbox')}`,
        'native-sandbox-linux-x64-gnu': `file:./${tarball('native-sandbox-linux-x64-gnu')}`,
      },
    }),
  );
  consumerInstall([], aliased);
  const companion = run('tar', ['-tzf', join(aliased, tarball('native-sandbox-docker'))], aliased).split('\n').filter(Boolean).sort();
  assert.deepEqual(companion, ['package/LICENSE', 'package/README.md', 'package/index.d.ts', 'package/index.js', 'package/package.json']);
  copyFileSync(join(root, '__test__', 'fixtures', 'alias-consumer', 'flow.mjs'), join(aliased, 'flow.mjs'));
  const namespace = `${process.env.NATIVE_SANDBOX_TEST_RUN ?? `r${process.pid}`}-alias-${process.pid}`;
  const out = JSON.parse(run(process.execPath, ['flow.mjs', namespace], aliased).trim().split('\n').at(-1));
  assert.deepEqual(out, {
    validationAcrossCopies: true,
    stateAcrossCopies: true,
    exit: { kind: 'exited', code: 0 },
    exported: 'HELLO FROM THE HOST\n',
    addons: 1,
  });
});

