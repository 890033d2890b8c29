// The idle pause: with a window of N ms, a sandbox that has had no MCP traffic (no request in
// flight, no message either way) for N ms is paused on the engine; the next request resumes it
// before it is served. Pause and resume run one after another, never overlapping, and a
// request that arrives while a pause is under way waits for it and then for the resume.

export class IdleGate {
  #idleMs;
  #freeze;
  #paused = false;
  #inFlight = 0;
  #timer;
  #closed = false;
  #transition = Promise.resolve();

  /**
   * `idleMs`: the window, or `undefined` for none. `freeze(paused)` pauses or resumes the
   * sandbox; `paused` says whether it is paused now.
   */
  constructor({ idleMs, freeze, paused = false }) {
    this.#idleMs = idleMs;
    this.#freeze = freeze;
    this.#paused = paused;
    this.touch();
  }

  get paused() {
    return this.#paused;
  }

  /**
   * Admits one request: resumes the sandbox first if it is paused (a failure rejects). A
   * `counted` request holds the idle clock until its `release()`; a long-lived event stream is
   * not counted, so it never keeps a sandbox awake on its own.
   */
  async enter(counted) {
    await this.#queue(async () => {
      if (!this.#paused) return;
      await this.#freeze(false);
      this.#paused = false;
    });
    if (counted) this.#inFlight += 1;
    this.#clear();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (counted) this.#inFlight -= 1;
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
      await this.#freeze(true);
      this.#paused = true;
    }).catch(() => {
      // A pause the engine refused leaves the sandbox running; the next traffic rearms.
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

  /** No more idle pauses; resolves once a pause or resume under way has settled. */
  async close() {
    this.#closed = true;
    this.#clear();
    await this.#transition;
  }
}
