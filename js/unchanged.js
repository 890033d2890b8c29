// A live owner's `state` and `recoveryRecord` as the original's owner hands them out: the same
// frozen object on every read while what it says is unchanged.
import { isDeepStrictEqual } from 'node:util';
import { deepFreeze } from './freeze.js';

/** A reader of `read()` that returns its previous, deep-frozen value while the new one is equal. */
export function unchangedWhileEqual(read) {
  let last;
  let seen = false;
  return () => {
    const next = read();
    if (seen && isDeepStrictEqual(last, next)) return last;
    last = deepFreeze(next);
    seen = true;
    return last;
  };
}
