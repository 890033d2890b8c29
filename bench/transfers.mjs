// Transfer benchmark: one large file and many small files, imported and exported through
// importSandboxDirectory / exportSandboxDirectory, against dockerode putArchive/getArchive with
// tar-fs, and against the engine's own limit (a prebuilt tar uploaded raw; the raw download is
// written to disk unextracted). Each contender runs in its own process for its peak RSS.
// Sizes: NATIVE_SANDBOX_BENCH_LARGE_BYTES (2 GiB), NATIVE_SANDBOX_BENCH_SMALL_FILES (50,000 of 4 KiB).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const IMAGE = process.env.NATIVE_SANDBOX_GUEST_IMAGE ?? 'native-sandbox/busybox:1';
const LARGE = Number(process.env.NATIVE_SANDBOX_BENCH_LARGE_BYTES ?? 2 * 1024 ** 3);
const SMALL = Number(process.env.NATIVE_SANDBOX_BENCH_SMALL_FILES ?? 50_000);
const root = mkdtempSync(join(tmpdir(), 'native-sandbox-bench-src-'));
const one = fileURLToPath(new URL('./transfer-one.mjs', import.meta.url));

function largeTree() {
  const dir = join(root, 'large');
  mkdirSync(dir);
  const fd = openSync(join(dir, 'big.bin'), 'w');
  const block = randomBytes(1024 * 1024);
  for (let written = 0; written < LARGE; written += block.length) writeSync(fd, block, 0, Math.min(block.length, LARGE - written));
  closeSync(fd);
  return { dir, bytes: LARGE, files: 1 };
}

function smallTree() {
  const dir = join(root, 'small');
  const body = randomBytes(4096);
  for (let i = 0; i < SMALL; i++) {
    const sub = join(dir, `d${i % 100}`);
    if (i < 100) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}`), body);
  }
  return { dir, bytes: SMALL * 4096, files: SMALL };
}

function run(contender, dir, tar) {
  const out = execFileSync(process.execPath, [one, contender, dir, tar, IMAGE], { encoding: 'utf8', maxBuffer: 1 << 20 });
  return JSON.parse(out.trim().split('\n').at(-1));
}

for (const [name, make] of [['one large file', largeTree], ['many 4 KiB files', smallTree]]) {
  const tree = make();
  const tar = join(root, `${name.replace(/\W/g, '-')}.tar`);
  execFileSync('tar', ['-cf', tar, '-C', tree.dir, '.']);
  console.log(`${name}: ${tree.files} file(s), ${(tree.bytes / 1e6).toFixed(0)} MB`);
  for (const contender of ['native', 'dockerode', 'raw']) {
    const r = run(contender, tree.dir, tar);
    const rate = (seconds) => `${(tree.bytes / seconds / 1e6).toFixed(0)} MB/s, ${(tree.files / seconds).toFixed(0)} files/s`;
    console.log(`  ${contender.padEnd(9)} import ${r.importSeconds.toFixed(2)} s (${rate(r.importSeconds)})  export ${r.exportSeconds.toFixed(2)} s (${rate(r.exportSeconds)})  peak RSS ${r.peakRssMiB.toFixed(0)} MiB`);
  }
  rmSync(tree.dir, { recursive: true, force: true });
  rmSync(tar, { force: true });
}
rmSync(root, { recursive: true, force: true });
