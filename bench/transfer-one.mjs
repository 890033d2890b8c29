// One transfer contender in its own process, so its peak RSS is its own. Prints one JSON line.
// argv: contender (native|dockerode|raw) direction (import|export) sourceOrDestination image
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import Docker from 'dockerode';
import tarFs from 'tar-fs';
import { SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_DEFAULT_TRANSFER_BUFFERS } from 'native-sandbox';
import { createDockerSandboxBackend } from 'native-sandbox/docker';
import { exportSandboxDirectory, importSandboxDirectory } from 'native-sandbox/node';

const [contender, source, tarFile, image] = process.argv.slice(2);
const request = {
  policy: {
    resources: { cpus: 2, memoryBytes: 512 * 1024 ** 2, pids: 128 },
    temporaryStorage: { homeBytes: 64 * 1024 ** 2, tempBytes: 64 * 1024 ** 2 },
    network: { kind: 'isolated' },
    deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
    transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
    streams: SANDBOX_DEFAULT_STREAM_LIMITS,
  },
};
const out = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-out-'));
let importSeconds;
let exportSeconds;

if (contender === 'native') {
  const spill = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-spill-'));
  const backend = createDockerSandboxBackend({ image, namespace: `bench-${process.pid}`, spillDirectory: spill });
  const sandbox = await backend.reserve(request, { kind: 'in_process' }).start();
  let t = performance.now();
  await importSandboxDirectory(sandbox, source);
  importSeconds = (performance.now() - t) / 1000;
  await sandbox.stop();
  t = performance.now();
  await exportSandboxDirectory(sandbox, { kind: 'workspace' }, join(out, 'dest'));
  exportSeconds = (performance.now() - t) / 1000;
  await sandbox.destroy();
  rmSync(spill, { recursive: true, force: true });
} else {
  const docker = new Docker();
  const volume = `bench-${process.pid}`;
  const container = await docker.createContainer({
    Image: image, Entrypoint: ['/never-started'], User: '65532:65532',
    HostConfig: { ReadonlyRootfs: true, Mounts: [{ Type: 'volume', Source: volume, Target: '/sandbox/workspace' }] },
  });
  let t = performance.now();
  if (contender === 'dockerode') {
    await container.putArchive(tarFs.pack(source), { path: '/sandbox/workspace' });
  } else {
    // The engine's own limit: a prebuilt tar streamed raw to the archive endpoint.
    await new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath: '/var/run/docker.sock', method: 'PUT', path: `/containers/${container.id}/archive?path=/sandbox/workspace`, headers: { 'Content-Type': 'application/x-tar' } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`raw upload ${res.statusCode}`))));
      });
      req.on('error', reject);
      createReadStream(tarFile).pipe(req);
    });
  }
  importSeconds = (performance.now() - t) / 1000;
  t = performance.now();
  const archive = await container.getArchive({ path: '/sandbox/workspace' });
  if (contender === 'dockerode') {
    await pipeline(archive, tarFs.extract(join(out, 'dest')));
  } else {
    await pipeline(archive, createWriteStream(join(out, 'raw.tar')));
  }
  exportSeconds = (performance.now() - t) / 1000;
  await container.remove({ force: true });
  await docker.getVolume(volume).remove();
}
rmSync(out, { recursive: true, force: true });
console.log(JSON.stringify({ contender, importSeconds, exportSeconds, peakRssMiB: process.resourceUsage().maxRSS / 1024 }));
