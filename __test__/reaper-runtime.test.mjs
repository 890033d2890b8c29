// Where the reaper cannot run as `process.execPath` with its script (a single-executable
// application, another runtime, a bundle without the package's files), in_process starts fail
// naming why, instead of starting copies of the application as reapers. No engine needed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { reaperRuntimeProblem, reaperScript, thisRuntime } from '../js/reaper-runtime.js';

const node = { isSea: false, releaseName: 'node', execPath: '/usr/bin/node', script: '/app/node_modules/native-sandbox/js/reaper-main.js', scriptExists: true };

test('Node.js with the package on disk runs its reaper', () => {
  assert.equal(reaperRuntimeProblem(node), undefined);
  const here = thisRuntime();
  assert.equal(here.isSea, false);
  assert.equal(here.releaseName, 'node');
  assert.equal(here.execPath, process.execPath);
  assert.ok(here.script.endsWith('/js/reaper-main.js') && existsSync(here.script), here.script);
  assert.equal(reaperRuntimeProblem(here), undefined);
});

test('a single-executable application, another runtime or a bundle is named, with its executable', () => {
  const sea = reaperRuntimeProblem({ ...node, isSea: true, execPath: '/opt/app/app' });
  assert.match(sea, /process\.execPath \(\/opt\/app\/app\) is a single-executable application/);
  const other = reaperRuntimeProblem({ ...node, releaseName: 'io.js' });
  assert.match(other, /not Node\.js \(process\.release\.name is "io\.js"\)/);
  assert.match(reaperRuntimeProblem({ ...node, releaseName: undefined }), /process\.release\.name is undefined/);
  assert.match(reaperRuntimeProblem({ ...node, script: undefined, scriptExists: false }), /not loaded from files/);
  assert.match(reaperRuntimeProblem({ ...node, scriptExists: false }), /reaper-main\.js does not exist/);
});

test("the script is found beside the module only when the module is a file", () => {
  assert.equal(reaperScript(pathToFileURL('/x/js/reaper-runtime.js').href), '/x/js/reaper-main.js');
  assert.equal(reaperScript('data:text/javascript,export{}'), undefined);
});
