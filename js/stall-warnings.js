// Stalls said aloud. Two things the contract does on purpose bite silently in production: an
// output stream nobody reads holds the guest back once its staging is full, and a guest that
// reads stdin to EOF waits for as long as the host leaves stdin open. The native streams note
// when either has lasted 10 s (src/process/stall.rs); this watcher asks them once a second while
// the process runs and says so once per stream: a `process.emitWarning` with a code of its own,
// and a `NODE_DEBUG=native-sandbox` line. It never changes what the streams do.
import { traceStall } from './debug.js';

/** stdins held open by design (an agent conversation): their quiet guests are no stall. */
const openByDesign = new WeakSet();

/** Marks `stdin` as held open by design: no warning says its guest waits on it. */
export function keepsStdinOpen(stdin) {
  openByDesign.add(stdin);
}

/** How often the native streams are asked (the timer never keeps Node alive). */
const POLL_MS = 1_000;

const REMEDY = {
  stdout: 'read both streams at once (Promise.all), or stdout.resume() to drop it',
  stderr: 'read both streams at once (Promise.all), or stderr.resume() to drop it',
};

/** The warning for a stalled stream: `[code, message]`. */
export function stallWarning(sandboxId, stream) {
  if (stream === 'stdin') {
    return [
      'NATIVE_SANDBOX_STDIN_OPEN',
      `native-sandbox: sandbox ${sandboxId}: the process has been quiet for 10 s while its stdin is open; a program that reads until EOF waits until you call stdin.end() (see native-sandbox's docs/process-streams.md#stdin-is-open-until-you-end-it)`,
    ];
  }
  return [
    'NATIVE_SANDBOX_OUTPUT_STALLED',
    `native-sandbox: sandbox ${sandboxId}: the process's ${stream} has been full and unread for 10 s, so the process waits to write more: ${REMEDY[stream]} (see native-sandbox's docs/process-streams.md#read-both-streams)`,
  ];
}

/**
 * Watches the process behind `owner` until `exit` settles or its streams are gone (a detached
 * attachment). `openStdin`: stdin stays open by design (a daemon or an agent conversation), so a
 * quiet guest is no stall.
 */
export function watchStalls({ owner, sandboxId, stdin, exit, openStdin = false }) {
  if (typeof owner.processStalls !== 'function') return;
  const timer = setInterval(() => {
    let stalled;
    try {
      stalled = owner.processStalls();
    } catch {
      stalled = null;
    }
    if (stalled == null) return void stop();
    for (const stream of stalled) {
      if (stream === 'stdin' && (openStdin || openByDesign.has(stdin))) continue;
      const [code, message] = stallWarning(sandboxId, stream);
      traceStall(sandboxId, stream);
      process.emitWarning(message, { code });
    }
  }, POLL_MS);
  timer.unref();
  const stop = () => clearInterval(timer);
  exit.then(stop, stop);
}
