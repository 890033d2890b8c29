// Exact-file exports (`{ kind: 'files', paths }`): files per second for N files of 4 KiB.
// Usage: node bench/exact-files.mjs [files]   (prints one JSON line)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileFromBytes, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';

const FILES = Number(process.argv[2] ?? 500);
const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-exact-'));
const backend = createDockerSandboxBackend({ image: process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1', namespace: `bench-exact-${process.pid}`, spillDirectory: spill });
const request = {
  policy: {
    resources: { cpus: 1, memoryBytes: 256 * 1024 ** 2, pids: 64 },
    temporaryStorage: { homeBytes: 8 * 1024 ** 2, tempBytes: 8 * 1024 ** 2 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};
const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
try {
  const body = Buffer.alloc(4096, 7);
  const paths = Array.from({ length: FILES }, (_, i) => `d${i % 20}/f${i}.bin`);
  await sandbox.importTree(paths.map((path) => fileFromBytes(path, body)));
  await sandbox.stop();
  const t0 = performance.now();
  let files = 0;
  await sandbox.exportTree({ kind: 'files', paths }, async (entry) => {
    for await (const chunk of entry.bytes) void chunk;
    files += 1;
  });
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ files, seconds: Math.round(seconds * 100) / 100, filesPerSecond: Math.round(files / seconds) }));
} finally {
  await sandbox.destroy();
  rmSync(spill, { recursive: true, force: true });
}
