// native-sandbox/ai-sdk: a started sandbox as the AI SDK 7's `experimental_sandbox` session
// (`Experimental_SandboxSession` of `ai`). Every member maps onto the sandbox's own sessions
// (`exec`, `run`, `files`), which keep their bounds, policy and ownership: the adapter only
// resolves paths against one fixed base directory, turns Node streams into web streams, and says
// results as the framework's documentation defines them. The session has no lifecycle of its own:
// the sandbox stays its owner's to stop and destroy.
import { posix } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { SandboxStateError, SandboxValidationError } from './errors.js';
import { native } from './native.js';

const OPTION_NAMES = ['description', 'workingDirectory', 'shell', 'env', 'maxOutputBytes', 'killGraceMs'];

/**
 * The AI SDK session over `sandbox` (started, with `support.sessions`). Options: `description`
 * (the session's text, else one said from the sandbox's policy), `workingDirectory` (the base
 * directory, absolute, default the sandbox's workspace), `shell` (what runs a command string, default
 * `/bin/sh`, as `shell -c command`), `env` (merged under each call's own), `maxOutputBytes` and
 * `killGraceMs` (as `sandbox.run` takes them).
 */
export function createAiSdkSandbox(sandbox, options = {}) {
  const settings = parseOptions(sandbox, options);
  const { base, shell } = settings;
  const at = (path, field = 'path') => resolvePath(base, path, field);

  const specOf = ({ command, workingDirectory, env }) => {
    if (typeof command !== 'string') throw invalid(['command'], 'invalid_type', 'command must be a string');
    return {
      executable: shell,
      args: ['-c', command],
      env: { ...settings.env, ...envOf(env) },
      cwd: workingDirectory === undefined ? base : at(workingDirectory, 'workingDirectory'),
    };
  };
  const commandOptions = (abortSignal) => ({
    ...(abortSignal === undefined ? {} : { signal: abortSignal }),
    ...(settings.killGraceMs === undefined ? {} : { killGraceMs: settings.killGraceMs }),
  });

  async function run(request) {
    const { abortSignal, maxOutputLength } = requestOf(request);
    abortSignal?.throwIfAborted();
    const spec = specOf(request);
    try {
      if (maxOutputLength !== undefined) return await runTruncated(sandbox, spec, commandOptions(abortSignal), maxOutputLength);
      const maxOutputBytes = settings.maxOutputBytes === undefined ? {} : { maxOutputBytes: settings.maxOutputBytes };
      const result = await sandbox.run(spec, { ...commandOptions(abortSignal), ...maxOutputBytes });
      return { exitCode: exitCodeOf(result.exit), stdout: result.stdout.toString('utf8'), stderr: result.stderr.toString('utf8') };
    } catch (error) {
      abortSignal?.throwIfAborted();
      throw error;
    }
  }

  async function spawn(request) {
    const { abortSignal, stdin } = requestOf(request);
    if (stdin !== undefined && typeof stdin !== 'boolean') throw invalid(['stdin'], 'invalid_type', 'stdin must be a boolean');
    abortSignal?.throwIfAborted();
    const command = await sandbox.exec(specOf(request), { ...commandOptions(abortSignal), stdin: stdin === true });
    let killed;
    const process = {
      stdout: Readable.toWeb(command.stdout),
      stderr: Readable.toWeb(command.stderr),
      async wait() {
        const exit = await command.exit;
        abortSignal?.throwIfAborted();
        return { exitCode: exitCodeOf(exit) };
      },
      kill() {
        // Idempotent: one SIGKILL to the command's process group, settled with its exit.
        killed ??= (async () => {
          try {
            command.kill('SIGKILL');
          } catch {
            // The command already ended (or its sandbox stopped): nothing left to kill.
          }
          await command.exit.catch(() => {});
        })();
        return killed;
      },
    };
    if (stdin === true) process.stdin = Writable.toWeb(command.stdin);
    return process;
  }

  async function readBinaryFile(request) {
    const { path, abortSignal } = requestOf(request);
    abortSignal?.throwIfAborted();
    const bytes = await sandbox.files.read(at(path), signalOption(abortSignal));
    return bytes === null ? null : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async function writeBinaryFile(request) {
    const { path, content, abortSignal } = requestOf(request);
    abortSignal?.throwIfAborted();
    if (!(content instanceof Uint8Array)) throw invalid(['content'], 'invalid_type', 'content must be a Uint8Array');
    await sandbox.files.write(at(path), content, signalOption(abortSignal));
  }

  return Object.freeze({
    description: settings.description,
    run,
    spawn,
    async readFile(request) {
      const { path, abortSignal } = requestOf(request);
      abortSignal?.throwIfAborted();
      const stream = await sandbox.files.readStream(at(path), signalOption(abortSignal));
      return stream === null ? null : Readable.toWeb(stream);
    },
    readBinaryFile,
    async readTextFile(request) {
      const { path, abortSignal, encoding = 'utf-8', startLine, endLine } = requestOf(request);
      const decode = decoderOf(encoding);
      for (const [field, value] of [['startLine', startLine], ['endLine', endLine]]) {
        if (value !== undefined && !(Number.isSafeInteger(value) && value >= 1)) {
          throw invalid([field], 'invalid_value', `${field} must be a line number from 1`);
        }
      }
      const bytes = await readBinaryFile({ path, abortSignal });
      return bytes === null ? null : linesOf(decode(bytes), startLine, endLine);
    },
    async writeFile(request) {
      const { path, content, abortSignal } = requestOf(request);
      abortSignal?.throwIfAborted();
      if (!(content instanceof ReadableStream)) throw invalid(['content'], 'invalid_type', 'content must be a ReadableStream of Uint8Array');
      await sandbox.files.write(at(path), content, signalOption(abortSignal));
    },
    writeBinaryFile,
    async writeTextFile(request) {
      const { path, content, abortSignal, encoding = 'utf-8' } = requestOf(request);
      if (typeof content !== 'string') throw invalid(['content'], 'invalid_type', 'content must be a string');
      await writeBinaryFile({ path, content: encode(content, encoding), abortSignal });
    },
    async stat(request) {
      const { path, abortSignal } = requestOf(request);
      abortSignal?.throwIfAborted();
      const resolved = at(path);
      const found = await sandbox.files.stat(resolved, signalOption(abortSignal));
      if (found === null) return null;
      if (found.kind !== 'symlink') return { type: found.kind, size: Number(found.size) };
      // The framework's stat follows links; the sandbox's files never do, so the guest is asked.
      return followedStat(sandbox, shell, resolved, commandOptions(abortSignal));
    },
    async listDirectory(request) {
      const { path, abortSignal } = requestOf(request);
      abortSignal?.throwIfAborted();
      const entries = await sandbox.files.list(at(path), signalOption(abortSignal));
      return entries === null ? null : entries.map(({ name, kind }) => ({ name, type: kind }));
    },
    async deleteFile(request) {
      const { path, abortSignal } = requestOf(request);
      abortSignal?.throwIfAborted();
      const resolved = at(path);
      const found = await sandbox.files.stat(resolved, signalOption(abortSignal));
      if (found === null) return false;
      if (found.kind === 'directory') {
        throw invalid(['path'], 'invalid_value', `${resolved} is a directory: deleteFile removes files and links only`);
      }
      return sandbox.files.remove(resolved, signalOption(abortSignal));
    },
  });
}

/** A member's one argument: an object, its `abortSignal` (when given) an AbortSignal. */
function requestOf(request) {
  if (request === null || typeof request !== 'object') throw invalid([], 'invalid_type', 'the options must be an object');
  if (request.abortSignal !== undefined && !(request.abortSignal instanceof AbortSignal)) {
    throw invalid(['abortSignal'], 'invalid_type', 'abortSignal must be an AbortSignal');
  }
  return request;
}

function invalid(path, code, message) {
  return new SandboxValidationError([{ code, path, message }]);
}

const signalOption = (signal) => (signal === undefined ? {} : { signal });

function parseOptions(sandbox, options) {
  const isSandbox =
    sandbox !== null && typeof sandbox === 'object' && typeof sandbox.exec === 'function' && typeof sandbox.run === 'function' && typeof sandbox.files === 'object';
  if (!isSandbox) throw invalid(['sandbox'], 'invalid_type', 'sandbox must be a started native-sandbox Sandbox (with exec, run and files)');
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(['options'], 'invalid_type', 'options must be an object');
  }
  const issues = Object.keys(options)
    .filter((name) => !OPTION_NAMES.includes(name))
    .map((name) => ({ code: 'unknown_field', path: ['options', name], message: `unknown option ${name}` }));
  const { description, workingDirectory = sandbox.workspace, shell = '/bin/sh', env = {}, maxOutputBytes, killGraceMs } = options;
  const check = (ok, name, message) => {
    if (!ok) issues.push({ code: 'invalid_value', path: ['options', name], message });
  };
  check(description === undefined || typeof description === 'string', 'description', 'description must be a string');
  check(typeof workingDirectory === 'string' && workingDirectory.startsWith('/'), 'workingDirectory', 'workingDirectory must be an absolute path');
  check(typeof shell === 'string' && shell.startsWith('/'), 'shell', 'shell must be an absolute path');
  check(maxOutputBytes === undefined || (Number.isSafeInteger(maxOutputBytes) && maxOutputBytes > 0), 'maxOutputBytes', 'maxOutputBytes must be a positive integer');
  check(killGraceMs === undefined || (Number.isSafeInteger(killGraceMs) && killGraceMs >= 0), 'killGraceMs', 'killGraceMs must be a non-negative integer');
  let baseEnv = {};
  try {
    baseEnv = envOf(env, ['options', 'env']);
  } catch (error) {
    issues.push(...error.issues);
  }
  if (issues.length > 0) throw new SandboxValidationError(issues);
  const base = posix.normalize(workingDirectory);
  return {
    base,
    shell,
    env: baseEnv,
    maxOutputBytes,
    killGraceMs,
    description: description ?? describe(sandbox, base, shell),
  };
}

function envOf(env, path = ['env']) {
  if (env === undefined) return {};
  if (env === null || typeof env !== 'object' || Array.isArray(env)) throw invalid(path, 'invalid_type', 'env must be an object of strings');
  for (const [name, value] of Object.entries(env)) {
    if (typeof value !== 'string') throw invalid([...path, name], 'invalid_type', `env.${name} must be a string`);
  }
  return { ...env };
}

/** A path as the framework defines it: relative to the base directory, absolute as it is. */
function resolvePath(base, path, field) {
  if (typeof path !== 'string' || path.length === 0) throw invalid([field], 'invalid_type', `${field} must be a non-empty string`);
  return posix.resolve(base, path);
}

/** What the session says of itself: where it runs, what persists, what it may reach. */
function describe(sandbox, base, shell) {
  const network = sandbox.effective?.network;
  const reach =
    network?.kind === 'allowlist'
      ? `outbound HTTP(S) only to ${network.hosts.join(', ')}`
      : network?.kind === 'outbound'
        ? 'outbound network'
        : 'no network';
  return [
    `Sandbox ${sandbox.id} (native-sandbox): each command runs as \`${shell} -c <command>\` as the sandbox's user, in ${base} unless told otherwise.`,
    `Files persist for the sandbox's life; the file calls reach the workspace (${sandbox.workspace}), HOME and TMPDIR, and follow no symbolic link.`,
    `Network: ${reach}. No ports are exposed.`,
  ].join('\n');
}

/** A receipt as a shell says it: the code, 128 + the signal's number, or a failure. */
function exitCodeOf(exit) {
  if (exit.kind === 'exited') return exit.code;
  if (exit.kind === 'signaled') return 128 + (native.signalNumber(exit.signal) ?? 0);
  throw new SandboxStateError(`the command has no exit: its sandbox stopped (${exit.cause ?? 'stop'})`);
}

/**
 * `run` with `maxOutputLength`: each stream kept to that many UTF-16 code units while the command
 * runs to its end. An abort ends the command (as `exec` does) and rejects with its reason; a
 * failure kills the command and drops both streams.
 */
async function runTruncated(sandbox, spec, options, maxOutputLength) {
  if (!(Number.isSafeInteger(maxOutputLength) && maxOutputLength > 0)) {
    throw invalid(['maxOutputLength'], 'invalid_value', 'maxOutputLength must be a positive integer');
  }
  const command = await sandbox.exec(spec, { ...options, stdin: false });
  try {
    const [stdout, stderr, exit] = await Promise.all([truncated(command.stdout, maxOutputLength), truncated(command.stderr, maxOutputLength), command.exit]);
    options.signal?.throwIfAborted();
    return { exitCode: exitCodeOf(exit), stdout: stdout.text, stderr: stderr.text, stdoutLength: stdout.length, stderrLength: stderr.length };
  } catch (error) {
    try {
      command.kill('SIGKILL');
    } catch {
      // Already ended, or its sandbox stopped.
    }
    command.stdout.destroy();
    command.stderr.destroy();
    throw error;
  }
}

/** Reads `stream` to its end, keeping its first `max` code units and counting them all. */
async function truncated(stream, max) {
  const decoder = new TextDecoder();
  let text = '';
  let length = 0;
  const take = (part) => {
    length += part.length;
    if (text.length < max) text += part.slice(0, max - text.length);
  };
  for await (const chunk of stream) take(decoder.decode(chunk, { stream: true }));
  take(decoder.decode());
  return { text, length };
}

/** The framework's stat of a link: its target's, asked of the guest (null when it leads nowhere). */
async function followedStat(sandbox, shell, path, options) {
  const script = 'if [ -e "$1" ]; then stat -L -c "%F:%s" -- "$1"; else echo absent; fi';
  const result = await sandbox.run({ executable: shell, args: ['-c', script, 'stat', path], env: {}, cwd: '/' }, options);
  const said = result.stdout.toString('utf8').trim();
  if (said === 'absent') return null;
  const match = /^(.*):(\d+)$/.exec(said);
  if (result.exit.kind !== 'exited' || result.exit.code !== 0 || match === null) {
    throw new SandboxStateError(`stat of ${path} (a link) failed in the guest: ${result.stderr.toString('utf8').trim() || said}`);
  }
  const type = match[1] === 'directory' ? 'directory' : /regular/.test(match[1]) ? 'file' : 'other';
  return { type, size: Number(match[2]) };
}

/** Node's text encodings (both ways); the byte-to-text codecs `hex` and `base64` are not text. */
const NODE_TEXT_ENCODINGS = new Set(['utf8', 'utf-8', 'utf16le', 'utf-16le', 'ucs2', 'ucs-2', 'latin1', 'binary', 'ascii']);

/** How `readTextFile` decodes: Node's text encodings as `writeTextFile` encodes, else any WHATWG label. */
function decoderOf(encoding) {
  const name = String(encoding).toLowerCase();
  if (NODE_TEXT_ENCODINGS.has(name)) return (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString(name);
  try {
    const decoder = new TextDecoder(name);
    return (bytes) => decoder.decode(bytes);
  } catch {
    throw invalid(['encoding'], 'invalid_value', `encoding ${encoding} is not a text encoding this runtime decodes`);
  }
}

/** How `writeTextFile` encodes: Node's text encodings only (a runtime encodes no other). */
function encode(text, encoding) {
  const name = String(encoding).toLowerCase();
  if (!NODE_TEXT_ENCODINGS.has(name)) {
    throw invalid(['encoding'], 'invalid_value', `encoding ${encoding} is not one of ${[...NODE_TEXT_ENCODINGS].join(', ')}`);
  }
  return Buffer.from(text, name);
}

/**
 * Lines `startLine` to `endLine` (1-based, inclusive; past the end reads to the end) of `text`,
 * split and joined by its own line ending (`\r\n`, else `\n`, else `\r`); the whole text when
 * neither is given.
 */
export function linesOf(text, startLine, endLine) {
  if (startLine === undefined && endLine === undefined) return text;
  const ending = text.includes('\r\n') ? '\r\n' : text.includes('\n') ? '\n' : '\r';
  const lines = text.split(ending);
  const first = Math.max(1, startLine ?? 1) - 1;
  const last = Math.min(lines.length, endLine ?? lines.length);
  return lines.slice(first, last).join(ending);
}
