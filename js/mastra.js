// native-sandbox/mastra: a Mastra `WorkspaceSandbox` (`@mastra/core/workspace`) whose sandbox is
// one of this package's, reserved and started from a backend and a request when Mastra starts it,
// stopped and destroyed when Mastra does. Commands run through the sandbox's sessions (`exec`),
// which keep their bounds, policy and ownership; files are written through `files.write`. The
// framework's classes come in as `workspace` (the entry point loads them), so nothing here runs
// without it.
import { posix } from 'node:path';
import { invalid, isStringRecord, readAdapterOptions } from './adapter-options.js';
import { native } from './native.js';

const OPTION_NAMES = ['backend', 'request', 'recovery', 'id', 'name', 'workingDirectory', 'shell', 'env', 'timeout', 'instructions', 'onStart', 'onStop', 'onDestroy'];

/** What `createMastraSandbox` makes, given the framework's `@mastra/core/workspace` module. */
export function mastraSandboxFactory(workspace) {
  const { MastraSandbox, SandboxProcessManager, ProcessHandle, SandboxAbortError, validateSandboxFileMode } = workspace;

  /** One command of the sandbox as Mastra's process handle: its output as decoded text. */
  class NativeProcessHandle extends ProcessHandle {
    pid;
    exitCode;
    #command;
    #waited;
    #killed = false;
    #exited = false;

    constructor(command, options, timeoutMs, started) {
      super(options);
      this.#command = command;
      this.pid = command.id;
      // A write refused by the stream limits fails its own call (sendStdin's callback); the
      // stream's 'error' event must not go unheard (an uncaught error would end the host).
      command.stdin?.on('error', () => {});
      // Timed out: the deadline (counted natively from the spawn, which `started` precedes)
      // has passed, whatever the command did with its SIGTERM.
      let timedOut = false;
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => (timedOut = true), Math.max(0, started + timeoutMs - Date.now()));
      timer?.unref();
      command.exit.then(
        () => (this.#exited = true),
        () => (this.#exited = true),
      );
      const pump = (stream, emit) =>
        new Promise((resolve) => {
          const decoder = new TextDecoder();
          stream.on('data', (chunk) => {
            const text = decoder.decode(chunk, { stream: true });
            if (text) emit(text);
          });
          const end = () => {
            const rest = decoder.decode();
            if (rest) emit(rest);
            resolve();
          };
          stream.on('end', end);
          stream.on('error', end);
          stream.on('close', end);
        });
      const streams = Promise.all([pump(command.stdout, (text) => this.emitStdout(text)), pump(command.stderr, (text) => this.emitStderr(text))]);
      this.#waited = Promise.all([command.exit, streams]).then(([exit]) => {
        clearTimeout(timer);
        if (timedOut) this.emitStderr(`\nProcess timed out after ${timeoutMs}ms`);
        this.exitCode = exitCodeOf(exit, timedOut);
        return {
          success: this.exitCode === 0,
          exitCode: this.exitCode,
          stdout: this.stdout,
          stderr: this.stderr,
          executionTimeMs: Date.now() - started,
          killed: this.#killed || timedOut || exit.kind !== 'exited',
          timedOut,
        };
      });
    }

    async wait() {
      return this.#waited;
    }

    async kill() {
      if (this.exitCode !== undefined || this.#exited) return false;
      this.#killed = true;
      try {
        this.#command.kill('SIGKILL');
      } catch {
        return false;
      }
      await this.#waited;
      return true;
    }

    async sendStdin(data) {
      const stdin = this.#openStdin();
      await new Promise((resolve, reject) => stdin.write(data, (error) => (error ? reject(error) : resolve())));
    }

    async closeStdin() {
      const stdin = this.#openStdin();
      if (stdin.writableEnded) return;
      await new Promise((resolve, reject) => stdin.end((error) => (error ? reject(error) : resolve())));
    }

    #openStdin() {
      if (this.exitCode !== undefined) throw new Error(`Process ${this.pid} has already exited with code ${this.exitCode}`);
      if (this.#command.stdin === null) throw new Error(`Process ${this.pid} does not have stdin available (stdinMode 'ignore')`);
      return this.#command.stdin;
    }
  }

  /** Commands as Mastra's process manager sees them: each `shell -c command` in the sandbox. */
  class NativeProcessManager extends SandboxProcessManager {
    async spawn(command, options = {}) {
      const native = this.sandbox;
      const running = native.started();
      const cwd = options.cwd === undefined ? native.workingDirectory : posixResolve(native.workingDirectory, options.cwd);
      const timeoutMs = deadlineOf(options.timeout ?? native.defaultTimeout);
      const started = Date.now();
      const env = Object.fromEntries(Object.entries(options.env ?? {}).filter(([, value]) => value !== undefined));
      const executed = await running.exec(
        { executable: native.shell, args: ['-c', command], env, cwd },
        {
          stdin: options.stdinMode !== 'ignore',
          ...(timeoutMs === undefined ? {} : { deadlineMs: timeoutMs }),
          ...(options.abortSignal === undefined ? {} : { signal: options.abortSignal }),
        },
      );
      const handle = new NativeProcessHandle(executed, options, timeoutMs, started);
      this._tracked.set(handle.pid, handle);
      return handle;
    }

    async list() {
      return [...this._tracked.values()].map((handle) => ({ pid: handle.pid, command: handle.command, running: handle.exitCode === undefined, exitCode: handle.exitCode }));
    }
  }

  class NativeMastraSandbox extends MastraSandbox {
    id;
    name;
    provider = 'native-sandbox';
    status = 'pending';
    shell;
    defaultTimeout;
    #settings;
    #reservation;
    #sandbox;

    constructor(settings) {
      super({
        name: settings.name,
        processes: new NativeProcessManager(),
        env: settings.env,
        ...(settings.workingDirectory === undefined ? {} : { workingDirectory: settings.workingDirectory }),
        ...(settings.onStart === undefined ? {} : { onStart: settings.onStart }),
        ...(settings.onStop === undefined ? {} : { onStop: settings.onStop }),
        ...(settings.onDestroy === undefined ? {} : { onDestroy: settings.onDestroy }),
      });
      this.#settings = settings;
      this.id = settings.id;
      this.name = settings.name;
      this.shell = settings.shell;
      this.defaultTimeout = settings.timeout;
    }

    /** The running sandbox (Mastra starts it before any command: `ensureRunning`). */
    started() {
      if (this.#sandbox === undefined) throw new workspace.SandboxNotReadyError(this.id);
      return this.#sandbox;
    }

    async start(options = {}) {
      if (this.#sandbox !== undefined) return { outcome: 'connected' };
      // A reservation whose cleanup failed before is ended first: one sandbox at a time.
      await this.#end();
      const { backend, request, recovery } = this.#settings;
      const signal = options.abortSignal;
      const reservation = backend.reserve(request, recovery);
      this.#reservation = reservation;
      try {
        this.#sandbox = await reservation.start(signal === undefined ? {} : { signal });
      } catch (error) {
        // The reservation owns whatever the failed start made (the contract's SandboxStartError):
        // destroyed now, or kept for the next start or destroy() to end.
        await this.#end().catch(() => {});
        throw error;
      }
      if (this.workingDirectory === undefined) this.setWorkingDirectory(this.#sandbox.workspace);
      return { outcome: 'created' };
    }

    /** A stop ends the sandbox (and every command); a later start makes a new one, empty. */
    async stop() {
      await this.#end();
    }

    async destroy() {
      await this.#end();
    }

    /** Destroys the reservation (stopping its sandbox first); kept until that succeeds. */
    async #end() {
      const reservation = this.#reservation;
      if (reservation === undefined) return;
      this.#sandbox = undefined;
      await reservation.destroy();
      this.#reservation = undefined;
      this.processes?._tracked.clear();
    }

    async writeFiles(files, options = {}) {
      if (!Array.isArray(files)) throw invalid(['files'], 'invalid_type', 'files must be an array');
      files.forEach((file, i) => {
        if (file?.mode !== undefined) validateSandboxFileMode(file.mode);
        if (typeof file?.path !== 'string') throw invalid(['files', i, 'path'], 'invalid_type', 'path must be a string');
      });
      const signal = options.abortSignal;
      if (signal?.aborted) throw new SandboxAbortError('writeFiles', signal.reason);
      await this.ensureRunning();
      const sandbox = this.started();
      for (const file of files) {
        try {
          await sandbox.files.write(posixResolve(this.workingDirectory, file.path), typeof file.content === 'string' ? Buffer.from(file.content) : file.content, {
            mode: file.mode ?? 0o644,
            ...(signal === undefined ? {} : { signal }),
          });
        } catch (error) {
          if (signal?.aborted) throw new SandboxAbortError('writeFiles', signal.reason);
          throw error;
        }
      }
    }

    getInstructions() {
      if (this.#settings.instructions !== undefined) return this.#settings.instructions;
      return [
        `A native-sandbox sandbox: commands run as \`${this.shell} -c <command>\` as the sandbox's user, in ${this.workingDirectory ?? 'its workspace'} unless told otherwise.`,
        "Files persist while the sandbox runs; only the workspace, HOME and TMPDIR are writable. The network is the sandbox policy's; no ports are exposed.",
      ].join('\n');
    }

    async getInfo() {
      return {
        id: this.id,
        name: this.name,
        provider: this.provider,
        status: this.status,
        createdAt: this.#createdAt,
        metadata: this.#sandbox === undefined ? {} : { sandboxId: this.#sandbox.id, effective: this.#sandbox.effective },
      };
    }

    #createdAt = new Date();
  }

  return function createMastraSandbox(options) {
    return new NativeMastraSandbox(parseOptions(options));
  };
}

function parseOptions(options) {
  const { check, done } = readAdapterOptions(options, OPTION_NAMES);
  const { backend, request, recovery = { kind: 'in_process' }, id, name, workingDirectory, shell = '/bin/sh', env = {}, timeout = 300_000, instructions, onStart, onStop, onDestroy } = options;
  check(backend !== null && typeof backend?.reserve === 'function', 'backend', 'backend must be a sandbox backend (createDockerSandboxBackend)');
  check(request !== null && typeof request === 'object', 'request', 'request must be a sandbox request ({ policy })');
  check(id === undefined || (typeof id === 'string' && id.length > 0), 'id', 'id must be a non-empty string');
  check(name === undefined || typeof name === 'string', 'name', 'name must be a string');
  check(workingDirectory === undefined || (typeof workingDirectory === 'string' && workingDirectory.startsWith('/')), 'workingDirectory', 'workingDirectory must be an absolute path');
  check(typeof shell === 'string' && shell.startsWith('/'), 'shell', 'shell must be an absolute path');
  check(timeout === undefined || (Number.isSafeInteger(timeout) && timeout > 0), 'timeout', 'timeout must be a positive integer of milliseconds');
  check(instructions === undefined || typeof instructions === 'string', 'instructions', 'instructions must be a string');
  for (const [field, hook] of [['onStart', onStart], ['onStop', onStop], ['onDestroy', onDestroy]]) {
    check(hook === undefined || typeof hook === 'function', field, `${field} must be a function`);
  }
  check(isStringRecord(env), 'env', 'env must be an object of strings');
  done();
  const chosenId = id ?? `native-sandbox-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  return { backend, request, recovery, id: chosenId, name: name ?? 'NativeSandbox', workingDirectory, shell, env: { ...env }, timeout, instructions, onStart, onStop, onDestroy };
}

/** `path` against `base` (POSIX), as Mastra's local provider resolves a command's cwd. */
function posixResolve(base, path) {
  return posix.resolve(base, path);
}

/**
 * A timeout as a deadline the sandbox takes: none for 0 (as Mastra's local sandbox reads it),
 * whole milliseconds up, at most 2^31 - 1.
 */
function deadlineOf(timeout) {
  if (timeout === undefined || timeout === 0) return undefined;
  if (typeof timeout !== 'number' || !(timeout > 0)) throw invalid(['timeout'], 'invalid_value', 'timeout must be a positive number of milliseconds');
  return Math.min(Math.ceil(timeout), 2 ** 31 - 1);
}

/** A receipt as Mastra's providers say it: the code; 124 for a timeout; 128 + n for a signal. */
function exitCodeOf(exit, timedOut) {
  if (timedOut) return 124;
  if (exit.kind === 'exited') return exit.code;
  if (exit.kind === 'signaled') return 128 + (native.signalNumber(exit.signal) ?? 0);
  // Its sandbox stopped under it: as a kill.
  return 137;
}
