// network: { kind: 'allowlist', hosts }: parsed strictly in Rust (names lower-cased to ASCII,
// wildcards, ports, the private-address opt-in), every bad entry named; a backend that cannot
// enforce it refuses it at reserve, before any engine object exists.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertSandboxRequestSupported, parseSandboxRequest, SandboxUnsupportedError } from 'native-sandbox';
import { assertDeepFrozen, assertIssues, request } from './helpers.mjs';
import { dockerBackend, leftovers, NOTHING, uniqueNamespace } from './docker-helpers.mjs';

const allowlist = (hosts) => request((p) => (p.network = { kind: 'allowlist', hosts }));

test('an allowlist parses to lower-case ASCII names, ports and opt-ins, deeply frozen', () => {
  const parsed = parseSandboxRequest(allowlist(['API.Example.com', '*.example.org:8443', 'bücher.example', { host: 'db.internal:5432', allowPrivate: true }]));
  // The parsed form holds strings only (the contract's string[]); the opt-ins are named apart.
  assert.deepEqual(parsed.policy.network, {
    kind: 'allowlist',
    hosts: ['api.example.com', '*.example.org:8443', 'xn--bcher-kva.example', 'db.internal:5432'],
    allowPrivate: ['db.internal:5432'],
  });
  assertDeepFrozen(parsed);
  // The parsed form parses to itself; `allowPrivate` may name an entry in another spelling.
  assert.deepEqual(parseSandboxRequest(parsed).policy.network, parsed.policy.network);
  const listed = parseSandboxRequest(request((p) => (p.network = { kind: 'allowlist', hosts: ['a.example', 'DB.internal:5432'], allowPrivate: ['db.INTERNAL:5432'] })));
  assert.deepEqual(listed.policy.network, { kind: 'allowlist', hosts: ['a.example', 'db.internal:5432'], allowPrivate: ['db.internal:5432'] });
  // Without an opt-in there is no allowPrivate field.
  assert.deepEqual(parseSandboxRequest(allowlist(['a.example'])).policy.network, { kind: 'allowlist', hosts: ['a.example'] });
});

test('full-width letters, digits and dots are read as the ASCII ones clients send; other compatibility forms and paths are refused, saying why', () => {
  const parsed = parseSandboxRequest(allowlist(['ｗｗｗ。Ｅｘａｍｐｌｅ－１．ｃｏｍ:8080']));
  assert.deepEqual(parsed.policy.network, { kind: 'allowlist', hosts: ['www.example-1.com:8080'] });
  const message = (entry) => {
    try {
      parseSandboxRequest(allowlist([entry]));
    } catch (error) {
      assert.equal(error.issues.length, 1, entry);
      return error.issues[0].message;
    }
    assert.fail(`${entry} parsed`);
  };
  assert.match(message('a＊b.example'), /not a DNS label/);
  assert.match(message('ｶﾀ.example'), /not a DNS label/);
  assert.match(message('example.com/index.html'), /has a path/);
  assert.match(message('10.0.0.0/8'), /is an address range/);
});

test('every bad entry is refused with an issue naming it', () => {
  assertIssues(parseSandboxRequest, allowlist(['ok.example', '10.1.2.3', '10.0.0.0/8', '*', '*.com', 'a..b', 'ok.example', 'x.example:99999', { host: 'y.example', extra: 1 }]), [
    ['invalid_value', ['policy', 'network', 'hosts', 1]],
    ['invalid_value', ['policy', 'network', 'hosts', 2]],
    ['invalid_value', ['policy', 'network', 'hosts', 3]],
    ['invalid_value', ['policy', 'network', 'hosts', 4]],
    ['invalid_value', ['policy', 'network', 'hosts', 5]],
    ['invalid_value', ['policy', 'network', 'hosts', 6]],
    ['invalid_value', ['policy', 'network', 'hosts', 7]],
    ['unknown_field', ['policy', 'network', 'hosts', 8, 'extra']],
  ]);
  assertIssues(parseSandboxRequest, allowlist([]), [['invalid_value', ['policy', 'network', 'hosts']]]);
  assertIssues(parseSandboxRequest, request((p) => (p.network = { kind: 'allowlist', hosts: ['a.example', 'b.example:8080'], allowPrivate: ['a.example', 'b.example', 'a.example', '10.0.0.1', 7] })), [
    ['invalid_value', ['policy', 'network', 'allowPrivate', 1]],
    ['invalid_value', ['policy', 'network', 'allowPrivate', 2]],
    ['invalid_value', ['policy', 'network', 'allowPrivate', 3]],
    ['invalid_type', ['policy', 'network', 'allowPrivate', 4]],
  ]);
  assertIssues(parseSandboxRequest, request((p) => (p.network = { kind: 'outbound', allowPrivate: ['a.example'] })), [['unknown_field', ['policy', 'network', 'allowPrivate']]]);
  // Both lists' problems at once, not a second round after hosts is mended.
  assertIssues(parseSandboxRequest, request((p) => (p.network = { kind: 'allowlist', hosts: ['1.2.3.4'], allowPrivate: [7, 'x/y'] })), [
    ['invalid_value', ['policy', 'network', 'hosts', 0]],
    ['invalid_type', ['policy', 'network', 'allowPrivate', 0]],
    ['invalid_value', ['policy', 'network', 'allowPrivate', 1]],
  ]);
  assertIssues(parseSandboxRequest, request((p) => (p.network = { kind: 'allowlist' })), [['required', ['policy', 'network', 'hosts']]]);
  assertIssues(parseSandboxRequest, request((p) => (p.network = { kind: 'isolated', hosts: ['a.example'] })), [['unknown_field', ['policy', 'network', 'hosts']]]);
  const many = Array.from({ length: 257 }, (_, i) => `h${i}.example`);
  assertIssues(parseSandboxRequest, allowlist(many), [['too_long', ['policy', 'network', 'hosts']]]);
});

test('a backend whose support lacks allowlist refuses one at reserve, before any engine object exists', () => {
  const namespace = uniqueNamespace('egress');
  const backend = dockerBackend(namespace, { runtime: 'runsc' });
  assert.deepEqual([...backend.support.network], ['isolated']);
  assert.throws(() => assertSandboxRequestSupported(allowlist(['api.example.com']), backend.support), SandboxUnsupportedError);
  assert.throws(
    () => backend.reserve(allowlist(['api.example.com']), { kind: 'in_process' }),
    (error) => error instanceof SandboxUnsupportedError && /allowlist/.test(error.message),
  );
  assert.deepEqual(leftovers(namespace), NOTHING);
  assert.deepEqual([...dockerBackend(namespace).support.network], ['isolated', 'outbound', 'allowlist']);
});
