// native-sandbox/openai-agents: OpenAI Agents JS's own code (its runner, a SandboxAgent with the
// built-in shell and filesystem capabilities, driven by the SDK's ScriptedModel) runs commands and
// patches files in a real Docker sandbox; then the client and session member by member (exec with
// its yield and writeStdin, the file members, manifests, serialize/resume/delete on the recovery
// record, refusals), and the census afterwards. OpenAI Agents JS publishes no provider contract
// check; the member cases hold the adapter to what the SDK's own clients do, as shipped in
// @openai/agents-core 0.20.0: dist/sandbox/sandboxes/unixLocal.mjs (exec's yield and session ids,
// writeStdin's "session not found" answer and ^C as SIGINT, the output token budget, stop ending
// the running commands) and dist/sandbox/sandboxes/docker.mjs (DockerSandboxEditor: a create onto
// an existing file fails, an update may move, a delete of nothing fails; readFile's not-found
// error).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { run, setTracingDisabled } from '@openai/agents';
import { Manifest, SandboxAgent, SandboxArchiveError, SandboxUnsupportedFeatureError, SandboxWorkspaceReadNotFoundError, filesystem, shell } from '@openai/agents/sandbox';
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing';
import { SandboxValidationError } from 'native-sandbox';
import { createOpenAiAgentsSandboxClient } from 'native-sandbox/openai-agents';
import { dockerBackend, IMAGE, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';

// No trace leaves this machine.
setTracingDisabled(true);

const namespace = uniqueNamespace('openai');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the OpenAI Agents suite leaves no engine objects behind');
});

const client = createOpenAiAgentsSandboxClient({ backend, request: request() });

/** A session of `client`, closed however `body` ends. */
async function withSession(body, manifest = new Manifest()) {
  const session = await client.create({ manifest });
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

/** The text the model was handed back for each of its tool calls, in order (its last request holds them all). */
function toolResults(model) {
  return model.calls
    .at(-1)
    .request.input
    .filter((item) => item.type === 'function_call_result' || item.type === 'apply_patch_call_output')
    .map((item) => (item.type === 'apply_patch_call_output' ? `${item.status}: ${item.output}` : typeof item.output === 'string' ? item.output : item.output?.text ?? JSON.stringify(item.output)));
}

describe('OpenAI Agents adapter (the SDK runner drives the sandbox)', () => {
  test('a SandboxAgent run: the manifest is in the workspace, apply_patch writes, exec_command reads it back, a failure says its code', async () => {
    const model = new ScriptedModel([
      // The SDK's hosted apply_patch tool (the transport its Responses models use), through the session's editor.
      [{ type: 'apply_patch_call', callId: 'c1', status: 'completed', operation: { type: 'create_file', path: 'notes/hello.txt', diff: '+hello from the patch\n' } }],
      [functionCall('exec_command', { cmd: 'cat README.md notes/hello.txt; echo; echo "$(id -u) $(pwd)"' }, { callId: 'c2' })],
      [functionCall('exec_command', { cmd: 'echo nope >&2; exit 3' }, { callId: 'c3' })],
      [functionCall('exec_command', { cmd: 'cat no-such-file' }, { callId: 'c4' })],
      [assistantMessage('done')],
    ]);
    const agent = new SandboxAgent({
      name: 'worker',
      model,
      instructions: 'Work in the sandbox.',
      capabilities: [filesystem(), shell()],
      defaultManifest: new Manifest({ entries: { 'README.md': { type: 'file', content: 'read me\n' } } }),
    });
    const result = await run(agent, 'go', { sandbox: { client } });
    assert.equal(result.finalOutput, 'done');
    const tools = model.calls[0].request.tools.map((t) => t.name);
    assert.ok(['exec_command', 'write_stdin', 'apply_patch'].every((name) => tools.includes(name)), `tools offered: ${tools}`);
    const [patched, read, failed, missing] = toolResults(model);
    assert.match(patched, /^completed/, patched);
    assert.match(read, /Process exited with code 0/);
    assert.match(read, /read me\nhello from the patch\n65532 \/sandbox\/workspace/);
    assert.match(failed, /Process exited with code 3\nOutput:\nnope/);
    assert.match(missing, /Process exited with code 1/);
    assert.match(missing, /no-such-file/);
    // The run owned its session: its sandbox is gone.
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('an aborted run asks the model nothing more, and the session the run owned is removed', async () => {
    // The SDK hands its tools no abort signal: the command in flight runs to its yield, then the
    // run stops at the abort and its cleanup stops and removes the sandbox.
    const model = new ScriptedModel([[functionCall('exec_command', { cmd: 'sleep 2; echo slept', yield_time_ms: 30_000 }, { callId: 'c1' })], [assistantMessage('never')]]);
    const agent = new SandboxAgent({ name: 'sleeper', model, instructions: 'x', capabilities: [shell()] });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('enough')), 500);
    const outcome = await run(agent, 'go', { sandbox: { client }, signal: controller.signal }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    assert.ok(outcome.error !== undefined, `the aborted run rejects (it gave ${JSON.stringify(outcome.result?.finalOutput)})`);
    assert.equal(model.calls.length, 1, 'the model was not asked again');
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

describe('OpenAI Agents adapter: the session member by member', () => {
  test('exec yields a running command a session id; writeStdin feeds it, then ^C interrupts it', async () => {
    await withSession(async (session) => {
      const running = await session.exec({ cmd: 'read line; echo "got $line"; read again; echo never', yieldTimeMs: 200 });
      assert.equal(typeof running.sessionId, 'number');
      assert.equal(running.exitCode, undefined);
      const fed = await session.writeStdin({ sessionId: running.sessionId, chars: 'abc\n', yieldTimeMs: 500 });
      assert.match(fed, /Process running with session ID \d+\nOutput:\ngot abc/);
      const interrupted = await session.writeStdin({ sessionId: running.sessionId, chars: '\u0003', yieldTimeMs: 5_000 });
      assert.match(interrupted, /Process exited with code 130/);
      assert.match(await session.writeStdin({ sessionId: running.sessionId, chars: 'x' }), /write_stdin failed: session not found/);
      // A command that does not read its stdin does not hold writeStdin past its yield, and is
      // not ended by the policy's buffered input (1 MiB here): what it did not take is said.
      const deaf = await session.exec({ cmd: 'sleep 3', yieldTimeMs: 100 });
      const writing = Date.now();
      const flooded = await session.writeStdin({ sessionId: deaf.sessionId, chars: 'x'.repeat(4 * 1024 * 1024), yieldTimeMs: 200 });
      assert.match(flooded, /Process running with session ID/);
      assert.match(flooded, /\[\d+ of 4194304 bytes of input not written: the command did not read them in time\]/);
      assert.ok(Date.now() - writing < 2_500, `writeStdin took ${Date.now() - writing} ms`);
      // stop() ends the commands still running (SIGTERM, then SIGKILL); the sandbox goes on.
      const sleeper = await session.exec({ cmd: 'trap "" TERM; sleep 60', yieldTimeMs: 100 });
      const stopping = Date.now();
      await session.stop();
      assert.ok(Date.now() - stopping < 5_000, `stop took ${Date.now() - stopping} ms`);
      assert.match(await session.writeStdin({ sessionId: sleeper.sessionId, chars: '' }), /session not found/);
      const done = await session.exec({ cmd: 'echo out; echo err >&2; exit 4' });
      assert.deepEqual([done.exitCode, done.stdout, done.stderr], [4, 'out\n', 'err\n']);
      assert.match(done.output, /out\n/);
      // The framework's token budget: head and tail kept, the count said.
      const long = await session.exec({ cmd: 'seq 1 20000', maxOutputTokens: 50 });
      assert.equal(typeof long.originalTokenCount, 'number');
      assert.ok(long.output.length < 400, long.output);
    });
  });

  test("a background child holding the output does not hold exec past the sandbox's bound", async () => {
    await withSession(async (session) => {
      const started = Date.now();
      const result = await session.exec({ cmd: 'sleep 60 & echo started' });
      assert.equal(result.exitCode, 0);
      assert.match(result.output, /started/);
      assert.ok(Date.now() - started < 5_000, `${Date.now() - started} ms`);
    });
  });

  test('files: read (absent, a directory, maxBytes), listDir, pathExists, the editor, escapes refused', async () => {
    await withSession(async (session) => {
      const editor = session.createEditor();
      await editor.createFile({ type: 'create_file', path: 'a/b.txt', diff: '+one\n+two\n' });
      await assert.rejects(editor.createFile({ type: 'create_file', path: 'a/b.txt', diff: '+again\n' }), /already exists/);
      await editor.updateFile({ type: 'update_file', path: 'a/b.txt', diff: '@@\n one\n-two\n+three\n', moveTo: 'a/c.txt' });
      assert.equal(new TextDecoder().decode(await session.readFile({ path: 'a/c.txt' })), 'one\nthree');
      assert.equal(await session.pathExists('a/b.txt'), false);
      assert.equal(new TextDecoder().decode(await session.readFile({ path: '/sandbox/workspace/a/c.txt', maxBytes: 3 })), 'one');
      await assert.rejects(session.readFile({ path: 'missing.txt' }), SandboxWorkspaceReadNotFoundError);
      await assert.rejects(session.readFile({ path: 'a' }), /not a file/);
      assert.deepEqual(await session.listDir({ path: 'a' }), [{ name: 'c.txt', path: 'a/c.txt', type: 'file' }]);
      assert.deepEqual(await session.listDir({ path: '/sandbox/workspace/a' }), [{ name: 'c.txt', path: 'a/c.txt', type: 'file' }], 'below the root: relative, as the SDK says it');
      await editor.createFile({ type: 'create_file', path: '..dots/x.txt', diff: '+x\n' });
      assert.deepEqual(await session.listDir({ path: '..dots' }), [{ name: 'x.txt', path: '..dots/x.txt', type: 'file' }], 'a name starting with .. is below the root');
      await assert.rejects(session.listDir({ path: 'nowhere' }), SandboxWorkspaceReadNotFoundError);
      assert.equal(await session.directoryExists('a'), true);
      assert.equal(await session.directoryExists('a/c.txt'), false);
      await editor.deleteFile({ type: 'delete_file', path: 'a/c.txt' });
      await assert.rejects(editor.deleteFile({ type: 'delete_file', path: 'a/c.txt' }), /not found/);
      // Nothing outside the workspace, HOME and TMPDIR is reached.
      await assert.rejects(session.readFile({ path: '../../../etc/passwd' }), SandboxValidationError);
      await assert.rejects(editor.createFile({ type: 'create_file', path: '/etc/evil', diff: '+x\n' }), SandboxValidationError);
      await session.materializeEntry({ path: 'more', entry: { type: 'dir', children: { 'x.txt': { type: 'file', content: 'x' }, 'run.sh': { type: 'file', content: 'echo ran', permissions: '-rwxr-x---' } } } });
      assert.equal(new TextDecoder().decode(await session.readFile({ path: 'more/x.txt' })), 'x');
      assert.equal((await session.exec({ cmd: 'stat -c %a more/run.sh; ./more/run.sh' })).stdout, '750\nran\n');
    });
  });

  test('persistWorkspace and hydrateWorkspace: a tar of the workspace carried whole to another session; links, FIFOs and ephemeral entries left out', async () => {
    const manifest = new Manifest({ entries: { 'kept.txt': { type: 'file', content: 'kept' }, 'secret.txt': { type: 'file', content: 'secret', ephemeral: true } } });
    await withSession(async (source) => {
      const made = await source.exec({ cmd: "mkdir -p src/deep empty && head -c 20000000 /dev/urandom > src/big.bin && printf hi > src/deep/a.txt && printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod 755 run.sh && ln -s /etc/passwd link && ln src/deep/a.txt hard.txt && mkfifo fifo && sha256sum src/big.bin" });
      assert.equal(made.exitCode, 0, made.output);
      // A command runs all along: the archive is read beside it (a body past 16 MiB included).
      const ticking = await source.exec({ cmd: 'while :; do date > /sandbox/tmp/tick; done', yieldTimeMs: 50 });
      assert.equal(typeof ticking.sessionId, 'number', 'the command is still running');
      const archive = await source.persistWorkspace();
      await source.stop();
      assert.ok(archive instanceof Uint8Array);
      const names = execFileSync('tar', ['-tf', '-'], { input: archive }).toString().trim().split('\n').sort();
      assert.deepEqual(names, ['empty/', 'hard.txt', 'kept.txt', 'run.sh', 'src/', 'src/big.bin', 'src/deep/', 'src/deep/a.txt'], 'a plain tar: a second name written whole; the symbolic link, the FIFO and the ephemeral entry left out');
      await withSession(async (target) => {
        await target.exec({ cmd: 'mkdir old && printf old > old/file.txt && ln -s /etc old/etc' });
        await target.hydrateWorkspace(archive);
        const seen = await target.exec({ cmd: 'sha256sum src/big.bin; cat src/deep/a.txt hard.txt kept.txt; ./run.sh; ls -A | sort | tr "\\n" " "' });
        assert.equal(seen.stdout, `${made.stdout}hihikeptran\nempty hard.txt kept.txt run.sh src `, 'the same bytes, the executable bit, nothing the target held before');
        // A tar made by any tool of directories and regular files goes in the same way.
        const host = mkdtempSync(join(tmpdir(), 'hydrate-'));
        try {
          mkdirSync(join(host, 'lib'));
          writeFileSync(join(host, 'lib', 'x.js'), 'export const x = 1;\n');
          await target.hydrateWorkspace(execFileSync('tar', ['-cf', '-', '-C', host, '.']).buffer);
        } finally {
          rmSync(host, { recursive: true, force: true });
        }
        assert.equal((await target.exec({ cmd: 'cat lib/x.js; ls -A | tr "\\n" " "' })).stdout, 'export const x = 1;\nlib ');
      });
    }, manifest);
  });

  test('workspace archives past their limits or refused are the SDK\'s SandboxArchiveError, and leave the workspace as it was', async () => {
    await withSession(async (session) => {
      await session.exec({ cmd: 'mkdir d && printf one > d/1 && printf two > d/2 && printf three > d/3' });
      const archive = await session.persistWorkspace();
      await session.exec({ cmd: 'printf still > here.txt' });
      const unchanged = async () => assert.equal((await session.exec({ cmd: 'cat here.txt; ls -A | tr "\\n" " "' })).stdout, 'stilld here.txt ');
      const refusals = [
        [{ maxMembers: 3 }, 'archive member count exceeds limit', /\(4\) exceeds archiveLimits\.maxMembers \(3\) at member "d\/3"/],
        [{ maxExtractedBytes: 10 }, 'archive extracted size exceeds limit', /\(11\) exceeds archiveLimits\.maxExtractedBytes \(10\) at member "d\/3"/],
        [{ maxInputBytes: archive.byteLength - 1 }, 'archive input size exceeds limit', /maxInputBytes/],
      ];
      for (const [archiveLimits, reason, says] of refusals) {
        const error = await session.hydrateWorkspace(archive, { archiveLimits }).then(() => null, (e) => e);
        assert.ok(error instanceof SandboxArchiveError, `${reason}: ${error}`);
        assert.equal(error.details.reason, reason);
        assert.match(error.message, says);
        await unchanged();
      }
      session.setArchiveLimits({ maxMembers: 3 });
      await assert.rejects(session.persistWorkspace(), (error) => error instanceof SandboxArchiveError && error.details.reason === 'archive member count exceeds limit' && error.details.limit === 3);
      session.setArchiveLimits(null);
      assert.ok((await session.persistWorkspace()).byteLength > archive.byteLength, 'null: no limit');
      await assert.rejects(session.hydrateWorkspace('{"version":1,"directories":[],"files":[]}'), (error) => error instanceof SandboxArchiveError && /not a readable tar archive/.test(error.message));
      const escaping = Buffer.alloc(1536);
      escaping.write('../escape.txt');
      escaping.write('0000644\0', 100);
      escaping.write('00000000000\0', 124);
      escaping.write('00000000000\0', 136);
      escaping.write('0', 156);
      escaping.write('        ', 148);
      let sum = 0;
      for (const byte of escaping.subarray(0, 512)) sum += byte;
      escaping.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
      await assert.rejects(session.hydrateWorkspace(escaping), (error) => error instanceof SandboxArchiveError && /"\.\.\/escape\.txt"/.test(error.message));
      await assert.rejects(session.hydrateWorkspace(42), SandboxValidationError);
      // Bad limits are refused by name before anything is read or written.
      const namesLimit = (field) => (error) => error instanceof SandboxValidationError && error.issues.some((issue) => issue.path.join('.') === `archiveLimits.${field}`);
      await assert.rejects(session.hydrateWorkspace(archive, { archiveLimits: { maxMembers: 0 } }), namesLimit('maxMembers'));
      assert.throws(() => session.setArchiveLimits({ maxInputBytes: 1.5 }), namesLimit('maxInputBytes'));
      assert.throws(() => session.setArchiveLimits({ maxFiles: 1 }), namesLimit('maxFiles'));
      assert.throws(() => createOpenAiAgentsSandboxClient({ backend, request: request(), archiveLimits: 'small' }), (error) => error instanceof SandboxValidationError && error.issues[0].path.join('.') === 'archiveLimits');
      await unchanged();
    });
  });

  test('a workspace archive under way is cancelled by the session\'s shutdown, and nothing is left', async () => {
    const session = await client.create({ manifest: new Manifest() });
    try {
      await session.exec({ cmd: 'for i in 1 2 3 4 5 6 7 8; do head -c 50000000 /dev/zero > f$i; done' });
      const persisting = session.persistWorkspace().then(() => 'persisted', (error) => error);
      await sleep(30);
      await session.shutdown();
      const outcome = await persisting;
      assert.ok(outcome instanceof Error && /cancel|destroy|stop/i.test(outcome.message), `the persist ended with the sandbox: ${outcome}`);
    } finally {
      await session.close();
    }
    assert.deepEqual(leftovers(namespace), NOTHING, 'nothing of the sandbox is left');
  });

  test('serialize, then resume: in this process the live session, whichever client asks; nothing ephemeral is kept', async () => {
    const manifest = new Manifest({ environment: { GREETING: 'hi', TOKEN: { value: 'do-not-keep', ephemeral: true } } });
    const session = await client.create({ manifest });
    try {
      assert.equal((await session.exec({ cmd: 'echo "$GREETING $TOKEN"' })).stdout, 'hi do-not-keep\n');
      const serialized = JSON.parse(JSON.stringify(await client.serializeSessionState(session.state)));
      assert.equal(serialized.recoveryRecord.sandboxId, session.state.sandboxId);
      assert.deepEqual(serialized.environment, { GREETING: 'hi' });
      assert.equal(serialized.recoveryRecord.phase, 'ready');
      assert.doesNotMatch(JSON.stringify(serialized), /do-not-keep/);
      const other = createOpenAiAgentsSandboxClient({ backend, request: request() });
      assert.equal(await other.resume(await other.deserializeSessionState(serialized)), session, 'the same live session');
      await assert.rejects(other.deserializeSessionState({ format: 'something else' }), /session state/);
    } finally {
      await session.close();
    }
    // Closed, it is forgotten: its state still serializes with its record (a reconcile of which
    // now finds nothing).
    const closed = await client.serializeSessionState(session.state);
    assert.equal(closed.recoveryRecord.sandboxId, session.state.sandboxId);
    assert.equal((await backend.reconcile(closed.recoveryRecord)).kind, 'absent');
  });

  test('resume after the controller was killed: the recorded sandbox is proven and removed, a new one has the manifest and environment', async () => {
    const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/openai-agents-session-child.mjs', import.meta.url))], {
      env: { ...process.env, OPENAI_NAMESPACE: namespace, OPENAI_IMAGE: IMAGE },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let line = '';
    child.stdout.on('data', (chunk) => (line += chunk));
    const until = Date.now() + 60_000;
    while (!line.includes('\n') && child.exitCode === null && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGKILL');
    await once(child, 'exit');
    const serialized = JSON.parse(line);
    assert.equal((await backend.reconcile(serialized.recoveryRecord)).kind, 'matched', 'the killed controller left its sandbox');
    const state = await client.deserializeSessionState(serialized);
    const resumed = await client.resume(state);
    try {
      assert.notEqual(resumed.state.sandboxId, serialized.sandboxId);
      const result = await resumed.exec({ cmd: 'cat keep.txt; echo " $GREETING"; ls' });
      assert.equal(result.stdout, 'kept hi\nkeep.txt\n', 'the manifest and environment, in a new workspace');
      assert.equal((await backend.reconcile(serialized.recoveryRecord)).kind, 'absent', 'the recorded sandbox is gone');
    } finally {
      await resumed.close();
    }
    // delete() of a state whose sandbox is gone is nothing to do.
    await client.delete(state);
    assert.deepEqual(leftovers(namespace), NOTHING);
  });

  test('refusals: unknown options, per-session options, runAs, host entries, bad permissions; a refused create leaves nothing; tty runs on pipes', async () => {
    assert.throws(
      () => createOpenAiAgentsSandboxClient({ backend, request: request(), mounts: ['/'] }),
      (error) => error instanceof SandboxValidationError && error.issues.some((issue) => issue.path.join('.') === 'options.mounts'),
    );
    await assert.rejects(client.create({ manifest: new Manifest(), options: { image: 'other' } }), SandboxValidationError);
    await assert.rejects(client.create({ manifest: new Manifest({ entries: { src: { type: 'local_dir', src: '/' } } }) }), SandboxUnsupportedFeatureError);
    await assert.rejects(client.create({ manifest: new Manifest({ root: '/elsewhere' }) }), /not the sandbox's workspace/);
    await withSession(async (session) => {
      await assert.rejects(session.exec({ cmd: 'id', runAs: 'root' }), SandboxUnsupportedFeatureError);
      // Permissions the SDK cannot read (its Manifest refuses them too), before anything is written.
      await assert.rejects(session.materializeEntry({ path: 'a.sh', entry: { type: 'file', content: 'x', permissions: 'rwx' } }), /permissions are not the SDK's/);
      assert.equal(await session.pathExists('a.sh'), false);
      // No terminal, but write_stdin is offered: the model's way to a command past its yield.
      // tty: true (as the SDK's instructions ask for a command to interrupt) runs on pipes.
      assert.equal(session.supportsPty(), true);
      const interruptible = await session.exec({ cmd: 'test -t 0 && echo terminal; echo ready; sleep 30', tty: true, yieldTimeMs: 300 });
      assert.equal(interruptible.output, 'ready\n');
      assert.match(await session.writeStdin({ sessionId: interruptible.sessionId, chars: '\u0003', yieldTimeMs: 5_000 }), /Process exited with code 130/);
    });
    assert.deepEqual(leftovers(namespace), NOTHING);
  });
});

test('importing the adapter without OpenAI Agents installed fails at once, naming the package', () => {
  const hooks = `import { registerHooks } from 'node:module';
registerHooks({ resolve(specifier, context, next) {
  if (specifier.startsWith('@openai/agents-core')) throw Object.assign(new Error("Cannot find package '@openai/agents-core'"), { code: 'ERR_MODULE_NOT_FOUND' });
  return next(specifier, context);
} });
try { await import('native-sandbox/openai-agents'); console.log('imported'); } catch (error) { console.log(error.name + ': ' + error.message); }`;
  const said = execFileSync(process.execPath, ['--input-type=module', '-e', hooks], { encoding: 'utf8', cwd: new URL('..', import.meta.url) });
  assert.match(said, /^SandboxUnsupportedError: native-sandbox\/openai-agents .*'@openai\/agents-core' is not installed here.*npm install @openai\/agents@0\.20/);
});
