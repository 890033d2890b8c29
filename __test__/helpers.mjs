// Shared test helpers: a valid request to mutate, and exact issue assertions.
import assert from 'node:assert/strict';
import { SandboxValidationError } from '../index.js';

export function validPolicy() {
  return {
    resources: { cpus: 1, memoryBytes: 256 * 1024 * 1024, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 * 1024, tempBytes: 64 * 1024 * 1024 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 30_000, cleanupMs: 30_000 },
    transfers: { chunkBytes: 65536, metadataBatchBytes: 65536, mergeFanIn: 8 },
    streams: { maxBufferedInputBytes: 1048576, maxBufferedOutputBytes: 1048576, highWaterMark: 65536 },
  };
}

/** A valid request with `edit(policy)` applied to a fresh copy. */
export function request(edit = () => {}) {
  const policy = validPolicy();
  edit(policy);
  return { policy };
}

/** Asserts that `parse(input)` throws a SandboxValidationError with exactly these [code, path] issues. */
export function assertIssues(parse, input, expected) {
  let thrown;
  try {
    parse(input);
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown instanceof SandboxValidationError, `expected SandboxValidationError, got ${thrown}`);
  const actual = thrown.issues.map((issue) => [issue.code, [...issue.path]]);
  assert.deepEqual(actual, expected);
  for (const issue of thrown.issues) {
    assert.equal(typeof issue.message, 'string');
    assert.ok(issue.message.length > 0);
  }
  return thrown;
}

/** Asserts `value` and everything reachable from it is frozen. */
export function assertDeepFrozen(value, where = 'value') {
  if (value === null || typeof value !== 'object') return;
  assert.ok(Object.isFrozen(value), `${where} is not frozen`);
  for (const [key, child] of Object.entries(value)) assertDeepFrozen(child, `${where}.${key}`);
}

/** An error's message followed by its issues (`path: message`), for matching what it names. */
export function described(error) {
  const issues = Array.isArray(error?.issues) ? error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`) : [];
  return [String(error?.message), ...issues].join('; ');
}
