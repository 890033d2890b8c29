// Messages a new user meets first, each naming the right thing: host paths as host paths, an
// env that is not a plain object as what it is, reserve's arguments by name, and every issue
// code reported by a type the declarations list.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SandboxValidationError } from 'native-sandbox';
import { createSandboxBackend } from 'native-sandbox/backend';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { initialRecord, policy, SUPPORT } from './scripted-driver.mjs';

function issuesOf(fn) {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof SandboxValidationError, String(error));
    return error.issues.map((issue) => [issue.path.join('.'), issue.message]);
  }
  assert.fail('expected a SandboxValidationError');
}

test('host paths are called host paths', () => {
  const issues = issuesOf(() => createDockerSandboxBackend({ image: 'busybox:1', namespace: 'ns', spillDirectory: 'spill', engine: { socketPath: 'docker.sock' } }));
  assert.deepEqual(issues, [
    ['spillDirectory', 'must be an absolute host path (leading /)'],
    ['engine.socketPath', 'must be an absolute host path (leading /)'],
  ]);
});

const driver = {
  support: SUPPORT,
  reserve: (request) => ({ id: 'sbx-1', recoveryRecord: initialRecord('sbx-1'), start: async () => ({}), stop: async () => {}, destroy: async () => {} }),
  reconcile: async () => ({ kind: 'conflict', reason: 'not used' }),
};

test("reserve's arguments are named; a process env that is not a plain object says what it is", async () => {
  const backend = createSandboxBackend(driver);
  const [[path, message]] = issuesOf(() => backend.reserve(policy()));
  assert.equal(path, '');
  assert.match(message, /^recovery \(the second argument of reserve: \{ kind: 'in_process' \} or \{ kind: 'persisted', persist \}\): expected a plain object, received undefined$/);
  const [[requestPath, requestMessage]] = issuesOf(() => backend.reserve(undefined, { kind: 'in_process' }));
  assert.equal(requestPath, '');
  assert.match(requestMessage, /^request \(the first argument of reserve\): /);

  const { parseSandboxProcessSpec } = await import('native-sandbox');
  const spec = (env) => ({ executable: '/bin/sh', args: [], env, cwd: '/tmp' });
  const [[envPath, envMessage]] = issuesOf(() => parseSandboxProcessSpec(spec(process.env)));
  assert.equal(envPath, 'env');
  assert.match(envMessage, /\{ \.\.\.process\.env \}.*received an object of an unnamed class \(process\.env is one\)$/);
  const [[, mapMessage]] = issuesOf(() => parseSandboxProcessSpec(spec(new Map([['A', 'b']]))));
  assert.match(mapMessage, /received Map instance$/);
  // A copy is read.
  assert.equal(parseSandboxProcessSpec(spec({ ...{ HOME_DIR: '/x' } })).env.HOME_DIR, '/x');
});

test('every issue code the package reports is in ValidationIssueCode', () => {
  const types = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8');
  const block = types.slice(types.indexOf('export type ValidationIssueCode ='), types.indexOf(';', types.indexOf('export type ValidationIssueCode =')));
  const declared = new Set([...block.matchAll(/\| '([a-z_]+)'/g)].map((m) => m[1]));
  const rust = readFileSync(new URL('../src/input/issues.rs', import.meta.url), 'utf8');
  const reported = new Set([...rust.matchAll(/=> "([a-z_]+)"/g)].map((m) => m[1]));
  for (const file of ['js/agentproto/spec.js', 'js/conformance.js', 'js/backend.js', 'js/docker.js']) {
    const source = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
    for (const match of source.matchAll(/(?:code: |this\.add\()'([a-z_]+)'/g)) reported.add(match[1]);
  }
  assert.ok(reported.size >= 15, [...reported].join(' '));
  assert.deepEqual([...reported].filter((code) => !declared.has(code)), []);
});
