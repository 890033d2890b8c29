// Runs last: the whole test run left no container, volume or network on the engine.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NOTHING, runLeftovers } from './docker-helpers.mjs';

test('no engine object of this test run is left behind', () => {
  assert.deepEqual(runLeftovers(), NOTHING);
});
