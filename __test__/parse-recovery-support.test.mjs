import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assertSandboxEffectivePolicy,
  assertSandboxRequestSupported,
  SandboxUnsupportedError,
  SandboxValidationError,
  parseSandboxEffectivePolicy,
  parseSandboxRecoveryPolicy,
  parseSandboxRecoveryRecord,
  parseSandboxSupport,
  parseTransferOptions,
} from '../index.js';
import { assertDeepFrozen, assertIssues, request } from './helpers.mjs';

const D = (c) => `sha256:${c.repeat(64)}`;
const record = (edit = () => {}) => {
  const r = {
    format: 'agenai.sandbox-recovery.v2',
    backendId: 'docker',
    backendRevision: '1',
    namespace: 'ci',
    operationId: 'op-1',
    sandboxId: 'sbx-1',
    imageDigest: D('a'),
    policyDigest: D('b'),
    configurationDigest: D('c'),
    phase: 'reserved',
    authority: { kind: 'unverified' },
    resources: [
      { role: 'compute', name: 'ns-sbx-1-compute', identity: { kind: 'planned' } },
      { role: 'storage', name: 'ns-sbx-1-storage', identity: { kind: 'identified', id: 'vol-1', fingerprint: D('d') } },
    ],
  };
  edit(r);
  return r;
};

describe('parseSandboxRecoveryRecord', () => {
  test('accepts a v2 record and freezes it', () => {
    const parsed = parseSandboxRecoveryRecord(record());
    assert.deepEqual(parsed, record());
    assertDeepFrozen(parsed);
  });

  test('accepts four unique roles and verified authority', () => {
    const input = record((r) => {
      r.authority = { kind: 'verified', backendIdentity: 'engine:abc' };
      r.resources = ['compute', 'storage', 'export', 'network'].map((role) => ({ role, name: role, identity: { kind: 'creating' } }));
    });
    assert.equal(parseSandboxRecoveryRecord(input).resources.length, 4);
  });

  const cases = [
    ['v1 format', record((r) => (r.format = 'agenai.sandbox-recovery.v1')), [['unsupported_format', ['format']]]],
    ['foreign format', { format: 'other', anything: true }, [['unsupported_format', ['format']]]],
    ['missing format', record((r) => delete r.format), [['required', ['format']]]],
    ['numeric format', record((r) => (r.format = 2)), [['invalid_type', ['format']]]],
    ['uppercase digest', record((r) => (r.imageDigest = `sha256:${'A'.repeat(64)}`)), [['invalid_value', ['imageDigest']]]],
    ['short digest', record((r) => (r.policyDigest = `sha256:${'a'.repeat(63)}`)), [['invalid_value', ['policyDigest']]]],
    ['missing configurationDigest', record((r) => delete r.configurationDigest), [['required', ['configurationDigest']]]],
    ['unknown phase', record((r) => (r.phase = 'running')), [['invalid_value', ['phase']]]],
    ['bad sandbox id', record((r) => (r.sandboxId = 'a/b')), [['invalid_value', ['sandboxId']]]],
    ['empty backend id', record((r) => (r.backendId = '')), [['too_small', ['backendId']]]],
    ['verified without identity', record((r) => (r.authority = { kind: 'verified' })), [['required', ['authority', 'backendIdentity']]]],
    ['five resources', record((r) => (r.resources = Array(5).fill(r.resources[0]))), [['too_long', ['resources']]]],
    ['duplicate role', record((r) => (r.resources = [r.resources[0], { ...r.resources[0], name: 'x' }])), [['duplicate', ['resources', 1, 'role']]]],
    ['unknown role', record((r) => (r.resources[0].role = 'gpu')), [['invalid_value', ['resources', 0, 'role']]]],
    ['identified without fingerprint', record((r) => (r.resources[0].identity = { kind: 'identified', id: 'x' })), [['required', ['resources', 0, 'identity', 'fingerprint']]]],
    ['planned with id', record((r) => (r.resources[0].identity = { kind: 'planned', id: 'x' })), [['unknown_field', ['resources', 0, 'identity', 'id']]]],
    ['environment payload', record((r) => (r.env = { TOKEN: 'x' })), [['unknown_field', ['env']]]],
  ];
  for (const [name, input, expected] of cases) {
    test(name, () => assertIssues(parseSandboxRecoveryRecord, input, expected));
  }

  test('field bounds keep even the largest record within 64 KiB, one byte past a bound is refused', () => {
    const largest = record((r) => {
      r.backendId = 'b'.repeat(256);
      r.backendRevision = 'r'.repeat(256);
      r.namespace = 'n'.repeat(128);
      r.operationId = 'o'.repeat(128);
      r.sandboxId = 's'.repeat(128);
      r.authority = { kind: 'verified', backendIdentity: '\u{1F600}'.repeat(256) };
      r.resources = ['compute', 'storage', 'export', 'network'].map((role) => ({
        role,
        name: 'x'.repeat(256),
        identity: { kind: 'identified', id: 'i'.repeat(256), fingerprint: D('e') },
      }));
    });
    const parsed = parseSandboxRecoveryRecord(largest);
    assert.ok(Buffer.byteLength(JSON.stringify(parsed)) <= 65536);
    assertIssues(parseSandboxRecoveryRecord, { ...largest, backendId: 'b'.repeat(257) }, [['too_long', ['backendId']]]);
    assertIssues(parseSandboxRecoveryRecord, record((r) => (r.resources[0].name = 'n'.repeat(257))), [['too_long', ['resources', 0, 'name']]]);
    assertIssues(parseSandboxRecoveryRecord, { ...largest, authority: { kind: 'verified', backendIdentity: 'x'.repeat(1025) } }, [
      ['too_long', ['authority', 'backendIdentity']],
    ]);
  });
});

describe('parseSandboxRecoveryPolicy', () => {
  test('in_process', () => assert.deepEqual(parseSandboxRecoveryPolicy({ kind: 'in_process' }), { kind: 'in_process' }));
  test('persisted keeps the same function', () => {
    const persist = async () => {};
    const parsed = parseSandboxRecoveryPolicy({ kind: 'persisted', persist });
    assert.equal(parsed.persist, persist);
    assert.ok(Object.isFrozen(parsed));
  });
  test('persisted without persist', () => assertIssues(parseSandboxRecoveryPolicy, { kind: 'persisted' }, [['required', ['persist']]]));
  test('persist not a function', () => assertIssues(parseSandboxRecoveryPolicy, { kind: 'persisted', persist: 'db' }, [['invalid_type', ['persist']]]));
  test('unknown kind', () => assertIssues(parseSandboxRecoveryPolicy, { kind: 'none' }, [['invalid_value', ['kind']]]));
  test('missing policy', () => assertIssues(parseSandboxRecoveryPolicy, undefined, [['invalid_type', []]]));
});

const support = (edit = () => {}) => {
  const s = { backendId: 'docker', backendRevision: '1', network: ['isolated', 'outbound'], execution: ['until_stopped', 'deadline'], workspaceDiskQuota: false };
  edit(s);
  return s;
};

describe('parseSandboxSupport', () => {
  test('valid support is frozen', () => assertDeepFrozen(parseSandboxSupport(support())));
  const cases = [
    ['empty network list', support((s) => (s.network = [])), [['too_small', ['network']]]],
    ['duplicate network', support((s) => (s.network = ['isolated', 'isolated'])), [['duplicate', ['network', 1]]]],
    ['unknown execution', support((s) => (s.execution = ['idle'])), [['invalid_value', ['execution', 0]]]],
    ['quota as string', support((s) => (s.workspaceDiskQuota = 'no')), [['invalid_type', ['workspaceDiskQuota']]]],
    ['missing backendRevision', support((s) => delete s.backendRevision), [['required', ['backendRevision']]]],
    ['unknown capability', support((s) => (s.allowlist = true)), [['unknown_field', ['allowlist']]]],
  ];
  for (const [name, input, expected] of cases) test(name, () => assertIssues(parseSandboxSupport, input, expected));
});

const effective = (edit = () => {}) => {
  const e = {
    resources: { cpus: 0.5, memoryBytes: 1024, pids: 10 },
    temporaryStorage: { homeBytes: 1, tempBytes: 1 },
    network: { kind: 'isolated' },
    workspaceDiskQuota: { kind: 'not_requested' },
  };
  edit(e);
  return e;
};

describe('parseSandboxEffectivePolicy', () => {
  test('valid effective policy', () => assert.deepEqual(parseSandboxEffectivePolicy(effective()), effective()));
  test('enforced quota', () => {
    const input = effective((e) => (e.workspaceDiskQuota = { kind: 'enforced', bytes: 10 }));
    assert.deepEqual(parseSandboxEffectivePolicy(input).workspaceDiskQuota, { kind: 'enforced', bytes: 10 });
  });
  const cases = [
    ['required quota kind is a request, not an observation', effective((e) => (e.workspaceDiskQuota = { kind: 'required', bytes: 1 })), [['invalid_value', ['workspaceDiskQuota', 'kind']]]],
    ['missing workspaceDiskQuota', effective((e) => delete e.workspaceDiskQuota), [['required', ['workspaceDiskQuota']]]],
    ['pids zero', effective((e) => (e.resources.pids = 0)), [['too_small', ['resources', 'pids']]]],
    ['unknown field', effective((e) => (e.execution = { kind: 'until_stopped' })), [['unknown_field', ['execution']]]],
  ];
  for (const [name, input, expected] of cases) test(name, () => assertIssues(parseSandboxEffectivePolicy, input, expected));
});

describe('parseTransferOptions', () => {
  test('omitted options normalize to empty quotas', () => {
    assert.deepEqual(parseTransferOptions(undefined), { quotas: {} });
    assert.deepEqual(parseTransferOptions({}), { quotas: {} });
  });
  test('numbers and bigints both become bigint; the signal is kept', () => {
    const signal = new AbortController().signal;
    const parsed = parseTransferOptions({
      signal,
      deadlineAt: Date.now() + 1000,
      quotas: { maxFiles: 3, maxFileBytes: 0, maxTotalBytes: 20n * 1024n ** 3n, maxArchiveBytes: Number.MAX_SAFE_INTEGER, maxPaths: 2n ** 64n - 1n },
    });
    assert.equal(parsed.signal, signal);
    assert.deepEqual(parsed.quotas, {
      maxFiles: 3n,
      maxFileBytes: 0n,
      maxTotalBytes: 20n * 1024n ** 3n,
      maxArchiveBytes: BigInt(Number.MAX_SAFE_INTEGER),
      maxPaths: 2n ** 64n - 1n,
    });
    assert.ok(Object.isFrozen(parsed) && Object.isFrozen(parsed.quotas));
  });
  const cases = [
    ['negative number quota', { quotas: { maxFiles: -1 } }, [['too_small', ['quotas', 'maxFiles']]]],
    ['negative bigint quota', { quotas: { maxFiles: -1n } }, [['too_small', ['quotas', 'maxFiles']]]],
    ['fraction quota', { quotas: { maxTotalBytes: 1.5 } }, [['not_integer', ['quotas', 'maxTotalBytes']]]],
    ['unsafe number quota', { quotas: { maxArchiveBytes: 2 ** 53 } }, [['unsafe_integer', ['quotas', 'maxArchiveBytes']]]],
    ['bigint past u64', { quotas: { maxPaths: 2n ** 64n } }, [['too_large', ['quotas', 'maxPaths']]]],
    ['NaN quota', { quotas: { maxFileBytes: NaN } }, [['not_finite', ['quotas', 'maxFileBytes']]]],
    ['string quota', { quotas: { maxFiles: '3' } }, [['invalid_type', ['quotas', 'maxFiles']]]],
    ['unknown quota', { quotas: { maxDirectories: 1 } }, [['unknown_field', ['quotas', 'maxDirectories']]]],
    ['signal not an AbortSignal', { signal: { aborted: false } }, [['invalid_type', ['signal']]]],
    ['deadlineAt NaN', { deadlineAt: NaN }, [['not_finite', ['deadlineAt']]]],
    ['deadlineAt negative', { deadlineAt: -1 }, [['too_small', ['deadlineAt']]]],
    ['deadlineAt as Date', { deadlineAt: new Date() }, [['invalid_type', ['deadlineAt']]]],
    ['retired timeoutMs', { timeoutMs: 5 }, [['unknown_field', ['timeoutMs']]]],
  ];
  for (const [name, input, expected] of cases) test(name, () => assertIssues(parseTransferOptions, input, expected));
});

describe('the original policy assertions', () => {
  const support = { backendId: 'x', backendRevision: '1', network: ['isolated'], execution: ['until_stopped', 'deadline'], workspaceDiskQuota: false };
  const effectiveOf = (policy) => ({
    resources: policy.resources,
    temporaryStorage: policy.temporaryStorage,
    network: policy.network,
    workspaceDiskQuota: { kind: 'not_requested' },
  });

  test('assertSandboxRequestSupported refuses what the support cannot enforce', () => {
    assert.doesNotThrow(() => assertSandboxRequestSupported(request(), support));
    assert.throws(() => assertSandboxRequestSupported(request((p) => (p.network = { kind: 'outbound' })), support), SandboxUnsupportedError);
    assert.throws(() => assertSandboxRequestSupported({ policy: 1 }, support), SandboxValidationError);
  });

  test('assertSandboxEffectivePolicy refuses a looser observed policy and accepts the exact one', () => {
    const asked = request();
    assert.doesNotThrow(() => assertSandboxEffectivePolicy(asked, effectiveOf(asked.policy)));
    const looser = effectiveOf(asked.policy);
    looser.resources = { ...looser.resources, memoryBytes: looser.resources.memoryBytes * 2 };
    const error = (() => {
      try {
        assertSandboxEffectivePolicy(asked, looser);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(error instanceof SandboxUnsupportedError, String(error));
    assert.match(error.message, /memoryBytes/);
  });
});
