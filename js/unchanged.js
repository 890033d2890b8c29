// A live owner's `state` and `recoveryRecord` as the original's owner hands them out: the same
// frozen object on every read while what it says is unchanged.
import { deepFreeze } from './freeze.js';

/** A reader of `read()` that returns its previous, deep-frozen value while the new one is equal. */
export function unchangedWhileEqual(read) {
  let last;
  let seen = false;
  return () => {
    const next = read();
    if (seen && sameValue(last, next)) return last;
    last = deepFreeze(next);
    seen = true;
    return last;
  };
}

/** Structural equality of plain values: primitives, arrays and objects of own enumerable keys. */
function sameValue(a, b) {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && sameValue(a[key], b[key]));
}
