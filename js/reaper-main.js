// The reaper process (src/docker/reaper/): started by the first in_process Docker sandbox of a
// controller process, in a process group of its own, with its stdin and stdout piped to that
// controller and its stderr the controller's. When the controller's end closes (it exited, was
// killed, or ended by a signal it had no handler for), it removes, by ID and proof, every sandbox
// still registered, writes to stderr what it left (nothing when it left nothing), then exits.
// It never touches process.stdin or process.stdout: the native side owns both pipes.
import { native } from './native.js';

// Signals are for the controller (a terminal's, or a service manager's SIGTERM to the whole
// group or cgroup): the link alone says when this process ends, and it ends once its removals
// are done, or stopped by their bounds (src/docker/reaper/serve.rs: 30 s without an answer from
// the engine, 120 s in all).
for (const signal of ['SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGTERM']) process.on(signal, () => {});

const reaped = await native.runReaper();
// Whatever else holds the event loop (a preload's timer), the work is done.
process.exit(reaped.failed.length === 0 ? 0 : 1);
