// Engine discovery as the docker CLI does it when DOCKER_HOST is unset: DOCKER_CONTEXT, else the
// configuration's currentContext, resolved through the context store; a context that cannot be
// used fails naming it; DOCKER_HOST still wins over any context.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withSandbox } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';
import { collect, IMAGE, leftovers, NOTHING, request, spillDirectory, uniqueNamespace } from './docker-helpers.mjs';
import { startEngineFront } from './engine-front.mjs';

const front = await startEngineFront();
const work = mkdtempSync(join(tmpdir(), 'native-sandbox-context-'));
const namespaces = [];

after(() => {
  front.close();
  rmSync(work, { recursive: true, force: true });
  for (const namespace of namespaces) assert.deepEqual(leftovers(namespace), NOTHING, namespace);
});

/** A docker configuration directory whose contexts name `hosts` and whose current is `current`. */
function dockerConfig(label, current, hosts) {
  const directory = join(work, label);
  mkdirSync(directory, { recursive: true });
  if (current !== undefined) writeFileSync(join(directory, 'config.json'), JSON.stringify({ auths: {}, currentContext: current }));
  for (const [name, host] of Object.entries(hosts)) {
    const meta = join(directory, 'contexts', 'meta', createHash('sha256').update(name).digest('hex'));
    mkdirSync(meta, { recursive: true });
    writeFileSync(join(meta, 'meta.json'), JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: host, SkipTLSVerify: false } } }));
  }
  return directory;
}

/** Runs `create` with exactly `variables` set among the docker CLI's engine variables. */
function withEnvironment(variables, create) {
  const names = ['DOCKER_HOST', 'DOCKER_CONTEXT', 'DOCKER_CONFIG', 'DOCKER_TLS_VERIFY', 'DOCKER_CERT_PATH'];
  const saved = Object.fromEntries(names.map((name) => [name, process.env[name]]));
  for (const name of names) delete process.env[name];
  Object.assign(process.env, variables);
  try {
    return create();
  } finally {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  }
}

function backend(label, variables) {
  const namespace = uniqueNamespace(label);
  namespaces.push(namespace);
  return withEnvironment(variables, () => createDockerSandboxBackend({ image: IMAGE, namespace, spillDirectory: spillDirectory() }));
}

/** The demo's steps: import a directory, run a process over it, stop, export, destroy. */
async function wholeFlow(docker) {
  const project = mkdtempSync(join(work, 'project-'));
  writeFileSync(join(project, 'words.txt'), 'rust\nnode\n');
  const output = join(mkdtempSync(join(work, 'output-')), 'out');
  return withSandbox(
    docker,
    request(),
    async (sandbox) => {
      await importSandboxDirectory(sandbox, project);
      const process = sandbox.reserveProcess({ executable: '/bin/sh', args: ['-c', 'mkdir -p results; sort -r words.txt > results/sorted.txt; cat'], env: {}, cwd: sandbox.workspace });
      const streams = await process.start();
      const [stdout, stderr] = [collect(streams.stdout), collect(streams.stderr)];
      streams.stdin.end('through the context\n');
      const exit = await streams.exit;
      await sandbox.stop();
      const exported = await exportSandboxDirectory(sandbox, { kind: 'subtree', path: 'results' }, output);
      return {
        exit,
        stdout: (await stdout).toString(),
        stderr: (await stderr).toString(),
        sorted: readFileSync(join(exported.directory, 'results', 'sorted.txt'), 'utf8'),
      };
    },
    { recovery: { kind: 'in_process' } },
  );
}

const expected = { exit: { kind: 'exited', code: 0 }, stdout: 'through the context\n', stderr: '', sorted: 'rust\nnode\n' };

test('the current context of DOCKER_CONFIG names the engine: a whole flow goes through it', async () => {
  const config = dockerConfig('current', 'desk', { desk: `unix://${front.path}` });
  const docker = backend('context-current', { DOCKER_CONFIG: config });
  const before = { ...front.counts };
  assert.deepEqual(await wholeFlow(docker), expected);
  assert.ok(front.counts.requests > before.requests + 5, `requests went through the context's socket (${front.counts.requests - before.requests})`);
  assert.ok(front.counts.attaches > before.attaches, 'the process was attached through the context\'s socket');
});

test('DOCKER_CONTEXT wins over currentContext, and DOCKER_HOST over both', async () => {
  const missing = join(work, 'no-engine-here.sock');
  const config = dockerConfig('both', 'gone', { desk: `unix://${front.path}`, gone: `unix://${missing}` });
  const viaVariable = backend('context-variable', { DOCKER_CONFIG: config, DOCKER_CONTEXT: 'desk' });
  let before = front.counts.attaches;
  assert.deepEqual(await wholeFlow(viaVariable), expected);
  assert.ok(front.counts.attaches > before, 'DOCKER_CONTEXT: attached through its socket');

  const viaHost = backend('context-host', { DOCKER_CONFIG: config, DOCKER_CONTEXT: 'gone', DOCKER_HOST: `unix://${front.path}` });
  before = front.counts.attaches;
  assert.deepEqual(await wholeFlow(viaHost), expected);
  assert.ok(front.counts.attaches > before, 'DOCKER_HOST: attached through its socket');

  // The default context is the default engine, whatever the configuration's current one is.
  const viaDefault = backend('context-default', { DOCKER_CONFIG: config, DOCKER_CONTEXT: 'default' });
  before = front.counts.requests;
  assert.deepEqual(await wholeFlow(viaDefault), expected);
  assert.equal(front.counts.requests, before, 'the default context does not use the other contexts\' sockets');
});

/** The failure `variables` give: at the backend's creation, or else at the first start. */
async function failure(label, variables) {
  let docker;
  try {
    docker = backend(label, variables);
  } catch (error) {
    return error;
  }
  return docker
    .reserve(request(), { kind: 'in_process' })
    .start()
    .then(
      () => assert.fail(`${label}: started`),
      (error) => error,
    );
}

test('a context that cannot be used fails naming the context and why, never another engine', async () => {
  const missing = join(work, 'missing.sock');
  const config = dockerConfig('unusable', 'away', {
    away: `unix://${missing}`,
    remote: 'ssh://user@engine.example',
  });
  // A socket not there yet fails the start (the backend is created), naming the context.
  const away = await failure('context-missing-socket', { DOCKER_CONFIG: config });
  const awayText = away.cause?.message ?? away.message;
  assert.match(awayText, /Docker context "away" \(currentContext in .*config\.json\)/);
  assert.ok(awayText.includes(missing), awayText);

  const ssh = await failure('context-ssh', { DOCKER_CONFIG: config, DOCKER_CONTEXT: 'remote' });
  assert.match(ssh.message, /Docker context "remote" \(DOCKER_CONTEXT\) names ssh:\/\/user@engine\.example/);

  const unknown = await failure('context-unknown', { DOCKER_CONFIG: config, DOCKER_CONTEXT: 'nowhere' });
  assert.match(unknown.message, /Docker context "nowhere" \(DOCKER_CONTEXT\) is not found/);

  const tlsDirectory = join(config, 'contexts', 'tls', createHash('sha256').update('remote').digest('hex'), 'docker');
  mkdirSync(tlsDirectory, { recursive: true });
  writeFileSync(join(tlsDirectory, 'ca.pem'), 'not a certificate');
  const config2 = dockerConfig('unusable', 'remote', { remote: 'tcp://127.0.0.1:9' });
  const tls = await failure('context-tls', { DOCKER_CONFIG: config2 });
  assert.match(tls.message, /Docker context "remote" \(currentContext in .*\): its TLS material .* is incomplete/);
});
