// The idle pause: with a window of N ms, a sandbox that has had no MCP traffic (no request in
// flight, no message either way) for N ms is paused on the engine; the next request resumes it
// before it is served. Pause and resume run one after another, never overlapping, and a
// request that arrives while a pause is under way waits for it and then for the resume.

/** setTimeout's largest delay; a longer window is refused when the spec is read. */
export const IDLE_WINDOW_MS_MAX = 2 ** 31 - 1;

export class IdleGate {
  #idleMs;
  #freeze;
  #paused = false;
  /** A pause or resume failed: the engine's state is unknown, so the next request resumes. */
  #uncertain = false;
  #inFlight = 0;
  #timer;
  #closed = false;
  #transition = Promise.resolve();

  /**
   * `idleMs`: the window, or `undefined` for none. `freeze(paused)` pauses or resumes the
   * sandbox (idempotent).
   */
  constructor({ idleMs, freeze }) {
    this.#idleMs = idleMs;
    this.#freeze = freeze;
    this.touch();
  }

  /**
   * Admits one request. A `counted` request (one that carries work for the daemon) resumes the
   * sandbox first if it is paused (a failure rejects) and holds the idle clock until its
   * `release()`. Any other (an event stream, a session's end) needs nothing of the daemon: it
   * neither wakes the sandbox nor keeps it awake. Rejects once the gate is closed.
   */
  async enter(counted) {
    if (this.#closed) throw new Error('the endpoint is closing');
    if (!counted) return () => {};
    await this.#queue(async () => {
      if (this.#closed) throw new Error('the endpoint is closing');
      if (!this.#paused && !this.#uncertain) return;
      this.#uncertain = true;
      try {
        await this.#freeze(false);
      } catch (error) {
        // The engine may have resumed anyway: count it running but uncertain (the next request
        // resumes again) and let the idle clock run, so a resumed sandbox is paused again.
        this.#paused = false;
        this.touch();
        throw error;
      }
      this.#paused = false;
      this.#uncertain = false;
    });
    this.#inFlight += 1;
    this.#clear();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight -= 1;
      this.touch();
    };
  }

  /** Traffic: the idle window starts again. */
  touch() {
    this.#clear();
    if (this.#idleMs === undefined || this.#closed || this.#paused || this.#inFlight > 0) return;
    this.#timer = setTimeout(() => this.#idle(), this.#idleMs);
    this.#timer.unref();
  }

  #idle() {
    this.#queue(async () => {
      if (this.#closed || this.#paused || this.#inFlight > 0) return;
      this.#uncertain = true;
      await this.#freeze(true);
      this.#paused = true;
      this.#uncertain = false;
    }).catch(() => {
      // A pause the engine refused or did not confirm: the next request resumes to be sure, and
      // without one the idle clock tries again.
      this.touch();
    });
  }

  #queue(step) {
    const next = this.#transition.then(step);
    this.#transition = next.catch(() => {});
    return next;
  }

  #clear() {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** No more pauses or resumes; resolves once one under way has settled. */
  async close() {
    this.#closed = true;
    this.#clear();
    await this.#transition;
  }
}
