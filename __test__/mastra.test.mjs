// native-sandbox/mastra: Mastra's own code (a Workspace, its workspace tools, and an Agent driven
// by Mastra's MastraLanguageModelV2Mock calling them) runs commands in a real Docker sandbox; then
// the sandbox member by member (executeCommand, the process manager, writeFiles with modes, the
// lifecycle Mastra calls), and the census afterwards.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { Agent } from '@mastra/core/agent';
import { MastraLanguageModelV2Mock } from '@mastra/core/test-utils/llm-mock';
import { createWorkspaceTools, SandboxAbortError, SandboxError, Workspace, WORKSPACE_TOOLS } from '@mastra/core/workspace';
import { SandboxValidationError } from 'native-sandbox';
import { createMastraSandbox } from 'native-sandbox/mastra';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('mastra');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the Mastra suite leaves no engine objects behind');
});

/** A Workspace over a new sandbox, destroyed (as Mastra destroys it) however `body` ends. */
async function withWorkspace(body, options = {}) {
  const sandbox = createMastraSandbox({ backend, request: request(), ...options });
  const workspace = new Workspace({ sandbox });
  try {
    return await body({ sandbox, workspace });
  } finally {
    await workspace.destroy();
  }
}

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

/** Mastra's mock model answering each step from `steps`: a tool call, then text. */
function scriptedModel(steps) {
  let step = 0;
  const next = () => {
    const call = steps[step];
    step += 1;
    return call;
  };
  const streamOf = (parts) =>
    new ReadableStream({
      start(controller) {
        for (const part of parts) controller.enqueue(part);
        controller.close();
      },
    });
  const partsOf = (call) =>
    call === undefined
      ? [
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'done' },
          { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: 'stop', usage },
        ]
      : [
          { type: 'stream-start', warnings: [] },
          { type: 'tool-call', toolCallId: `call-${step}`, toolName: call[0], input: JSON.stringify(call[1]) },
          { type: 'finish', finishReason: 'tool-calls', usage },
        ];
  return new MastraLanguageModelV2Mock({
    doStream: async () => ({ stream: streamOf(partsOf(next())) }),
    doGenerate: async () => {
      const call = next();
      const content = call === undefined ? [{ type: 'text', text: 'done' }] : [{ type: 'tool-call', toolCallId: `call-${step}`, toolName: call[0], input: JSON.stringify(call[1]) }];
      return { content, finishReason: call === undefined ? 'stop' : 'tool-calls', usage, warnings: [] };
    },
  });
}

describe('Mastra adapter (Mastra drives the sandbox)', () => {
  test("an Agent with the workspace: its execute_command tool runs in the sandbox, a failure's exit code comes back", async () => {
    await withWorkspace(async ({ sandbox, workspace }) => {
      const model = scriptedModel([
        [WORKSPACE_TOOLS.SANDBOX.EXECUTE_COMMAND, { command: 'echo hello from $(id -u) in $(pwd)' }],
        [WORKSPACE_TOOLS.SANDBOX.EXECUTE_COMMAND, { command: 'echo nope >&2; exit 3' }],
      ]);
      const agent = new Agent({ id: 'coder', name: 'coder', instructions: 'Use the sandbox.', model, workspace });
      const result = await agent.generate('work');
      const outputs = result.toolResults.map((r) => r.payload.result);
      assert.equal(outputs.length, 2, JSON.stringify(result.toolResults));
      assert.match(String(outputs[0]), /hello from 65532 in \/sandbox\/workspace/);
      assert.match(String(outputs[1]), /nope[\s\S]*Exit code: 3/);
      assert.equal(sandbox.status, 'running');
    });
  });

  test('the workspace tools: a background process, its output, and killing it', async () => {
    await withWorkspace(async ({ workspace }) => {
      await workspace.init();
      const tools = await createWorkspaceTools(workspace);
      const started = await tools[WORKSPACE_TOOLS.SANDBOX.EXECUTE_COMMAND].execute({ command: 'echo up; sleep 30', background: true }, { workspace });
      const pid = /PID: (\S+)\)/.exec(String(started))?.[1];
      assert.ok(pid, String(started));
      let output = '';
      for (let i = 0; i < 50 && !output.includes('up'); i += 1) {
        output = String(await tools[WORKSPACE_TOOLS.SANDBOX.GET_PROCESS_OUTPUT].execute({ pid }, { workspace }));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.match(output, /up/);
      const killed = await tools[WORKSPACE_TOOLS.SANDBOX.KILL_PROCESS].execute({ pid }, { workspace });
      assert.match(String(killed), new RegExp(`Process ${pid} has been killed`));
    });
  });
});

describe('Mastra adapter: the sandbox member by member', () => {
  test('executeCommand: quoting, cwd, env, exit codes, timeout as 124, abort', async () => {
    await withWorkspace(async ({ sandbox, workspace }) => {
      await workspace.init();
      const quoted = await sandbox.executeCommand('printf', ['%s|', 'a b', "it's"]);
      assert.equal(quoted.stdout, "a b|it's|");
      assert.equal(quoted.success, true);
      assert.equal(quoted.exitCode, 0);
      await sandbox.executeCommand('mkdir -p sub/dir');
      assert.equal((await sandbox.executeCommand('pwd', [], { cwd: 'sub/dir' })).stdout, '/sandbox/workspace/sub/dir\n');
      assert.equal((await sandbox.executeCommand('printf %s "$GREETING"', [], { env: { GREETING: 'hi $HOME' } })).stdout, 'hi $HOME');
      const failed = await sandbox.executeCommand('echo out; echo err >&2; exit 5');
      assert.deepEqual([failed.success, failed.exitCode, failed.stdout, failed.stderr], [false, 5, 'out\n', 'err\n']);
      const slow = await sandbox.executeCommand('trap "" TERM; sleep 30', [], { timeout: 300 });
      assert.equal(slow.exitCode, 124);
      assert.equal(slow.timedOut, true);
      assert.match(slow.stderr, /timed out after 300ms/);
      const controller = new AbortController();
      const aborted = sandbox.executeCommand('sleep 30', [], { abortSignal: controller.signal });
      setTimeout(() => controller.abort(new Error('stop it')), 300);
      const result = await aborted.then((r) => r, (e) => e);
      assert.ok(result instanceof Error || result.killed === true, JSON.stringify(result));
    });
  });

  test('processes: stdin piped and closed, kill once, list, stdinMode ignore', async () => {
    await withWorkspace(async ({ sandbox, workspace }) => {
      await workspace.init();
      const upper = await sandbox.processes.spawn('tr a-z A-Z');
      await upper.sendStdin('hello ');
      await upper.sendStdin('world');
      await upper.closeStdin();
      const done = await upper.wait();
      assert.deepEqual([done.exitCode, done.stdout], [0, 'HELLO WORLD']);
      await assert.rejects(upper.sendStdin('late'), /already exited/);

      const sleeper = await sandbox.processes.spawn('sleep 30');
      const listed = await sandbox.processes.list();
      assert.ok(listed.some((p) => p.pid === sleeper.pid && p.running), JSON.stringify(listed));
      assert.equal(await sleeper.kill(), true);
      assert.equal((await sleeper.wait()).exitCode, 137);
      assert.equal(await sleeper.kill(), false);

      const quiet = await sandbox.processes.spawn('cat; echo end', { stdinMode: 'ignore' });
      assert.equal((await quiet.wait()).stdout, 'end\n');
      await assert.rejects(quiet.sendStdin('x'));
    });
  });

  test('writeFiles: whole files with their modes, content as text or bytes; mode 0 and an abort refused', async () => {
    await withWorkspace(async ({ sandbox, workspace }) => {
      await workspace.init();
      await sandbox.writeFiles([
        { path: 'bin/run.sh', content: '#!/bin/sh\necho ran\n', mode: 0o755 },
        { path: '/sandbox/workspace/data.bin', content: Buffer.from([0, 1, 2, 255]) },
      ]);
      assert.equal((await sandbox.executeCommand('./bin/run.sh')).stdout, 'ran\n');
      assert.equal((await sandbox.executeCommand('stat -c %a bin/run.sh data.bin')).stdout, '755\n644\n');
      assert.equal((await sandbox.executeCommand('od -An -tu1 data.bin')).stdout.trim().split(/\s+/).join(','), '0,1,2,255');
      await assert.rejects(sandbox.writeFiles([{ path: 'x', content: 'x', mode: 0 }]), SandboxError);
      await assert.rejects(sandbox.writeFiles([{ path: 'x', content: 'x' }], { abortSignal: AbortSignal.abort() }), SandboxAbortError);
      assert.equal((await sandbox.executeCommand('test -e x || echo absent')).stdout, 'absent\n');
    });
  });

  test('the lifecycle Mastra calls: start on first use, instructions, destroy leaves nothing; the policy is never widened', async () => {
    const sandbox = createMastraSandbox({ backend, request: request() });
    const workspace = new Workspace({ sandbox });
    assert.equal(sandbox.status, 'pending');
    const ran = await sandbox.executeCommand('echo lazily');
    assert.equal(ran.stdout, 'lazily\n');
    assert.equal(sandbox.status, 'running');
    assert.match(sandbox.getInstructions(), /\/bin\/sh -c/);
    const info = await sandbox.getInfo();
    assert.match(info.metadata.sandboxId, /^sbx-/);
    await workspace.destroy();
    assert.equal(sandbox.status, 'destroyed');
    assert.deepEqual(leftovers(namespace).containers, []);

    const issues = (options) => {
      try {
        createMastraSandbox(options);
      } catch (error) {
        assert.ok(error instanceof SandboxValidationError, String(error));
        return error.issues.map((issue) => issue.path.join('.'));
      }
      assert.fail('refused');
    };
    assert.deepEqual(issues({ backend, request: request(), privileged: true, volumes: { '/': '/host' } }), ['options.privileged', 'options.volumes']);
    assert.deepEqual(issues({ request: request(), shell: 'sh' }), ['options.backend', 'options.shell']);
  });
});

describe('Mastra adapter: failures own nothing and crash nothing', () => {
  test('a start aborted or failing leaves nothing; a stop then a start makes a new sandbox', async () => {
    const sandbox = createMastraSandbox({ backend, request: request() });
    const workspace = new Workspace({ sandbox });
    try {
      await assert.rejects(sandbox._start({ abortSignal: AbortSignal.abort(new Error('not now')) }));
      assert.deepEqual(leftovers(namespace).containers, [], 'the aborted start left no container');
      const failing = createMastraSandbox({ backend, request: request((p) => (p.deadlines.startupMs = 1)) });
      await assert.rejects(failing._start());
      assert.deepEqual(leftovers(namespace).containers, [], 'the failed start left no container');
      await failing._destroy();

      assert.equal((await sandbox.executeCommand('echo first > f; cat f')).stdout, 'first\n');
      await sandbox._stop();
      assert.deepEqual(leftovers(namespace).containers, [], 'a stop ends the sandbox');
      assert.equal((await sandbox.executeCommand('cat f 2>/dev/null || echo new sandbox')).stdout, 'new sandbox\n');
    } finally {
      await workspace.destroy();
    }
  });

  test('stdin past the stream limits fails its call without ending the host; a timeout reads 124 whatever the command did with SIGTERM', async () => {
    await withWorkspace(async ({ sandbox, workspace }) => {
      await workspace.init();
      const deaf = await sandbox.processes.spawn('sleep 30');
      await assert.rejects(deaf.sendStdin('x'.repeat(4 * 1024 * 1024)));
      assert.equal(await deaf.kill(), true);
      const polite = await sandbox.executeCommand("trap 'exit 0' TERM; sleep 30 & wait", [], { timeout: 300 });
      assert.deepEqual([polite.exitCode, polite.timedOut, polite.success], [124, true, false]);
      const unbounded = await sandbox.executeCommand('echo no deadline', [], { timeout: 0 });
      assert.equal(unbounded.stdout, 'no deadline\n');
    });
  });
});

// Ported from Mastra's shared sandbox provider suite (mastra-ai/mastra:
// workspaces/_test-utils, createSandboxTestSuite; private, so not run as published). Left out: its
// reconnection cases (a stopped sandbox started again keeps its files), which this package's
// sandboxes, one start each, do not offer (docs/frameworks.md).
describe("Mastra adapter: Mastra's provider suite cases", () => {
  test('commands, environment, processes and lifecycle as the suite holds a provider to them', async () => {
    const sandbox = createMastraSandbox({ backend, request: request(), env: { A: '1', B: '2', C: '3' } });
    const workspace = new Workspace({ sandbox });
    try {
      assert.ok(['pending', 'stopped'].includes(sandbox.status));
      await sandbox._start();
      await sandbox._start();
      assert.equal(sandbox.status, 'running');
      const info = await sandbox.getInfo();
      assert.deepEqual([info.id, info.name, info.provider, info.status], [sandbox.id, sandbox.name, sandbox.provider, 'running']);

      assert.equal((await sandbox.executeCommand('echo', ['hello world', 'test'])).stdout, 'hello world test\n');
      const exited = await sandbox.executeCommand('sh', ['-c', 'exit 42']);
      assert.deepEqual([exited.exitCode, exited.success], [42, false]);
      const many = await sandbox.executeCommand('seq 1 5000');
      assert.equal(many.stdout.trim().split('\n').length, 5000);
      assert.equal((await sandbox.executeCommand('echo "$A $B $C"', [], { env: { B: 'override' } })).stdout, '1 override 3\n');
      const timedOut = await sandbox.executeCommand('sleep 10', [], { timeout: 100 });
      assert.notEqual(timedOut.exitCode, 0);

      const quick = await sandbox.processes.spawn('echo done');
      assert.equal(typeof quick.pid, 'string');
      assert.ok(quick.pid.length > 0);
      const ended = new Promise((resolve) => quick.reader.on('end', resolve).resume());
      await quick.wait();
      await ended;
      assert.equal(await quick.kill(), false);
      await assert.rejects(quick.sendStdin('late'));
      assert.equal((await sandbox.processes.get(quick.pid))?.pid, quick.pid, 'the first get after its exit returns the handle');
      assert.equal(await sandbox.processes.get(quick.pid), undefined, 'then it is released');
      assert.equal(await sandbox.processes.kill('99999'), false);
    } finally {
      await workspace.destroy();
    }
    assert.equal(sandbox.status, 'destroyed');
  });
});

test('importing the adapter without Mastra installed fails at once, naming the package', () => {
  const hooks = `import { registerHooks } from 'node:module';
registerHooks({ resolve(specifier, context, next) {
  if (specifier.startsWith('@mastra/core')) throw Object.assign(new Error("Cannot find package '@mastra/core'"), { code: 'ERR_MODULE_NOT_FOUND' });
  return next(specifier, context);
} });
try { await import('native-sandbox/mastra'); console.log('imported'); } catch (error) { console.log(error.name + ': ' + error.message); }`;
  const said = execFileSync(process.execPath, ['--input-type=module', '-e', hooks], { encoding: 'utf8', cwd: new URL('..', import.meta.url) });
  assert.match(said, /^SandboxUnsupportedError: native-sandbox\/mastra .*'@mastra\/core' is not installed here.*npm install @mastra\/core@1/);
});
