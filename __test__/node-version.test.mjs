// The runtimes the suites run on are named in one place; any other is told once, never refused.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { TESTED_NODE_MAJORS, untestedNodeMessage, warnIfUntestedNode } from '../js/node-version.js';

test('tested majors pass silently; any other is named with the tested ones', () => {
  for (const version of ['20.20.2', '22.23.3', '24.22.3', '26.12.1']) assert.equal(untestedNodeMessage(version), undefined, version);
  for (const version of ['18.20.0', '21.7.3', '23.11.0', '25.0.0', '27.0.0']) {
    const message = untestedNodeMessage(version);
    assert.match(message, new RegExp(`this is Node\\.js ${version.replaceAll('.', '\\.')}`));
    assert.match(message, /tested on Node\.js 20, 22, 24, 26/);
  }
  const emitted = [];
  assert.equal(warnIfUntestedNode('25.1.0', (message, options) => emitted.push({ message, options })), true);
  assert.equal(emitted.length, 1);
  assert.equal(emitted[0].options.code, 'NATIVE_SANDBOX_UNTESTED_NODE');
  assert.equal(warnIfUntestedNode('26.12.1', () => assert.fail('a tested runtime is not warned')), false);
});

test('the tested majors are the ones the test scripts run and the docs name', () => {
  const scripts = readFileSync(new URL('../scripts/test.sh', import.meta.url), 'utf8') + readFileSync(new URL('../scripts/test-versions.sh', import.meta.url), 'utf8');
  for (const major of TESTED_NODE_MAJORS) assert.match(scripts, new RegExp(`Node\\.js ${major}\\b`), `the test scripts run Node.js ${major}`);
  const install = readFileSync(new URL('../docs/install.md', import.meta.url), 'utf8');
  assert.match(install, /Node\.js 26 and 22 run every suite; 20 and 24 the contract, loader and Docker smoke suites/);
});

test('loading the package on this (tested) runtime warns nothing', () => {
  const loaded = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('native-sandbox'); await import('native-sandbox/docker');"], { encoding: 'utf8' });
  assert.equal(loaded.status, 0, loaded.stderr);
  assert.doesNotMatch(loaded.stderr, /NATIVE_SANDBOX_UNTESTED_NODE/);
});
