// A Readable's failure delivered after the bytes it already buffered: `destroy(error)` would
// drop them, so a failure that arrives while bytes wait is held until the consumer took them.
// Only for a stream that has not pushed its end (`push(null)`), whose `_read` calls
// `deliverPendingFailure` first. A consumer that asks `read(n)` for more than is buffered gets
// `null` until it reads what is there (flowing mode, `for await` and `pipe` always do).

const pending = new WeakMap();
/** Per group of streams that fail for shared causes: the codes already emitted unheard. */
const groups = new WeakMap();

/**
 * `streams` fail for shared causes (a process's stdout and stderr: one `output_limit`, one
 * stop). A stream with an 'error' listener always gets its own failure; of one cause (its
 * `code`), only the first failure nobody listens for is thrown as uncaught, so a host reading
 * with `'data'` listeners alone meets one uncaught error, not one per stream. A later unheard
 * copy still fails its stream (`errored`, `finished()` and later listeners see it), but the
 * 'error' event it emits is taken by a listener of its own.
 */
export function shareFailures(...streams) {
  const unheard = new Set();
  for (const stream of streams) groups.set(stream, unheard);
}

/** Destroys `stream` with `error`, or quietly when its group already emitted that cause unheard. */
function destroyWith(stream, error) {
  const unheard = groups.get(stream);
  const cause = error?.code;
  if (unheard !== undefined && cause !== undefined && stream.listenerCount('error') === 0) {
    if (unheard.has(cause)) stream.once('error', () => {});
    else unheard.add(cause);
  }
  stream.destroy(error);
}

/**
 * Fails `stream` with `error` once its buffer is empty: at once if it is, else at a later
 * `_read` (which calls `deliverPendingFailure`). The first failure is the one delivered.
 */
export function failAfterBuffered(stream, error) {
  holdFailure(stream, error);
  deliverPendingFailure(stream);
}

/** Holds `error` for `stream`'s next `_read`, without delivering it now. */
export function holdFailure(stream, error) {
  if (!pending.has(stream)) pending.set(stream, error);
}

/**
 * For `_read`: whether a failure is held for `stream`. If so it is delivered when the buffer is
 * empty; else an empty push ends this read, so `_read` is called again after the consumer took
 * bytes.
 */
export function deliverPendingFailure(stream) {
  if (!pending.has(stream)) return false;
  if (stream.destroyed) return true;
  if (stream.readableLength === 0) destroyWith(stream, pending.get(stream));
  else stream.push(Buffer.alloc(0));
  return true;
}
