// The reaper process (src/docker/reaper/): started by the first in_process Docker sandbox of a
// controller process, in a process group of its own, with its stdin and stdout piped to that
// controller. When the controller's end closes (it exited, was killed, or ended by a signal it
// had no handler for), it removes, by ID and proof, every sandbox still registered, then exits.
// It never touches process.stdin or process.stdout: the native side owns both pipes.
import { native } from './native.js';

// A terminal's signals are for the controller; the link alone says when this process ends.
for (const signal of ['SIGINT', 'SIGHUP', 'SIGQUIT']) process.on(signal, () => {});

const reaped = await native.runReaper();
process.exitCode = reaped.failed.length === 0 ? 0 : 1;
