// The metadata ledger for JavaScript drivers, over their spill-storage port. The native
// backends use the Rust ledger (src/transfer/ledger.rs); a JavaScript driver's spill store is a
// JavaScript object with positional reads and writes, so its runs are written here. Same rules:
// sorted batches of at most `metadataBatchBytes`, runs merged `mergeFanIn` at a time by level
// (tiered: every record is rewritten once per level, never once per spill), `/` sorted as NUL so a
// conflict is always between neighbours.
import { SandboxValidationError } from './errors.js';

const DIRECTORY = 0;
const FILE = 1;

function keyOf(path) {
  const key = Buffer.from(path, 'utf8');
  for (let i = 0; i < key.length; i++) if (key[i] === 0x2f) key[i] = 0;
  return key;
}

function pathOf(key) {
  return Buffer.from(key.map((b) => (b === 0 ? 0x2f : b))).toString('utf8');
}

function compare(a, b) {
  return Buffer.compare(a.key, b.key) || a.kind - b.kind;
}

class RunWriter {
  constructor(file) {
    this.file = file;
    this.position = 0;
    this.pending = [];
    this.pendingBytes = 0;
  }

  async add(key, kind) {
    const record = Buffer.allocUnsafe(5 + key.length);
    record.writeUInt32LE(key.length, 0);
    record[4] = kind;
    key.copy(record, 5);
    this.pending.push(record);
    this.pendingBytes += record.length;
    if (this.pendingBytes >= 64 * 1024) await this.flush();
  }

  async flush() {
    if (this.pendingBytes === 0) return;
    const block = Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    let offset = 0;
    while (offset < block.length) {
      const { bytesWritten } = await this.file.write(block, offset, block.length - offset, this.position + offset);
      if (bytesWritten <= 0) throw new Error('the spill store wrote no bytes');
      offset += bytesWritten;
    }
    this.position += block.length;
  }
}

class RunReader {
  constructor(run) {
    this.file = run.file;
    this.length = run.length;
    this.position = 0;
    this.buffer = Buffer.alloc(0);
  }

  async fill(n) {
    while (this.buffer.length < n && this.position < this.length) {
      const chunk = Buffer.allocUnsafe(Math.min(16 * 1024, this.length - this.position));
      const { bytesRead } = await this.file.read(chunk, 0, chunk.length, this.position);
      if (bytesRead <= 0) throw new Error('the spill store returned no bytes');
      this.position += bytesRead;
      this.buffer = Buffer.concat([this.buffer, chunk.subarray(0, bytesRead)]);
    }
    return this.buffer.length >= n;
  }

  async next() {
    if (!(await this.fill(5))) return null;
    const length = this.buffer.readUInt32LE(0);
    const kind = this.buffer[4];
    if (!(await this.fill(5 + length))) throw new Error('a spilled run is truncated');
    const key = Buffer.from(this.buffer.subarray(5, 5 + length));
    this.buffer = this.buffer.subarray(5 + length);
    return { key, kind };
  }
}

export class SpillLedger {
  constructor(store, buffers) {
    this.store = store;
    this.batchBytes = buffers.metadataBatchBytes;
    this.fanIn = buffers.mergeFanIn;
    this.batch = [];
    this.size = 0;
    /** Runs by merge level: `fanIn` runs of one level merge into one of the next. */
    this.levels = [];
    /** Records written to spill files so far (what the merges cost). */
    this.written = 0;
  }

  async add(path, kind) {
    const key = keyOf(path);
    this.batch.push({ key, kind: kind === 'file' ? FILE : DIRECTORY });
    this.size += key.length + 5;
    if (this.size >= this.batchBytes) await this.spill();
  }

  async spill() {
    const batch = this.batch.sort(compare);
    this.batch = [];
    this.size = 0;
    const writer = new RunWriter(await this.store.createFile());
    for (const { key, kind } of batch) await writer.add(key, kind);
    await writer.flush();
    this.written += batch.length;
    await this.pushRun(0, { file: writer.file, length: writer.position });
  }

  async pushRun(level, run) {
    (this.levels[level] ??= []).push(run);
    if (this.levels[level].length >= this.fanIn) {
      await this.pushRun(level + 1, await this.mergeRuns(this.levels[level].splice(0)));
    }
  }

  async mergeRuns(runs) {
    const writer = new RunWriter(await this.store.createFile());
    await merge(runs, (record) => {
      this.written += 1;
      return writer.add(record.key, record.kind);
    });
    await writer.flush();
    await Promise.all(runs.map((run) => run.file.close()));
    return { file: writer.file, length: writer.position };
  }

  /** Throws a `duplicate` validation error for a repeated path or a file with children. */
  async check() {
    let previous = null;
    const visit = async (record) => {
      if (previous) {
        if (Buffer.compare(previous.key, record.key) === 0) throw duplicate(`path ${pathOf(record.key)} appears more than once`);
        const p = previous.key;
        if (previous.kind === FILE && record.key.length > p.length && record.key[p.length] === 0 && record.key.subarray(0, p.length).equals(p)) {
          throw duplicate(`${pathOf(record.key)} lies under ${pathOf(p)}, which is a file`);
        }
      }
      previous = record;
    };
    if (this.levels.every((level) => level.length === 0)) {
      for (const record of this.batch.sort(compare)) await visit(record);
      return;
    }
    if (this.batch.length > 0) await this.spill();
    const runs = this.levels.flat();
    this.levels = [];
    while (runs.length > this.fanIn) runs.push(await this.mergeRuns(runs.splice(0, this.fanIn)));
    await merge(runs, visit);
  }
}

function duplicate(message) {
  return new SandboxValidationError([{ code: 'duplicate', path: [], message }]);
}

async function merge(runs, emit) {
  const readers = runs.map((run) => new RunReader(run));
  const heads = [];
  for (const [index, reader] of readers.entries()) {
    const record = await reader.next();
    if (record) heads.push({ ...record, index });
  }
  while (heads.length > 0) {
    let best = 0;
    for (let i = 1; i < heads.length; i++) if (compare(heads[i], heads[best]) < 0) best = i;
    const [head] = heads.splice(best, 1);
    await emit(head);
    const next = await readers[head.index].next();
    if (next) heads.push({ ...next, index: head.index });
  }
}
