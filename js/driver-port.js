// The JavaScript side of a driver port: the one function the Rust owner calls for every driver
// operation. It never throws into native code: each call resolves `{ ok: true, value }` or
// `{ ok: false, ref, message }`, and `ref` keeps the thrown object for the caller to see.

/**
 * The driver errors a port remembers for their callers. A caller sees its error when the native
 * call it awaits settles, so only the most recent ones can still be asked for; older ones are
 * forgotten (their message still travels), which keeps a long-lived owner's memory flat.
 */
export const REMEMBERED_DRIVER_ERRORS = 64;

/**
 * Creates a port over `handlers` (`{ [op]: (arg) => value | Promise<value> }`). `remember(error)`
 * keeps a driver error that reaches native code another way (a process stream's) and returns
 * its `ref`.
 */
export function createDriverPort(handlers) {
  const errors = new Map();
  let nextRef = 1;
  function remember(error) {
    const ref = nextRef++;
    errors.set(ref, error);
    if (errors.size > REMEMBERED_DRIVER_ERRORS) errors.delete(errors.keys().next().value);
    return ref;
  }
  async function invoke(call) {
    try {
      const handler = handlers[call.op];
      if (typeof handler !== 'function') throw new TypeError(`native-sandbox: no driver handler for ${call.op}`);
      return { ok: true, value: await handler(call.arg) };
    } catch (error) {
      return { ok: false, ref: remember(error), message: messageOf(error) };
    }
  }
  return { invoke, errors, remember };
}

/** A thrown value's message, whatever was thrown. */
export function messageOf(error) {
  if (error instanceof Error) return error.message;
  try {
    return String(error);
  } catch {
    return 'a non-error value was thrown';
  }
}

/** Resolves a native `{ ok, value | error }` outcome, throwing the contract's error class. */
export function settle(outcome, context, errorFromDescriptor) {
  if (outcome.ok) return outcome.value;
  throw errorFromDescriptor(outcome.error, context);
}
