// createSandboxPool (0.4): keeps `size` sandboxes of one request reserved and started, each with
// what runs its commands already up, so a claim hands one over at once. Works with any backend;
// on one of ours a member's supervisor is brought up before any claim (nothing of any process is
// fixed) and the claim reads the member back from its engine (native: src/lifecycle/owner/
// pool_member.rs). A member is used once: a claimed sandbox is the caller's and never returns.
import { invalid } from './adapter-options.js';
import { admitReservation } from './backend.js';
import { settle } from './driver-port.js';
import { errorFromDescriptor, SandboxStateError, SandboxUnsupportedError, SandboxValidationError } from './errors.js';
import { onAbort } from './options.js';
import { startedOwnerOf } from './owner.js';
import { parseSandboxRequest } from './parsers.js';

/** The most members a pool keeps. */
export const POOL_MAX_SIZE = 64;
/** The longest `idleMs`: the longest delay a Node.js timer keeps (about 24.8 days). */
export const POOL_MAX_IDLE_MS = 2 ** 31 - 1;
/** The most refills started at once: a burst of claims never starts more than this many. */
export const POOL_REFILL_CONCURRENCY = 4;
/** The wait after a refill failed, doubled on each failure in a row up to the last. */
const RETRY_MS = [100, 200, 400, 800, 1600, 3200];
const IN_PROCESS = Object.freeze({ kind: 'in_process' });

function readOptions(backend, options) {
  const issues = [];
  if (backend === null || typeof backend !== 'object' || typeof backend.reserve !== 'function') {
    issues.push({ code: 'invalid_type', path: ['backend'], message: 'backend must be a sandbox backend (an object with reserve)' });
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new SandboxValidationError([...issues, { code: 'invalid_type', path: ['options'], message: 'options must be an object' }]);
  for (const name of Object.keys(options)) {
    if (!['request', 'size', 'idleMs', 'signal'].includes(name)) issues.push({ code: 'unknown_field', path: ['options', name], message: `unknown option ${name}` });
  }
  const { size, idleMs, signal } = options;
  if (!Number.isSafeInteger(size) || size < 1 || size > POOL_MAX_SIZE) {
    issues.push({ code: 'invalid_value', path: ['options', 'size'], message: `size must be an integer from 1 to ${POOL_MAX_SIZE}` });
  }
  if (idleMs !== undefined && (!Number.isSafeInteger(idleMs) || idleMs < 1 || idleMs > POOL_MAX_IDLE_MS)) {
    issues.push({ code: 'invalid_value', path: ['options', 'idleMs'], message: `idleMs must be an integer from 1 to ${POOL_MAX_IDLE_MS} (milliseconds; a timer's longest)` });
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    issues.push({ code: 'invalid_type', path: ['options', 'signal'], message: 'signal must be an AbortSignal' });
  }
  let request;
  if (!('request' in options)) {
    issues.push({ code: 'invalid_type', path: ['options', 'request'], message: 'request is required: the one policy every member has' });
  } else {
    try {
      request = parseSandboxRequest(options.request);
    } catch (error) {
      if (!(error instanceof SandboxValidationError)) throw error;
      issues.push(...error.issues.map((issue) => ({ ...issue, path: ['options', 'request', ...issue.path] })));
    }
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  // A backend that cannot honour the request says so now (SandboxUnsupportedError), before
  // any engine object: the admission every reserve runs first, without reserving.
  if (backend.support !== null && typeof backend.support === 'object') admitReservation(request, IN_PROCESS, backend.support);
  return { request, size, idleMs, signal };
}

function readClaimOptions(options) {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw invalid(['options'], 'invalid_type', 'claim options must be an object');
  const unknown = Object.keys(options).filter((name) => name !== 'signal');
  if (unknown.length > 0) throw new SandboxValidationError(unknown.map((name) => ({ code: 'unknown_field', path: ['options', name], message: `unknown option ${name}` })));
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw invalid(['options', 'signal'], 'invalid_type', 'signal must be an AbortSignal');
  return options.signal;
}

/** Runs one call of a member's native pool face, ended by `signal`; a foreign sandbox has none. */
async function memberCall(sandbox, name, signal) {
  const face = startedOwnerOf(sandbox);
  if (face === undefined) {
    if (name === 'readBack' && sandbox.state?.kind !== 'ready') throw new SandboxStateError(`the pool's member is ${sandbox.state?.kind}, not ready`);
    return;
  }
  const call = face.owner.poolMember();
  const detach = onAbort(signal, () => call.abort());
  try {
    settle(await call[name](), face.context, errorFromDescriptor);
  } finally {
    detach();
  }
}

/** Stops and destroys `sandbox`, whatever either says (the reaper owns what is left). */
async function discard(sandbox) {
  await sandbox.stop().catch(() => {});
  await sandbox.destroy().catch(() => {});
}

/** Whether a read-back failed because the member no longer matches (not an engine fault). */
const mismatched = (error) => error instanceof SandboxUnsupportedError || error instanceof SandboxStateError;

/** See index.d.ts. */
export function createSandboxPool(backend, options) {
  const { request, size, idleMs, signal } = readOptions(backend, options);
  const closing = new AbortController();
  /** Ready members, oldest first: `{ sandbox, readyAt, timer }`. */
  const ready = [];
  /** Members out for a claim's read-back: they count toward `size` until the claim decides. */
  let reading = 0;
  /** Refills under way: each one's promise, settled once its sandbox is kept or discarded. */
  const refills = new Set();
  /** Destructions under way (members discarded), which `close()` waits for. */
  const discarding = new Set();
  /** Claims reading a member back, which `close()` waits for. */
  const claiming = new Set();
  let failures = 0;
  let retryTimer;
  let closed;

  function drop(sandbox) {
    const done = discard(sandbox);
    discarding.add(done);
    done.then(() => discarding.delete(done));
  }

  /** A cold claim: reserve and start now; a start that fails leaves nothing (its owner is destroyed). */
  async function cold(claimSignal) {
    const reservation = backend.reserve(request, IN_PROCESS);
    try {
      return await reservation.start({ signal: claimSignal });
    } catch (error) {
      await reservation.destroy().catch(() => {});
      throw error;
    }
  }

  async function makeMember() {
    const reservation = backend.reserve(request, IN_PROCESS);
    let sandbox;
    try {
      sandbox = await reservation.start({ signal: closing.signal });
      await memberCall(sandbox, 'prepare', closing.signal);
      return sandbox;
    } catch (error) {
      // A failed start leaves its owner to clean up; anything started is discarded here.
      if (sandbox !== undefined) await discard(sandbox);
      else await reservation.destroy().catch(() => {});
      throw error;
    }
  }

  /** Arms `member`'s idle timer for what is left of its `idleMs` since it became ready. */
  function arm(member) {
    if (idleMs === undefined) return;
    member.timer = setTimeout(() => {
      const at = ready.indexOf(member);
      if (at < 0) return;
      ready.splice(at, 1);
      drop(member.sandbox);
      refill();
    }, Math.max(0, member.readyAt + idleMs - Date.now()));
    member.timer.unref?.();
  }

  function keep(sandbox) {
    const member = { sandbox, readyAt: Date.now(), timer: undefined };
    arm(member);
    ready.push(member);
  }

  /** After a refill failed: one pause for the failures of one burst, doubling while they last. */
  function pause() {
    if (retryTimer !== undefined) return;
    const wait = RETRY_MS[Math.min(failures, RETRY_MS.length - 1)];
    failures += 1;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      refill();
    }, wait);
    retryTimer.unref?.();
  }

  function refill() {
    if (closed !== undefined || retryTimer !== undefined) return;
    while (ready.length + reading + refills.size < size && refills.size < POOL_REFILL_CONCURRENCY) {
      const made = makeMember().then(
        (sandbox) => {
          refills.delete(made);
          failures = 0;
          if (closed !== undefined) return discard(sandbox);
          keep(sandbox);
          refill();
        },
        () => {
          refills.delete(made);
          // An engine fault: claims go cold meanwhile; the pool tries again after a pause.
          if (closed === undefined) pause();
        },
      );
      refills.add(made);
    }
  }

  /**
   * Reads `member` back for a claim: its sandbox when it still matches; `undefined` when it no
   * longer does (it is destroyed) or the engine could not say (it goes back, unclaimed).
   */
  async function readBack(member, claimSignal) {
    reading += 1;
    const putBack = () => {
      // Read back only: the member is as it was, and goes back to the front.
      if (closed === undefined) {
        arm(member);
        ready.unshift(member);
      } else drop(member.sandbox);
    };
    try {
      await memberCall(member.sandbox, 'readBack', claimSignal);
    } catch (error) {
      reading -= 1;
      if (claimSignal?.aborted || !mismatched(error)) {
        putBack();
        // An abort rejects with the signal's reason, as one before the claim does.
        claimSignal?.throwIfAborted();
        return { fault: error };
      }
      // A member that no longer matches what it started with is never handed out.
      drop(member.sandbox);
      refill();
      return undefined;
    }
    reading -= 1;
    if (claimSignal?.aborted) {
      // Aborted before the claim settled, though after the read-back: still not handed out.
      putBack();
      claimSignal.throwIfAborted();
    }
    if (closed !== undefined) {
      // Closed while it was read back: the pool's members are destroyed, this one too.
      drop(member.sandbox);
      throw new SandboxStateError('the pool was closed during the claim');
    }
    refill();
    return { sandbox: member.sandbox };
  }

  async function claim(options) {
    const claimSignal = readClaimOptions(options);
    if (closed !== undefined) throw new SandboxStateError('the pool is closed: no claim is admitted');
    claimSignal?.throwIfAborted();
    while (ready.length > 0) {
      const member = ready.shift();
      clearTimeout(member.timer);
      const read = readBack(member, claimSignal);
      claiming.add(read);
      read.catch(() => {}).then(() => claiming.delete(read));
      const outcome = await read;
      if (outcome?.sandbox !== undefined) return outcome.sandbox;
      // The engine could not read it back: no member is handed out unread; this claim goes cold.
      if (outcome?.fault !== undefined) break;
    }
    if (closed !== undefined) throw new SandboxStateError('the pool is closed: no claim is admitted');
    refill();
    return cold(claimSignal);
  }

  let detachSignal = () => {};
  async function close() {
    if (closed !== undefined) return closed;
    closing.abort(new SandboxStateError('the pool was closed'));
    detachSignal();
    clearTimeout(retryTimer);
    retryTimer = undefined;
    const members = ready.splice(0, ready.length);
    for (const member of members) {
      clearTimeout(member.timer);
      drop(member.sandbox);
    }
    closed = (async () => {
      // Refills and claims under way settle first (each discards what it holds), then every
      // destruction they and the members started.
      await Promise.all([...refills, ...claiming].map((work) => work.catch(() => {})));
      await Promise.all([...discarding]);
    })();
    return closed;
  }

  if (signal?.aborted) close();
  else detachSignal = onAbort(signal, () => close());
  if (closed === undefined) refill();
  return Object.freeze({
    claim,
    close,
    get ready() {
      return ready.length;
    },
  });
}
