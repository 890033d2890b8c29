// Every code example of the original README (@agen-ai/sandbox 0.4.4), run against this package.
// Each example's body is the original's text, adapted only by the package alias (`@agen-ai/sandbox`
// → `native-sandbox`) and, where the original writes a placeholder (an absolute host path, an
// application's sink, the guest agent's binary), by the value a test supplies for it.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileFromBytes } from 'native-sandbox';
import { createSandboxAcpIntegration } from 'native-sandbox/acp';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';
import { dockerBackend, leftovers, NOTHING, request, runShell, uniqueNamespace } from './docker-helpers.mjs';

const namespace = uniqueNamespace('readme');
const backend = dockerBackend(namespace);

after(() => {
  assert.deepEqual(leftovers(namespace), NOTHING);
});

async function withStarted(fn) {
  const sandbox = await backend.reserve(request(), { kind: 'in_process' }).start();
  try {
    return await fn(sandbox);
  } finally {
    await sandbox.destroy();
  }
}

test('README: streaming import, stop, exact-file export with quotas', async () => {
  await withStarted(async (sandbox) => {
    const received = [];
    const applicationOwnedSink = { write: async (chunk) => void received.push(Buffer.from(chunk)) };
    // --- the original's example, with the alias ---
    await sandbox.importTree([
      { kind: 'directory', path: 'inputs' },
      fileFromBytes('inputs/task.txt', new TextEncoder().encode('task input')),
    ]);
    // Reserve/run the process, close its SDK session, then stop the whole workload.
    await runShell(sandbox, 'mkdir -p results && tr a-z A-Z < inputs/task.txt > results/result.txt');
    await sandbox.stop();
    await sandbox.exportTree({ kind: 'files', paths: ['results/result.txt'] }, async (entry) => {
      if (entry.kind === 'file') {
        for await (const chunk of entry.bytes) await applicationOwnedSink.write(chunk);
      }
    }, { quotas: { maxTotalBytes: 20n * 1024n ** 3n } });
    // --- end of the example ---
    assert.equal(Buffer.concat(received).toString(), 'TASK INPUT');
  });
});

test('README: import and publish host directories', async () => {
  const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-readme-'));
  const source = join(scratch, 'source');
  mkdirSync(join(source, 'src'), { recursive: true });
  writeFileSync(join(source, 'src', 'main.txt'), 'quiescent source');
  const output = join(scratch, 'new-output');
  await withStarted(async (sandbox) => {
    // --- the original's example, with the alias and the test's absolute paths ---
    await importSandboxDirectory(sandbox, source);
    // Run and close the agent, then stop all compute before exporting.
    await sandbox.stop();
    const exported = await exportSandboxDirectory(
      sandbox, { kind: 'workspace' }, output,
    );
    console.log(exported.directory); // /absolute/new-output/files
    // --- end of the example ---
    assert.equal(exported.directory, join(output, 'files'));
    assert.equal(readFileSync(join(exported.directory, 'src', 'main.txt'), 'utf8'), 'quiescent source');
  });
});

test('README: the optional ACP integration', async () => {
  // `@agen-ai/provider-acp` is not on the registry: this stand-in for its Node constructor takes
  // the options the example passes and starts the launch through the integration's boundary,
  // as the provider does on materialization.
  let started;
  const createNodeAcpProviderDriver = (options) => {
    assert.deepEqual(Object.keys(options).sort(), ['executionBoundary', 'host', 'launch', 'providerKey']);
    assert.deepEqual(options.host, {});
    started = options.executionBoundary.reserve(options.launch).start({});
    return Object.freeze({ providerKey: options.providerKey });
  };
  const providerKey = 'sandboxed-agent';
  await withStarted(async (sandbox) => {
    // --- the original's example; the guest image's agent is the busybox shell here ---
    // Start the sandbox and finish its file imports before creating the integration.
    const integration = createSandboxAcpIntegration(sandbox);
    const driver = createNodeAcpProviderDriver({
      providerKey,
      ...integration,
      launch: {
        executable: '/bin/sh',
        args: ['-c', 'cat'],
        env: {},
        cwd: sandbox.workspace,
        shutdownTimeoutMs: 15_000,
      },
    });
    // --- end of the example ---
    assert.equal(driver.providerKey, providerKey);
    const { stdin, stdout } = await started;
    const echoed = new Promise((resolve) => stdout.once('data', (chunk) => resolve(String(chunk))));
    stdin.write('{"jsonrpc":"2.0"}\n');
    assert.equal(await echoed, '{"jsonrpc":"2.0"}\n');
    stdin.end();
    await sandbox.stop();
  });
});
