// Peak RSS of an import and an export of `bytes` through the JavaScript transfer paths, each
// above the RSS at its own start: the caller's entries and bodies in (`sandbox.importTree`), a
// counting `consume` out (`sandbox.exportTree`), on the Docker backend or on a JavaScript driver (the local-process
// fixture through createSandboxBackend). Each run is its own process; it prints one JSON line
// and asserts nothing. `__test__/transfer-memory.test.mjs` holds the bound; `npm run
// bench:transfer-memory` gives the figures (docs/performance.md).
//   node --expose-gc bench/js-transfer-rss.mjs <docker|driver> <bytes>
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { localProcessBackend } from '../__test__/fixtures/local-process-backend.mjs';

const [kind, total] = [process.argv[2], Number(process.argv[3] ?? 512 * 1024 ** 2)];
const FILES = 8;
const CHUNK = 64 * 1024;
const MiB = 1024 ** 2;

function backendOf(which) {
  if (which === 'driver') {
    const local = localProcessBackend();
    return { backend: local.backend, close: local.close };
  }
  if (which !== 'docker') throw new Error(`usage: js-transfer-rss.mjs <docker|driver> <bytes>; not ${which}`);
  const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-rss-spill-'));
  const namespace = `${process.env.NATIVE_SANDBOX_TEST_RUN ?? 'bench'}-rss-${process.pid}`;
  const backend = createDockerSandboxBackend({ image: process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1', namespace, spillDirectory: spill });
  return { backend, close: () => rmSync(spill, { recursive: true, force: true }) };
}

// The local-process driver isolates nothing, and says so: it offers only the outbound network.
const request = {
  policy: {
    resources: { cpus: 1, memoryBytes: 256 * MiB, pids: 64 },
    temporaryStorage: { homeBytes: 8 * MiB, tempBytes: 8 * MiB },
    network: { kind: kind === 'driver' ? 'outbound' : 'isolated' },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};

/** `FILES` files of `total / FILES` bytes, each body a fresh chunk at a time (garbage once sent). */
function* entries() {
  const size = Math.floor(total / FILES);
  for (let file = 0; file < FILES; file += 1) {
    yield {
      kind: 'file',
      path: `data/part-${file}.bin`,
      byteLength: size,
      executable: false,
      async *open() {
        for (let left = size; left > 0; left -= CHUNK) yield Buffer.alloc(Math.min(CHUNK, left), file + 1);
      },
    };
  }
}

/** Runs `work`, sampling RSS every 5 ms: the peak above `start`, in MiB, and the seconds it took. */
async function peakAbove(start, work) {
  let peak = start;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage.rss());
  };
  const timer = setInterval(sample, 5);
  const t0 = performance.now();
  try {
    const value = await work();
    sample();
    return { value, peakMiB: (peak - start) / MiB, seconds: (performance.now() - t0) / 1000 };
  } finally {
    clearInterval(timer);
  }
}

const { backend, close } = backendOf(kind);
const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
try {
  // Each transfer's peak is above the RSS at its own start, after a collection: what the
  // transfer itself adds, not what an earlier one left in the allocator's free lists.
  const settledRss = () => {
    globalThis.gc?.();
    return process.memoryUsage.rss();
  };
  const start = settledRss();
  const imported = await peakAbove(start, () => sandbox.importTree(entries()));
  await sandbox.stop();
  let received = 0;
  const exported = await peakAbove(settledRss(), () =>
    sandbox.exportTree({ kind: 'workspace' }, async (entry) => {
      if (entry.kind === 'file') for await (const chunk of entry.bytes) received += chunk.byteLength;
    }),
  );
  const settledMiB = (settledRss() - start) / MiB;
  if (BigInt(imported.value.fileBytes) !== BigInt(received)) throw new Error(`exported ${received} bytes of ${imported.value.fileBytes} imported`);
  console.log(JSON.stringify({ backend: kind, bytes: received, importPeakMiB: imported.peakMiB, exportPeakMiB: exported.peakMiB, settledMiB, importSeconds: imported.seconds, exportSeconds: exported.seconds }));
} finally {
  await sandbox.destroy();
  close();
}
