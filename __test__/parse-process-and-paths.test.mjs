import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  fileFromBytes,
  parseSandboxGuestPath,
  parseSandboxId,
  parseSandboxProcessId,
  parseSandboxProcessSpec,
  parseSandboxRelativePath,
  SANDBOX_LIMITS,
  SandboxValidationError,
} from '../index.js';
import { assertDeepFrozen, assertIssues } from './helpers.mjs';

const spec = (edit = () => {}) => {
  const s = { executable: '/bin/sh', args: ['-c', 'echo hi'], env: { LANG: 'C' }, cwd: '/sandbox/workspace' };
  edit(s);
  return s;
};

describe('parseSandboxProcessSpec', () => {
  test('returns a frozen literal recipe', () => {
    const parsed = parseSandboxProcessSpec(spec());
    assert.deepEqual(parsed, spec());
    assertDeepFrozen(parsed);
  });

  test('128 arguments and 128 environment entries are accepted', () => {
    const input = spec((s) => {
      s.args = Array.from({ length: 128 }, (_, i) => `a${i}`);
      s.env = Object.fromEntries(Array.from({ length: 128 }, (_, i) => [`V${i}`, 'x']));
    });
    assert.equal(parseSandboxProcessSpec(input).args.length, 128);
  });

  test('an environment value of exactly 16 KiB is accepted', () => {
    assert.doesNotThrow(() => parseSandboxProcessSpec(spec((s) => (s.env = { BIG: 'x'.repeat(16384) }))));
  });

  const cases = [
    ['not an object', 'sh -c', [['invalid_type', []]]],
    ['missing executable', spec((s) => delete s.executable), [['required', ['executable']]]],
    ['relative executable', spec((s) => (s.executable = 'bin/sh')), [['invalid_path', ['executable']]]],
    ['executable with ..', spec((s) => (s.executable = '/bin/../sh')), [['invalid_path', ['executable']]]],
    ['missing args', spec((s) => delete s.args), [['required', ['args']]]],
    ['args as string', spec((s) => (s.args = '-c echo')), [['invalid_type', ['args']]]],
    ['129 arguments', spec((s) => (s.args = Array(129).fill('a'))), [['too_long', ['args']]]],
    ['numeric argument', spec((s) => (s.args = ['-n', 5])), [['invalid_type', ['args', 1]]]],
    ['NUL in argument', spec((s) => (s.args = ['a\0b'])), [['invalid_value', ['args', 0]]]],
    ['missing env', spec((s) => delete s.env), [['required', ['env']]]],
    ['env as array', spec((s) => (s.env = [])), [['invalid_type', ['env']]]],
    ['129 env entries', spec((s) => (s.env = Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`V${i}`, 'x'])))), [['too_long', ['env']]]],
    ['env name with =', spec((s) => (s.env = { 'A=B': 'x' })), [['invalid_value', ['env', 'A=B']]]],
    ['empty env name', spec((s) => (s.env = { '': 'x' })), [['invalid_value', ['env', '']]]],
    ['env value number', spec((s) => (s.env = { N: 1 })), [['invalid_type', ['env', 'N']]]],
    ['env value one past 16 KiB', spec((s) => (s.env = { BIG: 'x'.repeat(16385) })), [['too_long', ['env', 'BIG']]]],
    ['relative cwd', spec((s) => (s.cwd = 'workspace')), [['invalid_path', ['cwd']]]],
    ['trailing slash cwd', spec((s) => (s.cwd = '/sandbox/')), [['invalid_path', ['cwd']]]],
    ['unknown field shell', spec((s) => (s.shell = true)), [['unknown_field', ['shell']]]],
    ['unknown field inheritEnv', spec((s) => (s.inheritEnv = true)), [['unknown_field', ['inheritEnv']]]],
  ];
  for (const [name, input, expected] of cases) {
    test(name, () => assertIssues(parseSandboxProcessSpec, input, expected));
  }

  test('process.env is not a plain object and is refused', () => {
    assert.throws(() => parseSandboxProcessSpec(spec((s) => (s.env = process.env))), { name: 'SandboxValidationError' });
  });

  test('a recipe over 256 KiB as JSON is refused as a whole', () => {
    const input = spec((s) => (s.env = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`V${i}`, 'x'.repeat(16000)]))));
    assertIssues(parseSandboxProcessSpec, input, [['too_long', []]]);
  });

  test('collects every issue', () => {
    assertIssues(parseSandboxProcessSpec, { executable: 'sh', args: [1], env: { 'a=b': 'c' }, cwd: '.', extra: 0 }, [
      ['invalid_path', ['executable']],
      ['invalid_type', ['args', 0]],
      ['invalid_value', ['env', 'a=b']],
      ['invalid_path', ['cwd']],
      ['unknown_field', ['extra']],
    ]);
  });
});

describe('parseSandboxRelativePath and parseSandboxGuestPath', () => {
  const component = (n, c = 'x') => c.repeat(n);
  const at1024 = [component(255, 'a'), component(255, 'b'), component(255, 'c'), component(256, 'd')].join('/');
  const relative = [
    ['a', null],
    ['results/reports/summary.txt', null],
    [Array(64).fill('a').join('/'), null],
    [component(255), null],
    [at1024.slice(0, -2), null],
    ['', 'invalid_path'],
    ['/abs', 'invalid_path'],
    ['a//b', 'invalid_path'],
    ['a/', 'invalid_path'],
    ['./a', 'invalid_path'],
    ['a/../b', 'invalid_path'],
    ['a\0b', 'invalid_path'],
    [Array(65).fill('a').join('/'), 'too_long'],
    [component(256), 'too_long'],
    [`${at1024.slice(0, -2)}/xy`, 'too_long'],
    [42, 'invalid_type'],
  ];
  for (const [input, code] of relative) {
    const label = typeof input === 'string' ? JSON.stringify(input.length > 40 ? `${input.slice(0, 20)}…(${input.length})` : input) : String(input);
    test(`relative ${label} → ${code ?? 'ok'}`, () => {
      if (code === null) assert.equal(parseSandboxRelativePath(input), input);
      else assertIssues(parseSandboxRelativePath, input, [[code, []]]);
    });
  }

  const guest = [
    ['/', null],
    ['/sandbox/workspace', null],
    [`/${Array(64).fill('a').join('/')}`, null],
    ['sandbox', 'invalid_path'],
    ['/sandbox/', 'invalid_path'],
    ['//sandbox', 'invalid_path'],
    ['/sandbox/./x', 'invalid_path'],
    [`/${Array(65).fill('a').join('/')}`, 'too_long'],
    [`/${component(256)}`, 'too_long'],
    [null, 'invalid_type'],
  ];
  for (const [input, code] of guest) {
    test(`guest ${JSON.stringify(input)?.slice(0, 30)} → ${code ?? 'ok'}`, () => {
      if (code === null) assert.equal(parseSandboxGuestPath(input), input);
      else assertIssues(parseSandboxGuestPath, input, [[code, []]]);
    });
  }

  test('limits are the published ones', () => {
    assert.equal(SANDBOX_LIMITS.pathBytes, 1024);
    assert.equal(SANDBOX_LIMITS.pathComponents, 64);
    assert.equal(SANDBOX_LIMITS.pathComponentBytes, 255);
  });
});

describe('parseSandboxId and parseSandboxProcessId', () => {
  for (const parse of [parseSandboxId, parseSandboxProcessId]) {
    test(`${parse.name} accepts engine-safe identifiers`, () => {
      assert.equal(parse('sbx-01.a_b'), 'sbx-01.a_b');
      assert.equal(parse('a'.repeat(128)), 'a'.repeat(128));
    });
    test(`${parse.name} refuses the rest`, () => {
      assertIssues(parse, 'a'.repeat(129), [['too_long', []]]);
      assertIssues(parse, '', [['invalid_value', []]]);
      assertIssues(parse, '-lead', [['invalid_value', []]]);
      assertIssues(parse, 'a b', [['invalid_value', []]]);
      assertIssues(parse, 7, [['invalid_type', []]]);
    });
  }
});

describe('fileFromBytes', () => {
  test('every bad input throws SandboxValidationError naming the field', () => {
    const issue = (call) => {
      const error = (() => {
        try {
          call();
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      assert.ok(error instanceof SandboxValidationError, String(error));
      return error.issues.map((i) => [i.code, i.path.join('.')]);
    };
    const bytes = Buffer.from('x');
    assert.deepEqual(issue(() => fileFromBytes('../a', bytes)).map(([code]) => code), ['invalid_path']);
    assert.deepEqual(issue(() => fileFromBytes('a', 'text')), [['invalid_type', 'bytes']]);
    assert.deepEqual(issue(() => fileFromBytes('a', bytes, null)), [['invalid_type', 'options']]);
    assert.deepEqual(issue(() => fileFromBytes('a', bytes, 7)), [['invalid_type', 'options']]);
    assert.deepEqual(issue(() => fileFromBytes('a', bytes, { executable: 1 })), [['invalid_type', 'options.executable']]);
    assert.deepEqual(issue(() => fileFromBytes('a', bytes, { chunkBytes: 0 })), [['too_small', 'options.chunkBytes']]);
    assert.deepEqual(issue(() => fileFromBytes('a', bytes, { other: true })), [['unknown_field', 'options.other']]);
    const entry = fileFromBytes('a', bytes, { executable: true });
    assert.deepEqual({ ...entry, open: undefined }, { kind: 'file', path: 'a', byteLength: 1, executable: true, open: undefined });
  });
});
