// resolveLifecyclePolicy: the @agentproto/sandbox 0.2.1 rule mapping a spec's `lifecycle` block
// (and whether this boot reconnects) to what session close should do.

const IDLE_EVENT = /^idle-(\d+)$/;

/**
 * `idle-<seconds>` as milliseconds, however large (the 0.2.1 rule: `boot` refuses a window outside
 * its bounds); anything else (or nothing) is no idle window.
 */
export function idleWindowMs(event) {
  if (typeof event !== 'string' || event === '') return undefined;
  const match = IDLE_EVENT.exec(event);
  return match === null ? undefined : Number(match[1]) * 1000;
}

/** See agentproto.d.ts. */
export function resolveLifecyclePolicy(spec, reuse) {
  if (spec?.lifecycle?.destroy_on) return Object.freeze({ teardown: 'kill' });
  const pauseAfterIdleMs = idleWindowMs(spec?.lifecycle?.pause_after_idle);
  const teardown = reuse || pauseAfterIdleMs !== undefined ? 'pause' : 'kill';
  return Object.freeze(pauseAfterIdleMs === undefined ? { teardown } : { teardown, pauseAfterIdleMs });
}
