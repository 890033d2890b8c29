// native-sandbox/ai-sdk: the AI SDK's own code (generateText and ToolLoopAgent, with the SDK's
// MockLanguageModelV4 from ai/test scripting the tool calls) drives tools whose
// `experimental_sandbox` is a real Docker sandbox; then every member of the session against the
// framework's documented semantics (paths against one base directory, null for absent, rejections,
// abort), and the census afterwards.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { generateText, isStepCount, tool, ToolLoopAgent } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import { SandboxOperationError, SandboxValidationError } from 'native-sandbox';
import { createAiSdkSandbox } from 'native-sandbox/ai-sdk';
import { dockerBackend, leftovers, NOTHING, request, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('ai-sdk');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING, 'the AI SDK suite leaves no engine objects behind');
});

async function withSession(body, options) {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    return await body(createAiSdkSandbox(sandbox, options), sandbox);
  } finally {
    await sandbox.stop();
    await sandbox.destroy();
  }
}

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model of the SDK's own test kind that calls `calls` (one step each), then answers 'done'. */
function scriptedModel(calls) {
  let step = 0;
  const seen = [];
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => {
      seen.push(options);
      const call = calls[step];
      step += 1;
      if (call === undefined) {
        return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
      }
      const [toolName, input] = call;
      return {
        content: [{ type: 'tool-call', toolCallId: `call-${step}`, toolName, input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
  return { model, seen };
}

/** The tools of the SDK's documentation example, each delegating to `experimental_sandbox`. */
const tools = {
  shell: tool({
    description: ({ experimental_sandbox }) => `Run a shell command. ${experimental_sandbox?.description ?? ''}`,
    inputSchema: z.object({ command: z.string() }),
    execute: async ({ command }, { abortSignal, experimental_sandbox }) => experimental_sandbox.run({ command, abortSignal }),
  }),
  write: tool({
    description: 'Write a text file.',
    inputSchema: z.object({ path: z.string(), content: z.string() }),
    execute: async ({ path, content }, { abortSignal, experimental_sandbox }) => {
      await experimental_sandbox.writeTextFile({ path, content, abortSignal });
      return 'written';
    },
  }),
  read: tool({
    description: 'Read a text file.',
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }, { abortSignal, experimental_sandbox }) => ({ text: await experimental_sandbox.readTextFile({ path, abortSignal }) }),
  }),
};

const outputsOf = (result) => result.steps.flatMap((step) => step.toolResults.map((r) => r.output));

async function textOf(stream) {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of stream) text += decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}

describe('AI SDK adapter (the SDK drives the tools)', () => {
  test('generateText: a command, a file written and read back, a non-zero exit and a missing file, as the model asked', async () => {
    await withSession(async (session) => {
      const { model, seen } = scriptedModel([
        ['shell', { command: 'echo hello from $(id -u) in $(pwd)' }],
        ['write', { path: 'notes/plan.md', content: 'line one\nline two\n' }],
        ['read', { path: '/sandbox/workspace/notes/plan.md' }],
        ['shell', { command: 'echo nope >&2; exit 3' }],
        ['read', { path: 'missing.txt' }],
      ]);
      const result = await generateText({ model, tools, experimental_sandbox: session, stopWhen: isStepCount(10), prompt: 'work' });
      assert.equal(result.text, 'done');
      assert.deepEqual(outputsOf(result), [
        { exitCode: 0, stdout: 'hello from 65532 in /sandbox/workspace\n', stderr: '' },
        'written',
        { text: 'line one\nline two\n' },
        { exitCode: 3, stdout: '', stderr: 'nope\n' },
        { text: null },
      ]);
      // The SDK put the session's description into the tool's description the model saw.
      const shown = seen[0].tools.find((t) => t.name === 'shell').description;
      assert.match(shown, /^Run a shell command\. Sandbox sbx-\S+ \(native-sandbox\): .* in \/sandbox\/workspace unless told otherwise\..*Network: no network\. No ports are exposed\.$/s);
    });
  });

  test('ToolLoopAgent: the agent loop runs its tools in the sandbox, a file carrying over between calls', async () => {
    await withSession(async (session) => {
      const { model } = scriptedModel([
        ['shell', { command: 'mkdir -p out && seq 3 > out/n.txt' }],
        ['shell', { command: 'grep -rl 2 out' }],
      ]);
      const agent = new ToolLoopAgent({ model, tools, stopWhen: isStepCount(5) });
      const result = await agent.generate({ prompt: 'count', experimental_sandbox: session });
      const outputs = outputsOf(result);
      assert.deepEqual(outputs[0], { exitCode: 0, stdout: '', stderr: '' });
      // A path a command printed is one the session's file calls take as it is.
      assert.equal(outputs[1].stdout, 'out/n.txt\n');
      assert.equal(await session.readTextFile({ path: outputs[1].stdout.trim(), startLine: 2, endLine: 2 }), '2');
    });
  });

  test('an aborted generateText kills the command its tool ran, whose failure is the abort\'s reason', async () => {
    await withSession(async (session) => {
      const { model } = scriptedModel([['shell', { command: 'echo started > started.txt; sleep 30' }]]);
      const controller = new AbortController();
      const reason = new Error('the user gave up');
      const began = Date.now();
      const running = generateText({ model, tools, experimental_sandbox: session, abortSignal: controller.signal, prompt: 'wait' });
      while ((await session.stat({ path: 'started.txt' })) === null) await new Promise((resolve) => setTimeout(resolve, 50));
      controller.abort(reason);
      const result = await running;
      // The SDK records the tool's rejection as its result (a scripted model then answers anyway).
      const failed = result.steps[0].content.find((part) => part.type === 'tool-error');
      assert.equal(failed?.error, reason, 'the tool failed with the abort\'s own reason');
      assert.ok(Date.now() - began < 20_000, 'the command did not run its 30 s');
      const left = await session.run({ command: 'ps -o comm= | grep -c "^sleep$" || true' });
      assert.equal(left.stdout.trim(), '0', 'no sleep is left running');
    });
  });
});

describe('AI SDK adapter: the session member by member', () => {
  test('run: env merged over the defaults, workingDirectory relative to the base, maxOutputLength, signals as 128 + n', async () => {
    await withSession(
      async (session) => {
        await session.writeTextFile({ path: 'sub/dir/x', content: '' });
        const ran = await session.run({ command: 'echo "$A $B" && pwd', env: { B: 'call' }, workingDirectory: 'sub/dir' });
        assert.deepEqual(ran, { exitCode: 0, stdout: 'base call\n/sandbox/workspace/sub/dir\n', stderr: '' });
        const cut = await session.run({ command: 'yes | head -c 100000; yes e | head -c 10 >&2', maxOutputLength: 7 });
        assert.deepEqual(cut, { exitCode: 0, stdout: 'y\ny\ny\ny', stderr: 'e\ne\ne\ne', stdoutLength: 100000, stderrLength: 10 });
        // An abort ends a command whose output is being cut too, and rejects with its reason.
        for (const maxOutputLength of [undefined, 7]) {
          const controller = new AbortController();
          const reason = new Error('enough');
          const running = session.run({ command: 'echo begun > begun.txt; trap "" TERM; sleep 30', abortSignal: controller.signal, maxOutputLength });
          while ((await session.stat({ path: 'begun.txt' })) === null) await new Promise((resolve) => setTimeout(resolve, 50));
          controller.abort(reason);
          await assert.rejects(running, (error) => error === reason, `maxOutputLength ${maxOutputLength}`);
          await session.deleteFile({ path: 'begun.txt' });
        }
        assert.equal((await session.run({ command: 'kill -KILL $$' })).exitCode, 137);
        assert.equal((await session.run({ command: 'kill -TERM $$' })).exitCode, 143);
        // A cd inside one command moves nobody else.
        await session.run({ command: 'cd /sandbox/tmp' });
        assert.equal((await session.run({ command: 'pwd' })).stdout, '/sandbox/workspace\n');
      },
      { env: { A: 'base', B: 'base' } },
    );
  });

  test('spawn: web streams, stdin only when asked, EOF on close, kill idempotent, wait rejects with the abort reason', async () => {
    await withSession(async (session) => {
      const cat = await session.spawn({ command: 'tr a-z A-Z', stdin: true });
      const writer = cat.stdin.getWriter();
      await writer.write(new TextEncoder().encode('hello '));
      await writer.write(new TextEncoder().encode('world'));
      await writer.close();
      const [out, err] = await Promise.all([textOf(cat.stdout), textOf(cat.stderr)]);
      assert.deepEqual([out, err], ['HELLO WORLD', '']);
      assert.deepEqual(await cat.wait(), { exitCode: 0 });

      const closed = await session.spawn({ command: 'cat; echo end' });
      assert.equal('stdin' in closed, false, 'no stdin unless asked');
      assert.equal(await textOf(closed.stdout), 'end\n');
      assert.deepEqual(await closed.wait(), { exitCode: 0 });

      const sleeper = await session.spawn({ command: 'sleep 30' });
      await Promise.all([sleeper.kill(), sleeper.kill()]);
      assert.deepEqual(await sleeper.wait(), { exitCode: 137 });
      await sleeper.kill();

      const controller = new AbortController();
      const aborted = await session.spawn({ command: 'sleep 30', abortSignal: controller.signal });
      const reason = new Error('stop waiting');
      controller.abort(reason);
      await assert.rejects(aborted.wait(), (error) => error === reason);
      // An abort before the start starts nothing.
      await assert.rejects(session.spawn({ command: 'touch never', abortSignal: AbortSignal.abort(reason) }), (error) => error === reason);
      await assert.rejects(session.run({ command: 'touch never', abortSignal: AbortSignal.abort(reason) }), (error) => error === reason);
      assert.equal(await session.stat({ path: 'never' }), null);
    });
  });

  test('files: streams and bytes, line ranges, stat following links, listings, deletes, null for absent, rejections', async () => {
    await withSession(async (session) => {
      const bytes = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256);
      await session.writeFile({
        path: 'data/blob.bin',
        content: new ReadableStream({
          start(controller) {
            controller.enqueue(bytes.subarray(0, 100_000));
            controller.enqueue(bytes.subarray(100_000));
            controller.close();
          },
        }),
      });
      const read = await session.readBinaryFile({ path: 'data/blob.bin' });
      assert.ok(read instanceof Uint8Array);
      assert.deepEqual(Buffer.from(read), Buffer.from(bytes));
      const chunks = [];
      for await (const chunk of await session.readFile({ path: '/sandbox/workspace/data/blob.bin' })) chunks.push(chunk);
      assert.deepEqual(Buffer.concat(chunks), Buffer.from(bytes));

      await session.writeTextFile({ path: 'crlf.txt', content: 'a\r\nb\r\nc\r\nd' });
      assert.equal(await session.readTextFile({ path: 'crlf.txt', startLine: 2, endLine: 3 }), 'b\r\nc');
      assert.equal(await session.readTextFile({ path: 'crlf.txt', startLine: 3, endLine: 99 }), 'c\r\nd');
      assert.equal(await session.readTextFile({ path: 'crlf.txt' }), 'a\r\nb\r\nc\r\nd');
      await session.writeTextFile({ path: 'latin.txt', content: 'café', encoding: 'latin1' });
      assert.deepEqual(Buffer.from(await session.readBinaryFile({ path: 'latin.txt' })), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
      assert.equal(await session.readTextFile({ path: 'latin.txt', encoding: 'latin1' }), 'café');
      await session.writeBinaryFile({ path: 'crlf.txt', content: new TextEncoder().encode('over') });
      assert.equal(await session.readTextFile({ path: 'crlf.txt' }), 'over');

      await session.run({ command: 'ln -s data/blob.bin link && ln -s data dirlink && ln -s nowhere dangling && mkfifo fifo' });
      assert.deepEqual(await session.stat({ path: 'data/blob.bin' }), { type: 'file', size: 300_000 });
      assert.deepEqual(await session.stat({ path: 'link' }), { type: 'file', size: 300_000 });
      assert.equal((await session.stat({ path: 'dirlink' })).type, 'directory');
      assert.equal(await session.stat({ path: 'dangling' }), null);
      assert.equal((await session.stat({ path: 'fifo' })).type, 'other');
      assert.equal((await session.stat({ path: 'data' })).type, 'directory');
      assert.equal(await session.stat({ path: 'absent' }), null);

      const listed = (await session.listDirectory({ path: '.' })).sort((a, b) => a.name.localeCompare(b.name));
      assert.deepEqual(
        listed.filter((e) => ['data', 'dangling', 'fifo', 'latin.txt', 'link'].includes(e.name)),
        [
          { name: 'dangling', type: 'symlink' },
          { name: 'data', type: 'directory' },
          { name: 'fifo', type: 'other' },
          { name: 'latin.txt', type: 'file' },
          { name: 'link', type: 'symlink' },
        ],
      );
      assert.equal(await session.listDirectory({ path: 'absent' }), null);
      await assert.rejects(session.listDirectory({ path: 'latin.txt' }), (error) => error instanceof SandboxOperationError || error instanceof SandboxValidationError);

      assert.equal(await session.deleteFile({ path: 'link' }), true);
      assert.deepEqual(await session.stat({ path: 'data/blob.bin' }), { type: 'file', size: 300_000 }, 'a link is deleted itself');
      assert.equal(await session.deleteFile({ path: 'link' }), false);
      await assert.rejects(session.deleteFile({ path: 'data' }), SandboxValidationError);
      assert.equal((await session.stat({ path: 'data' })).type, 'directory');
      await assert.rejects(session.writeTextFile({ path: 'data', content: 'x' }), (error) => error instanceof SandboxOperationError || error instanceof SandboxValidationError);
      // The file calls follow no link (the framework's stat does: asked of the guest).
      await assert.rejects(session.readTextFile({ path: 'dirlink/blob.bin' }), SandboxValidationError);

      assert.equal(await session.readFile({ path: 'absent' }), null);
      assert.equal(await session.readBinaryFile({ path: 'absent' }), null);
      assert.equal(await session.readTextFile({ path: 'absent' }), null);
    });
  });

  test('the policy is never widened: paths outside the guest roots are refused, options are strict', async () => {
    await withSession(async (session, sandbox) => {
      await assert.rejects(session.readTextFile({ path: '/etc/passwd' }), SandboxValidationError);
      await assert.rejects(session.writeTextFile({ path: '../../etc/x', content: 'x' }), SandboxValidationError);
      await assert.rejects(session.readTextFile({ path: '' }), SandboxValidationError);
      await assert.rejects(session.readTextFile({ path: 'a', startLine: 0 }), SandboxValidationError);
      await assert.rejects(session.run({ command: 'true', env: { A: 1 } }), SandboxValidationError);
      await assert.rejects(session.spawn({ command: 'true', stdin: 'yes' }), SandboxValidationError);
      await assert.rejects(session.run({ command: 'true', abortSignal: 'soon' }), SandboxValidationError);
      await assert.rejects(session.readBinaryFile(null), SandboxValidationError);
      await assert.rejects(session.writeTextFile({ path: 'x', content: 'x', encoding: 'base64' }), SandboxValidationError);
      const issues = (fn) => {
        try {
          fn();
        } catch (error) {
          assert.ok(error instanceof SandboxValidationError, String(error));
          return error.issues.map((issue) => issue.path.join('.'));
        }
        assert.fail('refused');
      };
      assert.deepEqual(issues(() => createAiSdkSandbox(sandbox, { mounts: ['/:/host'] })), ['options.mounts']);
      assert.deepEqual(issues(() => createAiSdkSandbox(sandbox, { workingDirectory: 'rel', shell: 'sh', env: { X: 2 } })), ['options.workingDirectory', 'options.shell', 'options.env.X']);
      assert.deepEqual(issues(() => createAiSdkSandbox({})), ['sandbox']);
      assert.equal(createAiSdkSandbox(sandbox, { description: 'mine' }).description, 'mine');
    });
  });
});

// Ported from the AI SDK's own provider tests (vercel/ai: packages/sandbox-just-bash/src/
// just-bash-sandbox-session.test.ts and packages/sandbox-vercel/src/vercel-sandbox-session.test.ts);
// no provider contract check is published to run instead.
describe("AI SDK adapter: the SDK's shipped providers' own cases", () => {
  test('run, env, relative writes, byte round trips, spawn, exit codes, kill and abort as those providers are tested', async () => {
    await withSession(async (session) => {
      assert.deepEqual(await session.run({ command: 'echo hello && echo bye >&2' }), { exitCode: 0, stdout: 'hello\n', stderr: 'bye\n' });
      await session.run({ command: 'mkdir -p /sandbox/tmp/w' });
      assert.equal((await session.run({ command: 'pwd', workingDirectory: '/sandbox/tmp/w' })).stdout, '/sandbox/tmp/w\n');
      // An env value reaches the command as it is (no shell expansion) and does not persist.
      const literal = `it's "$HOME" \\ $(nope) \`x\``;
      assert.deepEqual(await session.run({ command: 'printf %s "$VALUE"', env: { VALUE: literal } }), { exitCode: 0, stdout: literal, stderr: '' });
      assert.equal((await session.run({ command: 'printf %s "${VALUE-unset}"' })).stdout, 'unset');
      const spawned = await session.spawn({ command: 'printf %s "$VALUE"', env: { VALUE: literal } });
      assert.equal(await textOf(spawned.stdout), literal);
      await session.writeTextFile({ path: 'relative.txt', content: 'line 1\nline 2\nline 3\nline 4' });
      assert.equal(await session.readTextFile({ path: '/sandbox/workspace/relative.txt', startLine: 2, endLine: 3 }), 'line 2\nline 3');
      const bytes = new Uint8Array([0, 1, 2, 255, 254, 0, 128]);
      await session.writeBinaryFile({ path: 'bytes.bin', content: bytes });
      assert.deepEqual(await session.readBinaryFile({ path: 'bytes.bin' }), bytes);
      await session.writeFile({ path: 'streamed.txt', content: new Blob(['streamed']).stream() });
      assert.equal(await textOf(await session.readFile({ path: 'streamed.txt' })), 'streamed');
      const both = await session.spawn({ command: 'cat relative.txt >/dev/null && echo out && echo err >&2' });
      assert.deepEqual(await Promise.all([textOf(both.stdout), textOf(both.stderr), both.wait()]), ['out\n', 'err\n', { exitCode: 0 }]);
      assert.deepEqual(await (await session.spawn({ command: 'exit 7' })).wait(), { exitCode: 7 });
      const killed = await session.spawn({ command: 'sleep 30' });
      await killed.kill();
      assert.notEqual((await killed.wait()).exitCode, 0);
      const controller = new AbortController();
      const cancelled = await session.spawn({ command: 'sleep 30', abortSignal: controller.signal });
      controller.abort(new Error('user cancelled'));
      await assert.rejects(cancelled.wait(), /user cancelled/);
      await assert.rejects(session.run({ command: 'echo never', abortSignal: AbortSignal.abort() }));
    });
  });

  test("line ranges as the SDK's extractLines cuts them (packages/provider-utils/src/extract-lines.test.ts)", async () => {
    await withSession(async (session) => {
      const cases = [
        ['a\nb\nc\nd', {}, 'a\nb\nc\nd'],
        ['a\nb\nc\nd', { startLine: 2, endLine: 3 }, 'b\nc'],
        ['a\r\nb\r\nc\r\nd', { startLine: 2, endLine: 3 }, 'b\r\nc'],
        ['a\rb\rc\rd', { startLine: 2, endLine: 3 }, 'b\rc'],
        ['a\nb\nc', { startLine: 2, endLine: 99 }, 'b\nc'],
        ['a\nb\nc', { endLine: 2 }, 'a\nb'],
        ['a\nb\nc', { startLine: 2 }, 'b\nc'],
        ['one-liner', { startLine: 1, endLine: 1 }, 'one-liner'],
        ['a\nb\nc\nd\n', { startLine: 2, endLine: 3 }, 'b\nc'],
      ];
      for (const [i, [text, range, expected]] of cases.entries()) {
        await session.writeTextFile({ path: `lines-${i}.txt`, content: text });
        assert.equal(await session.readTextFile({ path: `lines-${i}.txt`, ...range }), expected, JSON.stringify([text, range]));
      }
    });
  });
});

test('importing the adapter without the AI SDK installed fails at once, naming the package', () => {
  // A resolve hook makes 'ai' unresolvable, as in a project that never installed it.
  const hooks = `import { registerHooks } from 'node:module';
registerHooks({ resolve(specifier, context, next) {
  if (specifier === 'ai') throw Object.assign(new Error("Cannot find package 'ai'"), { code: 'ERR_MODULE_NOT_FOUND' });
  return next(specifier, context);
} });
try { await import('native-sandbox/ai-sdk'); console.log('imported'); } catch (error) { console.log(error.name + ': ' + error.message); }`;
  const said = execFileSync(process.execPath, ['--input-type=module', '-e', hooks], { encoding: 'utf8', cwd: new URL('..', import.meta.url) });
  assert.match(said, /^SandboxUnsupportedError: native-sandbox\/ai-sdk .*'ai' is not installed here.*npm install ai@7/);
});
