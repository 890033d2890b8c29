// Reads what a built addon needs from its loader without running it: an ELF file's machine,
// needed libraries and glibc symbol versions (through binutils' readelf), and a Mach-O file's
// type, CPU, linked libraries, and defined and undefined symbols (parsed here).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const EM_X86_64 = 62;
export const EM_AARCH64 = 183;

/** An ELF file's machine (`e_machine`), the libraries it needs, and its GLIBC_ versions. */
export function elf(path) {
  const bytes = readFileSync(path);
  if (bytes.subarray(0, 4).toString('latin1') !== '\x7fELF') throw new Error(`${path} is not an ELF file`);
  const machine = bytes.readUInt16LE(18);
  const dynamic = execFileSync('readelf', ['-W', '--dynamic', path], { encoding: 'utf8' });
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const versions = execFileSync('readelf', ['-W', '--version-info', path], { encoding: 'utf8' });
  const glibc = [...new Set([...versions.matchAll(/Name: (GLIBC_[0-9.]+)/g)].map((m) => m[1]))].sort(compareGlibc);
  const headers = execFileSync('readelf', ['-W', '--program-headers', path], { encoding: 'utf8' });
  const interpreter = /Requesting program interpreter: ([^\]]+)\]/.exec(headers)?.[1];
  return { machine, needed, glibc, interpreter };
}

/** Orders `GLIBC_2.17` before `GLIBC_2.28` before `GLIBC_2.34`. */
export function compareGlibc(a, b) {
  const parts = (v) => v.replace('GLIBC_', '').split('.').map(Number);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export const MH_DYLIB = 6;
export const MH_BUNDLE = 8;
export const CPU_TYPE_X86_64 = 0x01000007;
export const CPU_TYPE_ARM64 = 0x0100000c;
const LC_SYMTAB = 0x2;
const LC_LOAD_DYLIB = 0xc;
const LC_LOAD_WEAK_DYLIB = 0x80000018;
const LC_REEXPORT_DYLIB = 0x8000001f;
const N_TYPE = 0x0e;
const N_EXT = 0x01;
const N_UNDF = 0x0;
const N_SECT = 0xe;
const DYNAMIC_LOOKUP_ORDINAL = 0xfe;

/**
 * A 64-bit Mach-O file: its type and CPU, the libraries it links, the external symbols it
 * defines, and each undefined symbol with the library it is bound to (`dynamic lookup` for a
 * symbol the loading process provides, as Node.js provides `napi_*`).
 */
export function macho(path) {
  const bytes = readFileSync(path);
  if (bytes.readUInt32LE(0) !== 0xfeedfacf) throw new Error(`${path} is not a 64-bit little-endian Mach-O file`);
  const cpu = bytes.readUInt32LE(4);
  const filetype = bytes.readUInt32LE(12);
  const commands = bytes.readUInt32LE(16);
  const libraries = [];
  let symtab;
  let at = 32;
  for (let i = 0; i < commands; i += 1) {
    const command = bytes.readUInt32LE(at);
    const size = bytes.readUInt32LE(at + 4);
    if (command === LC_LOAD_DYLIB || command === LC_LOAD_WEAK_DYLIB || command === LC_REEXPORT_DYLIB) {
      const nameOffset = bytes.readUInt32LE(at + 8);
      const raw = bytes.subarray(at + nameOffset, at + size);
      libraries.push(raw.subarray(0, raw.indexOf(0)).toString('utf8'));
    } else if (command === LC_SYMTAB) {
      symtab = { symoff: bytes.readUInt32LE(at + 8), nsyms: bytes.readUInt32LE(at + 12), stroff: bytes.readUInt32LE(at + 16) };
    }
    at += size;
  }
  const defined = [];
  const undefinedSymbols = [];
  if (symtab) {
    for (let i = 0; i < symtab.nsyms; i += 1) {
      const entry = symtab.symoff + i * 16;
      const strx = bytes.readUInt32LE(entry);
      const type = bytes[entry + 4];
      const desc = bytes.readUInt16LE(entry + 6);
      if ((type & N_EXT) === 0) continue;
      const start = symtab.stroff + strx;
      const name = bytes.subarray(start, bytes.indexOf(0, start)).toString('utf8');
      if ((type & N_TYPE) === N_SECT) defined.push(name);
      else if ((type & N_TYPE) === N_UNDF) {
        const ordinal = (desc >> 8) & 0xff;
        const library = ordinal === DYNAMIC_LOOKUP_ORDINAL ? 'dynamic lookup' : (libraries[ordinal - 1] ?? `ordinal ${ordinal}`);
        undefinedSymbols.push({ name, library });
      }
    }
  }
  return { cpu, filetype, libraries, defined, undefined: undefinedSymbols };
}
