// prepareDockerSandboxImage: an image as official images are (Docker's default PATH plus their own
// variables, an entrypoint, a user, a working directory) is refused by admission; prepared, it
// runs a process, and what was dropped comes back for the process recipe.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SandboxStartError, SandboxStateError, SandboxValidationError } from 'native-sandbox';
import { prepareDockerSandboxImage } from 'native-sandbox/docker';
import { dockerBackend, IMAGE, leftovers, NOTHING, request, runOnce, runShell, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('prepare');
const stock = `${namespace}-stock:1`;
const prepared = `${namespace}-prepared:1`;
const DOCKER_DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const imageId = (image) => execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', image], { encoding: 'utf8' }).trim();

before(() => {
  const context = mkdtempSync(join(tmpdir(), 'native-sandbox-stock-'));
  writeFileSync(
    join(context, 'Dockerfile'),
    `FROM ${IMAGE}\nENV PATH=${DOCKER_DEFAULT_PATH} JAVA_HOME=/opt/java LANG=C.UTF-8\nWORKDIR /opt\nUSER 1234\nENTRYPOINT ["/bin/false"]\n`,
  );
  execFileSync('docker', ['build', '-q', '-t', stock, context], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DOCKER_BUILDKIT: '0' } });
  rmSync(context, { recursive: true, force: true });
});

after(() => {
  execFileSync('docker', ['image', 'rm', '-f', stock, prepared], { stdio: 'ignore' });
  assert.deepEqual(leftovers(namespace), NOTHING);
});

test('a stock-like image is refused by admission; prepared, it runs a process with what was dropped passed explicitly', async () => {
  const refused = await runOnce(dockerBackend(namespace, { image: stock }), 'true').catch((e) => e);
  assert.ok(refused instanceof SandboxStartError, String(refused));
  assert.match(refused.cause?.message ?? '', /JAVA_HOME/);
  // The refusal names the fix.
  assert.match(refused.cause?.message ?? '', new RegExp(`prepareDockerSandboxImage\\(\\{ from: '${imageId(stock)}', tag: '[^']+' \\}\\) from native-sandbox/docker .*droppedEnv`));

  const result = await prepareDockerSandboxImage({ from: stock, tag: prepared });
  assert.deepEqual({ ...result, droppedEnv: { ...result.droppedEnv } }, {
    image: prepared,
    id: imageId(prepared),
    droppedEnv: { PATH: DOCKER_DEFAULT_PATH, JAVA_HOME: '/opt/java', LANG: 'C.UTF-8' },
  });
  assert.ok(Object.isFrozen(result) && Object.isFrozen(result.droppedEnv));
  const env = execFileSync('docker', ['image', 'inspect', '--format', '{{json .Config.Env}} {{json .Config.Entrypoint}}', prepared], { encoding: 'utf8' }).trim();
  assert.equal(env, '["PATH=/usr/local/bin:/usr/bin:/bin"] null');

  const backend = dockerBackend(namespace, { image: result.image });
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const ran = await runShell(sandbox, 'echo "$JAVA_HOME $LANG $PATH"; id -u', { env: { JAVA_HOME: result.droppedEnv.JAVA_HOME, LANG: result.droppedEnv.LANG } });
    assert.deepEqual(ran.exit, { kind: 'exited', code: 0 }, ran.stderr);
    assert.equal(ran.stdout, '/opt/java C.UTF-8 /usr/local/bin:/usr/bin:/bin\n65532\n');
  } finally {
    await sandbox.destroy();
  }
});

test('idempotent: the same source gives the same image without a second build; an admissible source is only tagged', async () => {
  const first = await prepareDockerSandboxImage({ from: stock, tag: prepared });
  const created = execFileSync('docker', ['image', 'inspect', '--format', '{{.Created}}', prepared], { encoding: 'utf8' }).trim();
  const again = await prepareDockerSandboxImage({ from: imageId(stock), tag: prepared });
  assert.equal(again.id, first.id);
  assert.equal(execFileSync('docker', ['image', 'inspect', '--format', '{{.Created}}', prepared], { encoding: 'utf8' }).trim(), created);
  // The prepared image is admissible itself: preparing it again only tags it.
  const tagged = `${namespace}-tagged:1`;
  try {
    const same = await prepareDockerSandboxImage({ from: prepared, tag: tagged });
    assert.deepEqual({ ...same, droppedEnv: { ...same.droppedEnv } }, { image: tagged, id: first.id, droppedEnv: {} });
  } finally {
    execFileSync('docker', ['image', 'rm', tagged], { stdio: 'ignore' });
  }
});

test('bad options are typed and name their field; an image the engine lacks is a state error naming it', async () => {
  const bad = await prepareDockerSandboxImage({ from: '', tag: 'Upper/Case', extra: 1 }).catch((e) => e);
  assert.ok(bad instanceof SandboxValidationError, String(bad));
  assert.deepEqual(bad.issues.map((issue) => issue.path.join('.')).sort(), ['extra', 'from', 'tag']);
  for (const tag of [`x@sha256:${'a'.repeat(64)}`, 'registry.local:5000/Agent:1', `sha256:${'a'.repeat(64)}`]) {
    const refused = await prepareDockerSandboxImage({ from: stock, tag }).catch((e) => e);
    assert.ok(refused instanceof SandboxValidationError, `${tag}: ${refused}`);
    assert.deepEqual(refused.issues.map((issue) => issue.path.join('.')), ['tag']);
  }
  const missing = await prepareDockerSandboxImage({ from: `${namespace}-nothing:1`, tag: prepared }).catch((e) => e);
  assert.ok(missing instanceof SandboxStateError, String(missing));
  assert.match(missing.message, new RegExp(`${namespace}-nothing:1`));
});
