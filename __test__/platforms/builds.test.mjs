// Every platform package's addon, as `npm run build:platforms` made it on this Linux machine:
// its format and CPU, the glibc floor of the gnu builds, musl's loader for the musl builds, the
// Mach-O bundle of the darwin builds, both engine architectures' helpers embedded in each, and
// the packages' manifests as the loader and npm read them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { GLIBC_FLOOR, PLATFORMS, addonFile, packageDirectory, root } from '../../scripts/platforms.mjs';
import { compareGlibc, CPU_TYPE_ARM64, CPU_TYPE_X86_64, elf, EM_AARCH64, EM_X86_64, macho, MH_BUNDLE, MH_DYLIB } from './binary-format.mjs';

const addonOf = (platform) => join(packageDirectory(platform), addonFile(platform));
const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** The machines of the ELF executables (static or static-pie) embedded in `bytes` (past its own header). */
function embeddedExecutables(bytes) {
  const machines = new Set();
  for (let at = bytes.indexOf('\x7fELF', 1, 'latin1'); at !== -1; at = bytes.indexOf('\x7fELF', at + 4, 'latin1')) {
    const elfClass = bytes[at + 4];
    const type = bytes.readUInt16LE(at + 16);
    if (elfClass === 2 && (type === 2 || type === 3)) machines.add(bytes.readUInt16LE(at + 18));
  }
  return machines;
}

test('every platform has its package: manifest fields, the root\'s version, an optional dependency of the root', () => {
  const { version } = rootManifest;
  assert.deepEqual(Object.keys(rootManifest.optionalDependencies).sort(), PLATFORMS.map((p) => `native-sandbox-${p.name}`).sort());
  for (const platform of PLATFORMS) {
    const manifest = JSON.parse(readFileSync(join(packageDirectory(platform), 'package.json'), 'utf8'));
    assert.equal(manifest.name, `native-sandbox-${platform.name}`);
    assert.equal(manifest.version, version, platform.name);
    assert.equal(rootManifest.optionalDependencies[manifest.name], version, platform.name);
    assert.deepEqual(manifest.os, [platform.os], platform.name);
    assert.deepEqual(manifest.cpu, [platform.cpu], platform.name);
    assert.deepEqual(manifest.libc, platform.libc ? [platform.libc] : undefined, platform.name);
    assert.equal(manifest.main, addonFile(platform), platform.name);
    assert.deepEqual(manifest.files, [addonFile(platform), 'LICENSE', 'README.md'], platform.name);
  }
  // The loader offers exactly these platforms.
  const loader = readFileSync(join(root, 'binding.cjs'), 'utf8');
  const supported = JSON.parse(/const SUPPORTED = (\[[^\]]*\]);/.exec(loader)[1].replaceAll("'", '"'));
  assert.deepEqual(supported, PLATFORMS.map((p) => p.name));
});

test(`the gnu builds need no glibc symbol newer than GLIBC_${GLIBC_FLOOR}`, () => {
  for (const platform of PLATFORMS.filter((p) => p.libc === 'glibc')) {
    const found = elf(addonOf(platform));
    assert.equal(found.machine, platform.cpu === 'x64' ? EM_X86_64 : EM_AARCH64, platform.name);
    assert.ok(found.glibc.length > 0, `${platform.name}: no glibc symbol versions at all`);
    const highest = found.glibc.at(-1);
    assert.ok(compareGlibc(highest, `GLIBC_${GLIBC_FLOOR}`) <= 0, `${platform.name} needs ${highest}, above GLIBC_${GLIBC_FLOOR}`);
    assert.ok(found.needed.includes('libc.so.6'), `${platform.name}: ${found.needed}`);
  }
});

test('the musl builds link musl, with no glibc symbol version', () => {
  for (const platform of PLATFORMS.filter((p) => p.libc === 'musl')) {
    const found = elf(addonOf(platform));
    assert.equal(found.machine, platform.cpu === 'x64' ? EM_X86_64 : EM_AARCH64, platform.name);
    assert.deepEqual(found.glibc, [], platform.name);
    assert.ok(found.needed.some((library) => /^libc(\.musl-[a-z0-9_]+)?\.so(\.1)?$/.test(library)), `${platform.name} needs ${found.needed}`);
    assert.equal(found.needed.includes('libc.so.6'), false, platform.name);
  }
});

test('the darwin builds are Mach-O bundles exporting napi_register_module_v1, needing only libSystem and Node-API', () => {
  for (const platform of PLATFORMS.filter((p) => p.os === 'darwin')) {
    const found = macho(addonOf(platform));
    assert.equal(found.cpu, platform.cpu === 'x64' ? CPU_TYPE_X86_64 : CPU_TYPE_ARM64, platform.name);
    assert.ok([MH_DYLIB, MH_BUNDLE].includes(found.filetype), `${platform.name}: file type ${found.filetype}`);
    assert.ok(found.defined.includes('_napi_register_module_v1'), platform.name);
    // libcharset and libiconv are system libraries Rust's standard library links on macOS.
    for (const library of found.libraries) assert.match(library, /^\/usr\/lib\/lib(System\.B|iconv\.2|charset\.1)\.dylib$/, platform.name);
    const foreign = found.undefined.filter(({ name, library }) => library !== '/usr/lib/libSystem.B.dylib' && !(library === 'dynamic lookup' && name.startsWith('_napi_')));
    assert.deepEqual(foreign, [], platform.name);
  }
});

test('every addon carries the guest helper for both linux/amd64 and linux/arm64 engines', () => {
  for (const platform of PLATFORMS) {
    const machines = embeddedExecutables(readFileSync(addonOf(platform)));
    assert.ok(machines.has(EM_X86_64) && machines.has(EM_AARCH64), `${platform.name}: ${[...machines]}`);
  }
});

test('every addon is a whole build (its size is reported)', () => {
  for (const platform of PLATFORMS) {
    const bytes = statSync(addonOf(platform)).size;
    assert.ok(bytes > 1_000_000, platform.name);
    console.log(`${platform.name}: ${(bytes / 1024 / 1024).toFixed(1)} MiB`);
  }
});
