// Workspace and subtree exports through the workspace helper (a tree walk in the holder, never
// following a link), held to the rules the engine's archive endpoint gave them: the same
// entries, and the same refusals of what the guest may have made.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, test } from 'node:test';
import { SandboxOperationError, SandboxValidationError } from 'native-sandbox';
import { dockerBackend, holderOf, IMAGE, leftovers, NOTHING, request, runShell, stoppedHolder, uniqueNamespace } from './docker-helpers.mjs';
import { described } from './helpers.mjs';

const namespace = uniqueNamespace('export-tree');
const backend = dockerBackend(namespace);
after(() => assert.deepEqual(leftovers(namespace), NOTHING));

/** A stopped sandbox after `script` ran in its workspace. */
async function prepared(script) {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  const result = await runShell(sandbox, script);
  assert.deepEqual(result.exit, { kind: 'exited', code: 0 }, result.stderr);
  await sandbox.stop();
  return sandbox;
}

async function collect(sandbox, selection) {
  const entries = [];
  const summary = await sandbox.exportTree(selection, async (entry) => {
    if (entry.kind === 'file') {
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      entries.push([entry.path, Buffer.concat(chunks).toString(), entry.executable]);
    } else {
      entries.push([entry.path]);
    }
  });
  return { entries, summary };
}

/** The workspace as the engine's archive endpoint lists it (`tar -t` of its archive). */
function engineListing(sandbox, path) {
  const archive = execFileSync('curl', ['-sf', '--unix-socket', '/var/run/docker.sock', `http://engine/containers/${holderOf(sandbox)}/archive?path=${encodeURIComponent(path)}`]);
  return execFileSync('tar', ['-tf', '-'], { input: archive, encoding: 'utf8' }).split('\n').filter(Boolean).map((name) => name.replace(/\/$/, ''));
}

test('a workspace export lists what the engine lists: directories, files, modes, long and deep names, empty files', async () => {
  const long = 'n'.repeat(200);
  const sandbox = await prepared(
    `mkdir -p a/b/c/d e "${long}" && printf one > a/one.txt && printf two > a/b/c/d/two.txt && : > e/empty && printf run > run.sh && chmod 755 run.sh && printf long > "${long}/${long}"`,
  );
  try {
    const { entries, summary } = await collect(sandbox, { kind: 'workspace' });
    const engine = engineListing(sandbox, '/sandbox/workspace').filter((name) => name !== 'workspace').map((name) => name.replace(/^workspace\//, ''));
    assert.deepEqual(entries.map(([path]) => path).sort(), engine.sort());
    assert.deepEqual(entries.find(([path]) => path === 'run.sh'), ['run.sh', 'run', true]);
    assert.deepEqual(entries.find(([path]) => path === 'a/b/c/d/two.txt'), ['a/b/c/d/two.txt', 'two', false]);
    assert.deepEqual(entries.find(([path]) => path === 'e/empty'), ['e/empty', '', false]);
    assert.deepEqual(entries.find(([path]) => path === `${long}/${long}`), [`${long}/${long}`, 'long', false]);
    assert.equal(summary.files, 5n);
    const subtree = await collect(sandbox, { kind: 'subtree', path: 'a/b' });
    assert.deepEqual(subtree.entries, [['a/b'], ['a/b/c'], ['a/b/c/d'], ['a/b/c/d/two.txt', 'two', false]]);
  } finally {
    await sandbox.destroy();
  }
});

test('an export settles once its archive is whole; the helper still exits on its own, and the next transfers wait for it', async () => {
  const sandbox = await prepared('mkdir -p d && printf one > d/one.txt && printf two > two.txt');
  try {
    const expected = [['d'], ['d/one.txt', 'one', false], ['two.txt', 'two', false]];
    // Back to back: each run waits for the previous helper's exit before it starts the holder.
    for (let i = 0; i < 3; i++) {
      const { entries } = await collect(sandbox, { kind: 'workspace' });
      assert.deepEqual(entries.sort(), expected);
    }
    const exact = await collect(sandbox, { kind: 'files', paths: ['two.txt', 'd/one.txt'] });
    assert.deepEqual(exact.entries, [['two.txt', 'two', false], ['d/one.txt', 'one', false]]);
    // The last helper was not killed: it stops by itself, exiting 0, after its export settled.
    assert.deepEqual(await stoppedHolder(sandbox), { running: false, exitCode: 0 });
  } finally {
    await sandbox.destroy();
  }
});

test("what the guest made that a tree may not hold is refused by name: hard links, FIFOs, devices; sockets are left out", async () => {
  const cases = [
    ['printf x > a && ln a b', /b is a hard link/],
    ['mkfifo pipe', /pipe is a FIFO/],
    ['mkdir d && ln -s ../../.. d/up', /d\/up is a symbolic link/],
  ];
  for (const [script, refusal] of cases) {
    const sandbox = await prepared(script);
    try {
      const error = await collect(sandbox, { kind: 'workspace' }).catch((e) => e);
      assert.ok(error instanceof SandboxOperationError, `${script}: ${error}`);
      assert.match(error.message, refusal, script);
    } finally {
      await sandbox.destroy();
    }
  }
  const withSocket = await prepared('printf k > kept && (nc -lU sock >/dev/null 2>&1 & sleep 1; kill $! 2>/dev/null; true)');
  try {
    const hasSocket = runShellListing(withSocket);
    const { entries } = await collect(withSocket, { kind: 'workspace' });
    assert.deepEqual(entries.map(([path]) => path), hasSocket ? ['kept'] : entries.map(([path]) => path));
  } finally {
    await withSocket.destroy();
  }
});

/** Whether the engine lists a socket in the workspace (busybox `nc -lU` may be absent). */
function runShellListing(sandbox) {
  return engineListing(sandbox, '/sandbox/workspace').includes('workspace/sock');
}

/** `paths` of `sandbox`'s workspace with their modes (`644 secret`), read by the engine as root. */
function modesOf(sandbox, paths) {
  const volume = execFileSync('docker', ['inspect', '--format', '{{range .Mounts}}{{if eq .Destination "/sandbox/workspace"}}{{.Name}}{{end}}{{end}}', holderOf(sandbox)], { encoding: 'utf8' }).trim();
  const out = execFileSync('docker', ['run', '--rm', '--network', 'none', '--user', '0', '-v', `${volume}:/w:ro`, '-w', '/w', IMAGE, 'stat', '-c', '%a %n', ...paths], { encoding: 'utf8' });
  return out.trim().split('\n');
}

test('entries their owner closed (mode 000) are exported as the original exported them, and keep their modes', async () => {
  const closed = ['secret', 'closed', 'closed/inner', 'closed/inner/f', 'open/o', 'readable', 'searchable'];
  const sandbox = await prepared(
    'printf s > secret && mkdir -p closed/inner open readable searchable && printf f > closed/inner/f && printf g > closed/g && printf o > open/o && printf r > readable/r && printf x > searchable/x && chmod 000 secret closed/inner/f open/o closed/inner closed && chmod 400 readable && chmod 100 searchable',
  );
  try {
    const before = modesOf(sandbox, closed);
    assert.deepEqual(before, closed.map((path) => `${{ readable: 400, searchable: 100 }[path] ?? 0} ${path}`));
    const { entries } = await collect(sandbox, { kind: 'workspace' });
    assert.deepEqual(entries.map(([path]) => path).sort(), engineListing(sandbox, '/sandbox/workspace').map((name) => name.replace(/^workspace\/?/, '')).filter(Boolean).sort());
    const files = Object.fromEntries(entries.filter((entry) => entry.length > 1).map(([path, text, executable]) => [path, [text, executable]]));
    assert.deepEqual(files, { secret: ['s', false], 'closed/g': ['g', false], 'closed/inner/f': ['f', false], 'open/o': ['o', false], 'readable/r': ['r', false], 'searchable/x': ['x', false] });
    const subtree = await collect(sandbox, { kind: 'subtree', path: 'closed/inner' });
    assert.deepEqual(subtree.entries, [['closed/inner'], ['closed/inner/f', 'f', false]]);
    const exact = [];
    await sandbox.exportTree({ kind: 'files', paths: ['closed/inner/f', 'secret'] }, async (entry) => {
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      exact.push([entry.path, Buffer.concat(chunks).toString()]);
    });
    assert.deepEqual(exact, [['closed/inner/f', 'f'], ['secret', 's']]);
    // Nothing was left widened: every mode is as the guest left it.
    assert.deepEqual(modesOf(sandbox, closed), before);
  } finally {
    await sandbox.destroy();
  }
});

test('an export abandoned inside a closed directory puts its mode back', async () => {
  const sandbox = await prepared('mkdir closed && i=0; while [ $i -lt 300 ]; do head -c 65536 /dev/zero > closed/f$i; i=$((i+1)); done; chmod 000 closed');
  try {
    assert.deepEqual(modesOf(sandbox, ['closed']), ['0 closed']);
    const whole = await collect(sandbox, { kind: 'workspace' });
    assert.equal(whole.entries.filter((entry) => entry.length > 1).length, 300, 'the whole closed directory exports');
    const abandoned = await sandbox
      .exportTree({ kind: 'workspace' }, async (entry) => {
        if (entry.path === 'closed/f1') throw new Error('consumer gave up');
        if (entry.kind === 'file') for await (const chunk of entry.bytes) void chunk;
      })
      .catch((e) => e);
    assert.match(String(abandoned?.message), /consumer gave up/);
    // The helper is told to stop: it puts the mode back before it exits.
    const state = await stoppedHolder(sandbox);
    assert.equal(state.running, false);
    assert.equal(state.exitCode, 3, 'the helper was told to stop (SIGTERM) and put its modes back itself');
    assert.deepEqual(modesOf(sandbox, ['closed']), ['0 closed']);
  } finally {
    await sandbox.destroy();
  }
});

test('subtree roots: missing, a file, a link, or reached through a link are refused as before', async () => {
  const sandbox = await prepared('mkdir real && printf f > real/f && printf x > file && ln -s real link');
  try {
    const missing = await collect(sandbox, { kind: 'subtree', path: 'nothing/here' }).catch((e) => e);
    assert.ok(missing instanceof SandboxValidationError, `${missing}`);
    assert.match(described(missing), /does not exist/);
    const file = await collect(sandbox, { kind: 'subtree', path: 'file' }).catch((e) => e);
    assert.match(described(file), /file is not a directory/);
    const link = await collect(sandbox, { kind: 'subtree', path: 'link' }).catch((e) => e);
    assert.ok(link instanceof SandboxOperationError || link instanceof SandboxValidationError, `${link}`);
    assert.match(described(link), /link/);
    const through = await collect(sandbox, { kind: 'subtree', path: 'link/f' }).catch((e) => e);
    assert.ok(through instanceof SandboxValidationError, `a path through a link is never followed: ${through}`);
    assert.match(described(through), /link\/f does not exist/);
    const { entries } = await collect(sandbox, { kind: 'subtree', path: 'real' });
    assert.deepEqual(entries, [['real'], ['real/f', 'f', false]]);
  } finally {
    await sandbox.destroy();
  }
});
