// A worker thread that loads the addon and runs one whole lifecycle on its runtime, then reports
// the state it saw (runtime-env.test.mjs starts these one after another).
import { parentPort } from 'node:worker_threads';
import { createSandboxBackend } from 'native-sandbox/backend';
import { withSandbox } from 'native-sandbox';
import { scriptedDriver, policy } from './scripted-driver.mjs';

const backend = createSandboxBackend(scriptedDriver().driver);
parentPort.postMessage(
  await withSandbox(backend, policy(), async (s) => s.state.kind, { recovery: { kind: 'in_process' } }),
);
