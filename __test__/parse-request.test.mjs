import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseSandboxRequest, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_LIMITS, SandboxValidationError } from '../index.js';
import { assertDeepFrozen, assertIssues, request } from './helpers.mjs';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** What `fn` throws, or `undefined`. */
function thrownBy(fn) {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('parseSandboxRequest: valid inputs', () => {
  test('normalizes defaults and freezes deeply', () => {
    const parsed = parseSandboxRequest(request());
    assert.deepEqual(parsed.policy.execution, { kind: 'until_stopped' });
    assert.deepEqual(parsed.policy.workspaceDiskQuota, { kind: 'not_requested' });
    assert.equal(parsed.policy.resources.cpus, 1);
    assert.equal('maxStdinBytes' in parsed.policy.streams, false);
    assertDeepFrozen(parsed);
  });

  test('the default constants form a valid policy', () => {
    const parsed = parseSandboxRequest(
      request((p) => {
        p.transfers = SANDBOX_DEFAULT_TRANSFER_BUFFERS;
        p.streams = SANDBOX_DEFAULT_STREAM_LIMITS;
      }),
    );
    assert.deepEqual(parsed.policy.transfers, SANDBOX_DEFAULT_TRANSFER_BUFFERS);
  });

  const valid = [
    ['fractional cpus', (p) => (p.resources.cpus = 0.25)],
    ['one nano-CPU', (p) => (p.resources.cpus = 1e-9)],
    ['storage above 256 MiB', (p) => (p.temporaryStorage.homeBytes = 8 * 1024 ** 3)],
    ['memory at MAX_SAFE_INTEGER', (p) => (p.resources.memoryBytes = MAX_SAFE)],
    ['outbound network', (p) => (p.network = { kind: 'outbound' })],
    ['startupMs at 60000', (p) => (p.deadlines.startupMs = 60_000)],
    ['startupMs at 1', (p) => (p.deadlines.startupMs = 1)],
    ['cleanupMs at 30000', (p) => (p.deadlines.cleanupMs = 30_000)],
    ['deadline of 30 days', (p) => (p.execution = { kind: 'deadline', timeoutMs: 30 * 86_400_000 })],
    ['deadline at MAX_SAFE_INTEGER', (p) => (p.execution = { kind: 'deadline', timeoutMs: MAX_SAFE })],
    ['explicit until_stopped', (p) => (p.execution = { kind: 'until_stopped' })],
    ['zero stream totals', (p) => Object.assign(p.streams, { maxStdinBytes: 0, maxOutputBytes: 0 })],
    ['required disk quota', (p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 20 * 1024 ** 3, accounting: 'allocated_blocks' })],
    ['undefined optional fields', (p) => Object.assign(p, { execution: undefined, workspaceDiskQuota: undefined })],
    ['chunkBytes at 16 MiB', (p) => (p.transfers.chunkBytes = 16 * 1024 * 1024)],
    ['mergeFanIn at 2', (p) => (p.transfers.mergeFanIn = 2)],
    ['metadataBatchBytes at 4096', (p) => (p.transfers.metadataBatchBytes = 4096)],
    ['highWaterMark equal to staging', (p) => (p.streams.highWaterMark = 1048576)],
  ];
  for (const [name, edit] of valid) {
    test(name, () => {
      assert.doesNotThrow(() => parseSandboxRequest(request(edit)));
    });
  }

  test('keeps a 30-day deadline exact', () => {
    const parsed = parseSandboxRequest(request((p) => (p.execution = { kind: 'deadline', timeoutMs: 2_592_000_000 })));
    assert.deepEqual(parsed.policy.execution, { kind: 'deadline', timeoutMs: 2_592_000_000 });
  });

  test('does not alias or freeze the caller input', () => {
    const input = request();
    const parsed = parseSandboxRequest(input);
    assert.equal(Object.isFrozen(input.policy), false);
    assert.notEqual(parsed.policy.resources, input.policy.resources);
  });
});

describe('parseSandboxRequest: issues name the exact field', () => {
  const P = (...rest) => ['policy', ...rest];
  const cases = [
    ['not an object', null, [['invalid_type', []]]],
    ['a string', 'policy', [['invalid_type', []]]],
    ['an array', [], [['invalid_type', []]]],
    ['missing policy', {}, [['required', ['policy']]]],
    ['unknown top-level field', { ...request(), extra: 1 }, [['unknown_field', ['extra']]]],
    ['unknown policy field', request((p) => (p.gpu = 1)), [['unknown_field', P('gpu')]]],
    ['missing resources', request((p) => delete p.resources), [['required', P('resources')]]],
    ['missing transfers', request((p) => delete p.transfers), [['required', P('transfers')]]],
    ['missing streams', request((p) => delete p.streams), [['required', P('streams')]]],
    ['cpus zero', request((p) => (p.resources.cpus = 0)), [['too_small', P('resources', 'cpus')]]],
    ['cpus negative', request((p) => (p.resources.cpus = -1)), [['too_small', P('resources', 'cpus')]]],
    ['cpus NaN', request((p) => (p.resources.cpus = NaN)), [['not_finite', P('resources', 'cpus')]]],
    ['cpus Infinity', request((p) => (p.resources.cpus = Infinity)), [['not_finite', P('resources', 'cpus')]]],
    ['cpus -Infinity', request((p) => (p.resources.cpus = -Infinity)), [['not_finite', P('resources', 'cpus')]]],
    ['cpus string', request((p) => (p.resources.cpus = '1')), [['invalid_type', P('resources', 'cpus')]]],
    ['cpus bigint', request((p) => (p.resources.cpus = 1n)), [['invalid_type', P('resources', 'cpus')]]],
    ['cpus one past the ceiling', request((p) => (p.resources.cpus = 1_000_001)), [['too_large', P('resources', 'cpus')]]],
    ['memory fraction', request((p) => (p.resources.memoryBytes = 1.5)), [['not_integer', P('resources', 'memoryBytes')]]],
    ['memory unsafe', request((p) => (p.resources.memoryBytes = MAX_SAFE + 1)), [['unsafe_integer', P('resources', 'memoryBytes')]]],
    ['memory zero', request((p) => (p.resources.memoryBytes = 0)), [['too_small', P('resources', 'memoryBytes')]]],
    ['pids negative', request((p) => (p.resources.pids = -5)), [['too_small', P('resources', 'pids')]]],
    ['pids null', request((p) => (p.resources.pids = null)), [['invalid_type', P('resources', 'pids')]]],
    ['unknown resource', request((p) => (p.resources.gpus = 1)), [['unknown_field', P('resources', 'gpus')]]],
    ['homeBytes zero', request((p) => (p.temporaryStorage.homeBytes = 0)), [['too_small', P('temporaryStorage', 'homeBytes')]]],
    ['tempBytes fraction', request((p) => (p.temporaryStorage.tempBytes = 0.5)), [['not_integer', P('temporaryStorage', 'tempBytes')]]],
    ['network kind unknown', request((p) => (p.network = { kind: 'proxy' })), [['invalid_value', P('network', 'kind')]]],
    ['network kind missing', request((p) => (p.network = {})), [['required', P('network', 'kind')]]],
    ['network extra field', request((p) => (p.network = { kind: 'outbound', hosts: [] })), [['unknown_field', P('network', 'hosts')]]],
    ['network as string', request((p) => (p.network = 'isolated')), [['invalid_type', P('network')]]],
    ['startupMs one past', request((p) => (p.deadlines.startupMs = 60_001)), [['too_large', P('deadlines', 'startupMs')]]],
    ['startupMs zero', request((p) => (p.deadlines.startupMs = 0)), [['too_small', P('deadlines', 'startupMs')]]],
    ['cleanupMs one past', request((p) => (p.deadlines.cleanupMs = 30_001)), [['too_large', P('deadlines', 'cleanupMs')]]],
    ['cleanupMs fraction', request((p) => (p.deadlines.cleanupMs = 1.5)), [['not_integer', P('deadlines', 'cleanupMs')]]],
    ['retired executionMs', request((p) => (p.deadlines.executionMs = 1000)), [['retired_field', P('deadlines', 'executionMs')]]],
    ['retired operationMs', request((p) => (p.deadlines.operationMs = 1000)), [['retired_field', P('deadlines', 'operationMs')]]],
    ['chunkBytes zero', request((p) => (p.transfers.chunkBytes = 0)), [['too_small', P('transfers', 'chunkBytes')]]],
    ['chunkBytes one past', request((p) => (p.transfers.chunkBytes = 16 * 1024 * 1024 + 1)), [['too_large', P('transfers', 'chunkBytes')]]],
    ['metadataBatchBytes one under', request((p) => (p.transfers.metadataBatchBytes = 4095)), [['too_small', P('transfers', 'metadataBatchBytes')]]],
    ['mergeFanIn one', request((p) => (p.transfers.mergeFanIn = 1)), [['too_small', P('transfers', 'mergeFanIn')]]],
    ['mergeFanIn one past', request((p) => (p.transfers.mergeFanIn = 1025)), [['too_large', P('transfers', 'mergeFanIn')]]],
    ['highWaterMark above staging', request((p) => (p.streams.highWaterMark = 1048577)), [['too_large', P('streams', 'highWaterMark')]]],
    ['staging zero', request((p) => (p.streams.maxBufferedInputBytes = 0)), [['too_small', P('streams', 'maxBufferedInputBytes')]]],
    ['staging one past 1 GiB', request((p) => (p.streams.maxBufferedOutputBytes = 1024 ** 3 + 1)), [['too_large', P('streams', 'maxBufferedOutputBytes')]]],
    ['maxStdinBytes negative', request((p) => (p.streams.maxStdinBytes = -1)), [['too_small', P('streams', 'maxStdinBytes')]]],
    ['maxOutputBytes NaN', request((p) => (p.streams.maxOutputBytes = NaN)), [['not_finite', P('streams', 'maxOutputBytes')]]],
    ['unknown stream field', request((p) => (p.streams.maxTotalBytes = 1)), [['unknown_field', P('streams', 'maxTotalBytes')]]],
    ['execution kind unknown', request((p) => (p.execution = { kind: 'idle' })), [['invalid_value', P('execution', 'kind')]]],
    ['deadline without timeout', request((p) => (p.execution = { kind: 'deadline' })), [['required', P('execution', 'timeoutMs')]]],
    ['deadline zero', request((p) => (p.execution = { kind: 'deadline', timeoutMs: 0 })), [['too_small', P('execution', 'timeoutMs')]]],
    ['deadline unsafe', request((p) => (p.execution = { kind: 'deadline', timeoutMs: 2 ** 53 })), [['unsafe_integer', P('execution', 'timeoutMs')]]],
    ['deadline Infinity', request((p) => (p.execution = { kind: 'deadline', timeoutMs: Infinity })), [['not_finite', P('execution', 'timeoutMs')]]],
    ['until_stopped with timeout', request((p) => (p.execution = { kind: 'until_stopped', timeoutMs: 5 })), [['unknown_field', P('execution', 'timeoutMs')]]],
    ['quota without accounting', request((p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 1 })), [['required', P('workspaceDiskQuota', 'accounting')]]],
    ['quota wrong accounting', request((p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 1, accounting: 'logical' })), [['invalid_value', P('workspaceDiskQuota', 'accounting')]]],
    ['quota bytes zero', request((p) => (p.workspaceDiskQuota = { kind: 'required', bytes: 0, accounting: 'allocated_blocks' })), [['too_small', P('workspaceDiskQuota', 'bytes')]]],
    ['quota kind enforced', request((p) => (p.workspaceDiskQuota = { kind: 'enforced', bytes: 1 })), [['invalid_value', P('workspaceDiskQuota', 'kind')]]],
  ];
  for (const [name, input, expected] of cases) {
    test(name, () => assertIssues(parseSandboxRequest, input, expected));
  }

  test('collects every issue of one input, not the first only', () => {
    const input = request((p) => {
      p.resources.cpus = NaN;
      p.resources.memoryBytes = -1;
      p.network = { kind: 'x' };
      p.deadlines.executionMs = 5;
      p.deadlines.operationMs = 5;
      p.extra = true;
      delete p.streams;
    });
    const error = assertIssues(parseSandboxRequest, input, [
      ['not_finite', P('resources', 'cpus')],
      ['too_small', P('resources', 'memoryBytes')],
      ['invalid_value', P('network', 'kind')],
      ['retired_field', P('deadlines', 'executionMs')],
      ['retired_field', P('deadlines', 'operationMs')],
      ['required', P('streams')],
      ['unknown_field', P('extra')],
    ]);
    assert.equal(error.message, 'Invalid sandbox input');
  });

  test('retired fields say how to migrate', () => {
    const error = assertIssues(parseSandboxRequest, request((p) => (p.deadlines.executionMs = 1)), [['retired_field', P('deadlines', 'executionMs')]]);
    assert.match(error.issues[0].message, /execution/);
    assert.match(error.issues[0].message, /deadline/);
    const op = assertIssues(parseSandboxRequest, request((p) => (p.deadlines.operationMs = 1)), [['retired_field', P('deadlines', 'operationMs')]]);
    assert.match(op.issues[0].message, /deadlineAt|signal/);
  });

  test('a class instance is not a plain object', () => {
    class Policy {}
    assertIssues(parseSandboxRequest, { policy: new Policy() }, [['invalid_type', ['policy']]]);
  });

  test('a cyclic input is refused, not looped over', () => {
    const input = request();
    input.policy.resources.self = input;
    assert.throws(() => parseSandboxRequest(input), { name: 'SandboxValidationError' });
  });
});

describe('input capture is bounded in total, not only per level', () => {
  const P = (...rest) => ['policy', ...rest];
  test('shared references (2^40 paths through 41 objects) are answered with a typed error', () => {
    let shared = { cpus: 1 };
    for (let i = 0; i < 40; i++) shared = { a: shared, b: shared };
    const input = request();
    input.policy.resources = shared;
    const thrown = thrownBy(() => parseSandboxRequest(input));
    assert.ok(thrown instanceof SandboxValidationError);
    const budget = thrown.issues.find((issue) => issue.code === 'too_long');
    assert.ok(budget, 'the capture budget is reported');
    assert.equal(budget.path[0], 'policy');
    assert.match(budget.message, /captureObjects/);
    assert.equal(SANDBOX_LIMITS.captureObjects, 4096);
  });

  test('an object met again on its own path is reported as a cycle where it is read', () => {
    const input = request();
    input.policy.resources = input.policy;
    assertIssues(parseSandboxRequest, input, [['invalid_value', P('resources')]]);
  });

  test('a string longer than any field is refused unread', () => {
    const input = request();
    input.policy.network.kind = 'x'.repeat(SANDBOX_LIMITS.captureStringBytesOne + 1);
    const error = assertIssues(parseSandboxRequest, input, [['too_long', P('network', 'kind')]]);
    assert.match(error.issues[0].message, /captureStringBytesOne/);
  });

  test('an array past the values budget is refused unread', () => {
    const input = request();
    input.policy.network = new Array(SANDBOX_LIMITS.captureValues + 1).fill(0);
    const error = assertIssues(parseSandboxRequest, input, [['too_long', P('network')]]);
    assert.match(error.issues[0].message, /captureValues/);
  });
});

describe('input capture stays bounded on hostile shapes', () => {
  test('a million references to one long string are answered without reading it a million times', () => {
    const long = 'x'.repeat(SANDBOX_LIMITS.captureStringBytesOne + 1);
    const input = request();
    input.policy.network = new Array(SANDBOX_LIMITS.captureValues - 100).fill(long);
    const thrown = thrownBy(() => parseSandboxRequest(input));
    assert.ok(thrown instanceof SandboxValidationError);
    assert.equal(thrown.issues[0].path[1], 'network');
  });

  test('an object with very many keys, shared many times, is enumerated at most twice', () => {
    const wide = {};
    for (let i = 0; i < 200_000; i++) wide[`k${i}`] = 0;
    const input = request();
    input.policy.resources = Array.from({ length: 4000 }, () => wide);
    const thrown = thrownBy(() => parseSandboxRequest(input));
    assert.ok(thrown instanceof SandboxValidationError);
    assert.ok(thrown.issues.some((issue) => /captureValues/.test(issue.message)), thrown.message);
  });

  test('a key holding NUL is read as it is and reported as an unknown field', () => {
    const input = request();
    input.policy['odd\u0000key'] = 1;
    assertIssues(parseSandboxRequest, input, [['unknown_field', ['policy', 'odd\u0000key']]]);
  });
});

describe('input capture charges what it cannot keep', () => {
  test('symbol keys are charged: a wide object of symbols shared thousands of times is read at most twice', () => {
    const wide = {};
    for (let i = 0; i < 200_000; i++) wide[Symbol(String(i))] = 0;
    const input = request();
    input.policy.resources = Array.from({ length: 4000 }, () => wide);
    const thrown = thrownBy(() => parseSandboxRequest(input));
    assert.ok(thrown instanceof SandboxValidationError);
    assert.ok(thrown.issues.some((issue) => /captureValues/.test(issue.message)), thrown.message);
  });

  test('a class with an overlong name is named briefly, not copied', () => {
    const Long = class {};
    Object.defineProperty(Long, 'name', { value: 'N'.repeat(10_000) });
    const thrown = thrownBy(() => parseSandboxRequest({ policy: new Long() }));
    assert.ok(thrown instanceof SandboxValidationError);
    assert.match(thrown.issues[0].message, /overlong name/);
  });
});
