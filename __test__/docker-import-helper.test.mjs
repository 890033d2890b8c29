// Imports through the workspace helper (extracted in the holder as the sandbox's user, never
// following a link), held to what the engine's archive endpoint made of the same archive: the
// entries' modes, owner and modification times (directories included), a later import replacing
// what is in its way, and a helper that fails or is abandoned reported and stopped.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { fileFromBytes, SandboxOperationError, SandboxStateError } from 'native-sandbox';
import { dockerBackend, holderOf, leftovers, NOTHING, request, runShell, stoppedHolder, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('import-helper');
const backend = dockerBackend(namespace);
after(() => assert.deepEqual(leftovers(namespace), NOTHING));

const directory = (path) => ({ kind: 'directory', path });
const execFileAsync = promisify(execFile);

/** Every entry of the workspace as the guest sees it: type, mode, owner, size, mtime. */
async function listing(sandbox) {
  const result = await runShell(sandbox, "find . -mindepth 1 | sort | while read -r p; do stat -c '%n|%F|%a|%u:%g|%s|%Y' \"$p\"; done");
  assert.deepEqual(result.exit, { kind: 'exited', code: 0 }, result.stderr);
  return result.stdout
    .trim()
    .split('\n')
    .map((line) => {
      const [path, type, mode, owner, size, mtime] = line.split('|');
      return { path: path.slice(2), type, mode, owner, size: Number(size), mtime: Number(mtime) };
    });
}

/** The archive uploads the engine extracted into `sandbox`'s holder between two of its own times (`engineNow`). */
const engineUploads = (sandbox, since, until) =>
  execFileSync('docker', ['events', '--since', since, '--until', until, '--filter', `container=${holderOf(sandbox)}`, '--filter', 'event=extract-to-dir', '--format', '{{.Action}}'], { encoding: 'utf8', timeout: 30_000 })
    .split('\n')
    .filter(Boolean).length;
/** The engine's clock, which stamps its events. */
const engineNow = () => execFileSync('docker', ['info', '--format', '{{.SystemTime}}'], { encoding: 'utf8', timeout: 30_000 }).trim();

test('entries get their modes, the sandbox user and the import time; a later import replaces what is in its way', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const first = Math.floor(Date.now() / 1000);
    await sandbox.importTree([
      fileFromBytes('plain.txt', Buffer.from('plain')),
      fileFromBytes('bin/run', Buffer.from('#!/bin/sh\n'), { executable: true }),
      directory('empty'),
      fileFromBytes('becomes-dir', Buffer.from('a file for now')),
      fileFromBytes('becomes-file/inner/deep.txt', Buffer.from('deep')),
      fileFromBytes('replaced.txt', Buffer.from('the first body, longer than the second')),
    ]);
    const firstEnd = Math.ceil(Date.now() / 1000);
    // Past the first import's second, so its entries and the second's tell apart.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const second = Math.floor(Date.now() / 1000);
    await sandbox.importTree([
      fileFromBytes('becomes-dir/child', Buffer.from('child')),
      fileFromBytes('becomes-file', Buffer.from('now a file')),
      fileFromBytes('replaced.txt', Buffer.from('second')),
    ]);
    const secondEnd = Math.ceil(Date.now() / 1000);
    const entries = await listing(sandbox);
    const byPath = Object.fromEntries(entries.map((entry) => [entry.path, entry]));
    assert.deepEqual(
      entries.map((e) => [e.path, e.type, e.mode, e.size]),
      [
        ['becomes-dir', 'directory', '755', byPath['becomes-dir'].size],
        ['becomes-dir/child', 'regular file', '644', 5],
        ['becomes-file', 'regular file', '644', 10],
        ['bin', 'directory', '755', byPath.bin.size],
        ['bin/run', 'regular file', '755', 10],
        ['empty', 'directory', '755', byPath.empty.size],
        ['plain.txt', 'regular file', '644', 5],
        ['replaced.txt', 'regular file', '644', 6],
      ],
    );
    for (const entry of entries) assert.equal(entry.owner, '65532:65532', `${entry.path} belongs to the sandbox user`);
    const firstTime = byPath['plain.txt'].mtime;
    const secondTime = byPath['becomes-file'].mtime;
    assert.ok(firstTime >= first && firstTime <= firstEnd, `the first import's time (${firstTime} in ${first}..${firstEnd})`);
    assert.ok(secondTime >= second && secondTime <= secondEnd, `the second import's time (${secondTime} in ${second}..${secondEnd})`);
    // Directories keep their entry's time, after everything written in them.
    for (const path of ['bin', 'empty', 'bin/run']) assert.equal(byPath[path].mtime, firstTime, path);
    for (const path of ['becomes-dir', 'becomes-dir/child', 'replaced.txt']) assert.equal(byPath[path].mtime, secondTime, path);
    assert.deepEqual(await stoppedHolder(sandbox), { running: false, exitCode: 0 }, 'the helper exits after its import');
  } finally {
    await sandbox.destroy();
  }
});

test('large bodies (moved in the kernel, or read through the engine past 16 MiB) come back byte for byte, beside small ones, by every kind of export', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const large = randomBytes(16 * 1024 * 1024 + 1);
    const edge = randomBytes(256 * 1024);
    const small = randomBytes(1000);
    await sandbox.importTree([
      fileFromBytes('a/small-before', small),
      fileFromBytes('a/large.bin', large, { chunkBytes: 64 * 1024 }),
      fileFromBytes('a/edge.bin', edge, { chunkBytes: 64 * 1024 }),
      fileFromBytes('a/small-after', small),
      fileFromBytes('a/b/deep.bin', large, { chunkBytes: 64 * 1024 }),
    ]);
    await sandbox.stop();
    const expected = { 'a/small-before': small, 'a/large.bin': large, 'a/edge.bin': edge, 'a/small-after': small };
    for (const selection of [{ kind: 'workspace' }, { kind: 'subtree', path: 'a' }, { kind: 'files', paths: Object.keys(expected) }]) {
      const seen = {};
      await sandbox.exportTree(selection, async (entry) => {
        if (entry.kind !== 'file') return;
        const chunks = [];
        for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
        seen[entry.path] = Buffer.concat(chunks);
      });
      for (const [path, bytes] of Object.entries(expected)) {
        const key = Object.keys(seen).find((name) => name === path || name.endsWith(`/${path.split('/').pop()}`));
        assert.ok(key && seen[key].equals(bytes), `${selection.kind}: ${path} is byte-exact`);
      }
    }
    // A subtree two levels down: the deferred body is read at its full workspace path.
    const deep = {};
    await sandbox.exportTree({ kind: 'subtree', path: 'a/b' }, async (entry) => {
      if (entry.kind !== 'file') return;
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      deep[entry.path] = Buffer.concat(chunks);
    });
    assert.deepEqual(Object.keys(deep).map((path) => path.split('/').pop()), ['deep.bin']);
    assert.ok(Object.values(deep)[0].equals(large), 'a/b/deep.bin is byte-exact');
  } finally {
    await sandbox.destroy();
  }
});

test('an import settles once the helper said it extracted everything; the helper exits on its own, and the next transfers wait for it', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    // Back to back: each run waits for the previous helper's exit before it starts the holder.
    for (let i = 0; i < 3; i++) await sandbox.importTree([fileFromBytes(`f${i}.txt`, Buffer.from(`body ${i}`)), directory(`d${i}`)]);
    // A process started at once sees every entry of every import.
    const seen = await runShell(sandbox, 'for i in 0 1 2; do cat f$i.txt; test -d d$i && echo; done');
    assert.deepEqual(seen.exit, { kind: 'exited', code: 0 }, seen.stderr);
    assert.equal(seen.stdout, 'body 0\nbody 1\nbody 2\n');
    // The last helper was not killed: it stopped by itself, exiting 0.
    assert.deepEqual(await stoppedHolder(sandbox), { running: false, exitCode: 0 });
  } finally {
    await sandbox.destroy();
  }
});

test('a helper killed mid-import fails the import, naming the helper; the sandbox is fenced and destroys cleanly', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    async function* entries() {
      for (let i = 0; i < 400; i++) {
        if (i === 200) execFileSync('docker', ['kill', holderOf(sandbox)]);
        yield fileFromBytes(`f${i}`, Buffer.alloc(64 * 1024, i));
      }
    }
    const error = await sandbox.importTree(entries()).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, `${error}`);
    assert.match(error.message, /the workspace helper failed \(exit status 137\)/);
    // A failed import may have written part of the tree: execution is fenced for good.
    assert.throws(() => sandbox.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: sandbox.workspace }), SandboxStateError);
  } finally {
    await sandbox.destroy();
  }
});

test('an abandoned import stops the helper, and the next transfer runs it again', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const controller = new AbortController();
    async function* entries() {
      for (let i = 0; i < 400; i++) {
        if (i === 100) controller.abort();
        yield fileFromBytes(`g${i}`, Buffer.alloc(16 * 1024, i));
      }
    }
    const error = await sandbox.importTree(entries(), { signal: controller.signal }).catch((e) => e);
    assert.equal(error.code, 'cancelled');
    await sandbox.stop();
    // The abandoned run's kill is sent before its permit is released: the export below waits
    // for it and never meets a helper that is still being killed.
    const seen = [];
    await sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      seen.push(entry.path);
      if (entry.kind === 'file') for await (const _ of entry.bytes);
    });
    assert.ok(seen.length > 0 && seen.length < 401, `the export saw part of the abandoned import (${seen.length})`);
    assert.deepEqual(await stoppedHolder(sandbox), { running: false, exitCode: 0 }, "the export's helper exits");
  } finally {
    await sandbox.destroy();
  }
});

/** A file entry whose body arrives in chunks of 64 KiB, calling `midway` (and waiting for it) once half of it was given. */
function slowFile(path, bytes, { executable = false, midway }) {
  return {
    kind: 'file',
    path,
    byteLength: bytes.length,
    executable,
    async *open() {
      const chunk = 64 * 1024;
      const half = Math.floor(bytes.length / 2 / chunk) * chunk;
      for (let at = 0; at < bytes.length; at += chunk) {
        if (at === half) await midway();
        yield bytes.subarray(at, Math.min(bytes.length, at + chunk));
      }
    },
  };
}

test('a file of 16 MiB or more, written through the engine, is what the helper would have made: bytes, mode, owner, time, its place cleared, its directory keeping its time', async () => {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const firstSince = engineNow();
    await sandbox.importTree([fileFromBytes('d/was-dir/inner/x', Buffer.from('x')), fileFromBytes('d/was-file', Buffer.from('old'))]);
    const firstUntil = engineNow();
    const long = `d/${'n'.repeat(150)}.bin`;
    const large = randomBytes(16 * 1024 * 1024);
    const second = Math.floor(Date.now() / 1000);
    const secondSince = engineNow();
    await sandbox.importTree([
      fileFromBytes('d/before', Buffer.from('before')),
      // The import outlasts a second midway through a file the engine writes: the file still
      // gets the import's time, and `d`, where the engine writes three files, takes its entry's
      // time once nothing more is written in it.
      slowFile(long, large, { executable: true, midway: () => new Promise((resolve) => setTimeout(resolve, 1100)) }),
      fileFromBytes('d/was-dir', large, { chunkBytes: 64 * 1024 }),
      fileFromBytes('d/was-file', large, { chunkBytes: 64 * 1024 }),
      fileFromBytes('d/after/z', Buffer.from('z')),
      // A name the engine treats as its layers' metadata when it applies a layer (not here).
      fileFromBytes('.wh..wh.kept', large, { chunkBytes: 64 * 1024 }),
    ]);
    const secondUntil = engineNow();
    assert.equal(engineUploads(sandbox, firstSince, firstUntil), 0, 'small files stay with the helper');
    assert.equal(engineUploads(sandbox, secondSince, secondUntil), 4, 'one upload through the engine for each file of 16 MiB or more');
    const entries = await listing(sandbox);
    const byPath = Object.fromEntries(entries.map((entry) => [entry.path, entry]));
    assert.deepEqual(
      entries.map((e) => [e.path, e.type, e.mode, e.type === 'directory' ? 0 : e.size]),
      [
        ['.wh..wh.kept', 'regular file', '644', large.length],
        ['d', 'directory', '755', 0],
        ['d/after', 'directory', '755', 0],
        ['d/after/z', 'regular file', '644', 1],
        ['d/before', 'regular file', '644', 6],
        [long, 'regular file', '755', large.length],
        ['d/was-dir', 'regular file', '644', large.length],
        ['d/was-file', 'regular file', '644', large.length],
      ],
    );
    for (const entry of entries) assert.equal(entry.owner, '65532:65532', `${entry.path} belongs to the sandbox user`);
    const time = byPath['d/before'].mtime;
    assert.ok(time >= second, `the second import's time (${time} ≥ ${second})`);
    for (const path of ['d', long, 'd/was-dir', 'd/was-file', 'd/after', 'd/after/z']) assert.equal(byPath[path].mtime, time, path);
    await sandbox.stop();
    const seen = {};
    await sandbox.exportTree({ kind: 'files', paths: [long, 'd/was-dir'] }, async (entry) => {
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      seen[entry.path] = Buffer.concat(chunks);
    });
    assert.ok(seen[long].equals(large) && seen['d/was-dir'].equals(large), 'byte-exact');
    assert.deepEqual(await stoppedHolder(sandbox), { running: false, exitCode: 0 }, 'the last helper exits');
  } finally {
    await sandbox.destroy();
  }
});

test('while a large body goes through the engine: an abandoned import stops the helper and the upload; a killed helper fails the import, naming it', async () => {
  const large = randomBytes(20 * 1024 * 1024);
  const abandoned = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    const controller = new AbortController();
    const entries = [fileFromBytes('a/first', Buffer.from('first')), slowFile('a/large', large, { midway: async () => controller.abort() }), fileFromBytes('a/last', Buffer.from('last'))];
    const error = await abandoned.importTree(entries, { signal: controller.signal }).catch((e) => e);
    assert.equal(error.code, 'cancelled', `${error}`);
    await abandoned.stop();
    // The next transfer waits for the abandoned run's kill, runs the helper again, and sees
    // what the import wrote before it was abandoned, and nothing after.
    const seen = {};
    await abandoned.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind !== 'file') return;
      const chunks = [];
      for await (const chunk of entry.bytes) chunks.push(Buffer.from(chunk));
      seen[entry.path] = Buffer.concat(chunks);
    });
    assert.equal(seen['a/first']?.toString(), 'first');
    assert.ok(!('a/last' in seen), 'nothing after the abandoned body');
    assert.ok((seen['a/large']?.length ?? 0) < large.length, 'the large body was cut short');
    assert.equal((await stoppedHolder(abandoned)).running, false);
  } finally {
    await abandoned.destroy();
  }
  const killed = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    // The engine holds the holder while it extracts: the kill lands once the large file is
    // written, and the next entry's body waits for it. (The large body is a whole number of
    // 64 KiB chunks, so none of it is held back waiting for the next entry's bytes.)
    let killing;
    const entries = [
      slowFile('b/large', large, { midway: async () => { killing = execFileAsync('docker', ['kill', holderOf(killed)]); } }),
      { kind: 'file', path: 'b/last', byteLength: 4, executable: false, async *open() { await killing; yield Buffer.from('last'); } },
    ];
    const error = await killed.importTree(entries).catch((e) => e);
    assert.ok(error instanceof SandboxOperationError, `${error}`);
    assert.match(error.message, /the workspace helper failed \(exit status 137\)/);
    assert.throws(() => killed.reserveProcess({ executable: '/bin/true', args: [], env: {}, cwd: killed.workspace }), SandboxStateError);
  } finally {
    await killed.destroy();
  }
});
