// native-sandbox/openai-agents: a `SandboxClient` of OpenAI Agents JS (`@openai/agents-core/sandbox`)
// whose sessions are this package's sandboxes. A session's commands run through the sandbox's
// sessions (`exec`: bounded, killed with their process group, owned), its files through
// `files.*` (the workspace, HOME and TMPDIR, nothing outside them). The framework's modules come
// in as `framework` (the entry point loads them), so nothing here runs without it.
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { invalid, isStringRecord, readAdapterOptions } from './adapter-options.js';
import { native } from './native.js';
import { SandboxValidationError } from './errors.js';
import { checkWorkspaceArchiveOptions, hydrateWorkspaceArchive, persistWorkspaceArchive } from './workspace-archive.js';

const OPTION_NAMES = ['backend', 'request', 'recovery', 'shell', 'env', 'archiveLimits'];
const EXEC_YIELD_MS = 10_000;
const STDIN_YIELD_MS = 250;
/** Characters of a running command's output kept between two looks at it (the framework's bound). */
const KEPT_OUTPUT_CHARS = 1024 * 1024;
/** The most an editor update or an image view reads (the framework's Docker client's bound). */
const EDIT_READ_BYTES = 10 * 1024 * 1024;
/** Between SIGTERM and SIGKILL when a session stops its commands (the framework's local bound). */
const STOP_GRACE_MS = 250;
const DEFAULT_ROOT = '/workspace';
const STATE_FORMAT = 'native-sandbox.openai-agents.v1';
/** The SDK's reasons for an archive past a limit, by the limit's name. */
const ARCHIVE_LIMIT_REASONS = {
  maxInputBytes: 'archive input size exceeds limit',
  maxExtractedBytes: 'archive extracted size exceeds limit',
  maxMembers: 'archive member count exceeds limit',
};
/** Pieces a writeStdin's text is written in, each after the last drained. */
const STDIN_PIECE_BYTES = 64 * 1024;

/** What `createOpenAiAgentsSandboxClient` makes, given the framework's modules. */
export function openAiAgentsClientFactory(framework) {
  const { sandbox: sdk, internal, core } = framework;
  const { applyDiff, UserError } = core;
  const { formatExecResponse, truncateOutput, elapsedSeconds, imageOutputFromBytes, serializeManifest, deserializeManifest, sanitizeEnvironmentForPersistence } = internal;

  /** One command of a session: its output gathered as text until the framework looks at it. */
  class ActiveCommand {
    output = '';
    stdout = '';
    stderr = '';
    dropped = { output: 0, stdout: 0, stderr: 0 };
    exitCode = null;
    done = false;
    settled;
    command;

    constructor(command) {
      this.command = command;
      command.stdin?.on('error', () => {});
      const pump = (stream, name) =>
        new Promise((resolve) => {
          const decoder = new TextDecoder();
          const take = (text) => {
            if (text.length === 0) return;
            this.#append('output', text);
            this.#append(name, text);
          };
          stream.on('data', (chunk) => take(decoder.decode(chunk, { stream: true })));
          const end = () => {
            take(decoder.decode());
            resolve();
          };
          stream.once('end', end);
          stream.once('error', end);
          stream.once('close', end);
        });
      const streams = Promise.all([pump(command.stdout, 'stdout'), pump(command.stderr, 'stderr')]);
      const exited = command.exit.then(
        (exit) => {
          this.exitCode = exitCodeOf(exit);
          this.done = true;
        },
        () => {
          this.exitCode = 1;
          this.done = true;
        },
      );
      // The command's streams end within the sandbox's bound after its exit, even when a child
      // it left holds them: `settled` never waits on such a child.
      this.settled = Promise.all([exited, streams]);
      this.exited = exited;
    }

    #append(name, text) {
      const kept = this[name] + text;
      if (kept.length <= KEPT_OUTPUT_CHARS) {
        this[name] = kept;
        return;
      }
      this.dropped[name] += kept.length - KEPT_OUTPUT_CHARS;
      this[name] = kept.slice(-KEPT_OUTPUT_CHARS);
    }

    /** Waits for the exit at most `ms`, then for the output once it exited. */
    async waitAtMost(ms) {
      if (!this.done) {
        let timer;
        await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
        clearTimeout(timer);
      }
      if (this.done) await this.settled;
    }

    /** The output gathered since the last look (a prefix says what was dropped). */
    consume() {
      const take = (name) => {
        const text = this.dropped[name] === 0 ? this[name] : `[...${this.dropped[name]} characters truncated from process output...]\n${this[name]}`;
        this[name] = '';
        this.dropped[name] = 0;
        return text;
      };
      return { output: take('output'), stdout: take('stdout'), stderr: take('stderr') };
    }
  }

  /** Applies V4A diffs to the session's files, as the framework's `apply_patch` tool asks. */
  class NativeEditor {
    #session;

    constructor(session) {
      this.#session = session;
    }

    async createFile(operation) {
      const path = this.#session.guestPath(operation.path);
      const files = this.#session.live().files;
      if ((await files.stat(path)) !== null) throw new sdk.SandboxApplyPatchPathError(`File already exists: ${operation.path}`, { path: operation.path });
      await files.write(path, applyDiff('', operation.diff, 'create'));
      return {};
    }

    async updateFile(operation) {
      const path = this.#session.guestPath(operation.path);
      const files = this.#session.live().files;
      const current = await files.read(path, { maxBytes: EDIT_READ_BYTES });
      if (current === null) throw new sdk.SandboxApplyPatchFileNotFoundError(`File not found: ${operation.path}`, { path: operation.path });
      const next = applyDiff(new TextDecoder().decode(current), operation.diff);
      const destination = operation.moveTo === undefined ? path : this.#session.guestPath(operation.moveTo);
      await files.write(destination, next);
      if (destination !== path) await files.remove(path);
      return {};
    }

    async deleteFile(operation) {
      const path = this.#session.guestPath(operation.path);
      if (!(await this.#session.live().files.remove(path))) throw new sdk.SandboxApplyPatchFileNotFoundError(`File not found: ${operation.path}`, { path: operation.path });
      return {};
    }
  }

  class NativeSandboxSession {
    state;
    #client;
    #reservation;
    /** The running sandbox, until the session closes. */
    #sandbox;
    /** The sandbox as started, kept after the close for its record. */
    #started;
    /** Commands kept under a session id for the framework to look at again. */
    #commands = new Map();
    /** Every command not ended yet, under a session id or still inside its exec's yield. */
    #running = new Set();
    #nextSessionId = 1;
    #closing;
    /** What bounds a workspace archive (`resolveArchiveLimits`; `null`: nothing). */
    #archiveLimits;

    constructor(client, reservation, sandbox, state, archiveLimits) {
      this.#client = client;
      this.#reservation = reservation;
      this.#sandbox = sandbox;
      this.#started = sandbox;
      this.state = state;
      this.#archiveLimits = archiveLimits;
    }

    /** The limits of this session's workspace archives: unset fields (or `undefined`) the SDK's defaults, `null` for none. */
    setArchiveLimits(limits) {
      this.#archiveLimits = resolveArchiveLimits(limits);
    }

    /**
     * The workspace as a tar archive: directories and regular files (a file with several names
     * whole under each; symbolic links, devices and FIFOs left out, as the SDK's own clients
     * leave them out), without the manifest's ephemeral paths, within the session's limits.
     */
    async persistWorkspace() {
      const exclude = [...this.state.manifest.ephemeralPersistencePaths()];
      const archive = await archiveErrors(this.#archiveLimits, () => persistWorkspaceArchive(this.live(), { exclude, archiveLimits: this.#archiveLimits }));
      return new Uint8Array(archive.buffer, archive.byteOffset, archive.byteLength);
    }

    /**
     * Replaces the workspace's contents with a tar archive (`persistWorkspace`'s, or any tar of
     * directories and regular files), judged whole against the archive limits first: a refused
     * archive leaves the workspace as it was.
     */
    async hydrateWorkspace(data, options = {}) {
      const sandbox = this.live();
      const archiveLimits = options?.archiveLimits === undefined ? this.#archiveLimits : resolveArchiveLimits(options.archiveLimits);
      await archiveErrors(archiveLimits, () => hydrateWorkspaceArchive(sandbox, archiveBytes(data), { archiveLimits }));
    }

    /** The running sandbox; a closed session says so. */
    live() {
      if (this.#sandbox === undefined) throw new sdk.SandboxLifecycleError(`sandbox session ${this.state.sandboxId} is closed`, { sandboxId: this.state.sandboxId });
      return this.#sandbox;
    }

    /** `path` (relative to the manifest's root, or absolute) as a guest path. */
    guestPath(path) {
      if (typeof path !== 'string' || path.length === 0) throw invalid(['path'], 'invalid_type', 'path must be a non-empty string');
      return posix.resolve(this.state.manifest.root, path);
    }

    async start() {
      this.live();
    }

    async running() {
      return this.#sandbox !== undefined;
    }

    /**
     * True, so the runtime offers the model `write_stdin`: the only way it has to look at a
     * command still running past its yield, feed it or interrupt it. There is no terminal:
     * commands read and write pipes, `tty: true` included.
     */
    supportsPty() {
      return true;
    }

    createEditor(runAs) {
      refuseRunAs(runAs);
      this.live();
      return new NativeEditor(this);
    }

    async execCommand(args) {
      return formatExecResponse(await this.exec(args));
    }

    async exec(args) {
      // `tty` is read as the SDK's shell instructions use it (a command to interrupt with ^C
      // later): there is no terminal, the command runs on pipes either way, and `\u0003` through
      // writeStdin interrupts it.
      const { cmd, workdir, shell, yieldTimeMs = EXEC_YIELD_MS, maxOutputTokens, runAs } = args ?? {};
      if (typeof cmd !== 'string') throw invalid(['cmd'], 'invalid_type', 'cmd must be a string');
      refuseRunAs(runAs);
      const sandbox = this.live();
      const started = Date.now();
      const cwd = workdir === undefined ? this.state.manifest.root : this.guestPath(workdir);
      const executable = shell ?? this.#client.shell;
      const command = await sandbox.exec({ executable, args: ['-c', cmd], env: { ...this.#client.env, ...stringsOf(this.state.environment) }, cwd });
      const active = new ActiveCommand(command);
      this.#running.add(active);
      active.exited.then(() => this.#running.delete(active));
      await active.waitAtMost(yieldTimeMs);
      const seen = active.consume();
      const output = truncateOutput(seen.output, maxOutputTokens);
      const result = { output: output.text, stdout: seen.stdout, stderr: seen.stderr, wallTimeSeconds: elapsedSeconds(started), originalTokenCount: output.originalTokenCount };
      if (active.done) return { ...result, exitCode: active.exitCode };
      const sessionId = this.#nextSessionId++;
      this.#commands.set(sessionId, active);
      return { ...result, sessionId };
    }

    async writeStdin(args) {
      const { sessionId, chars = '', yieldTimeMs = STDIN_YIELD_MS, maxOutputTokens } = args ?? {};
      this.live();
      const active = this.#commands.get(sessionId);
      if (active === undefined) return formatExecResponse({ output: `write_stdin failed: session not found: ${sessionId}`, wallTimeSeconds: 0, exitCode: 1 });
      const started = Date.now();
      if (chars.includes('\u0003') && !active.done) active.command.kill('SIGINT');
      const rest = Buffer.from(chars.split('\u0003').join(''));
      // Within the yield and the stdin's backpressure (never past the policy's buffered input):
      // what the command did not take by then is not written, and its answer says so.
      const unwritten = await feed(active, rest, started + yieldTimeMs);
      await active.waitAtMost(Math.max(0, started + yieldTimeMs - Date.now()));
      const seen = active.consume().output;
      const note = unwritten === 0 ? '' : `[${unwritten} of ${rest.length} bytes of input not written: the command did not read them in time]\n`;
      const output = truncateOutput(`${note}${seen}`, maxOutputTokens);
      const result = { output: output.text, wallTimeSeconds: elapsedSeconds(started), originalTokenCount: output.originalTokenCount };
      if (!active.done) return formatExecResponse({ ...result, sessionId });
      this.#commands.delete(sessionId);
      return formatExecResponse({ ...result, exitCode: active.exitCode });
    }

    async readFile(args) {
      const { path, maxBytes, runAs } = args ?? {};
      refuseRunAs(runAs);
      if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes >= 0)) throw invalid(['maxBytes'], 'invalid_value', 'maxBytes must be a nonnegative integer');
      const guest = this.guestPath(path);
      const files = this.live().files;
      const found = await files.stat(guest);
      if (found === null) throw new sdk.SandboxWorkspaceReadNotFoundError(`File not found: ${path}`, { path });
      if (found.kind !== 'file') throw new UserError(`File path is not a file: ${path}`);
      const stream = await files.readStream(guest);
      if (stream === null) throw new sdk.SandboxWorkspaceReadNotFoundError(`File not found: ${path}`, { path });
      return readAtMost(stream, maxBytes);
    }

    async viewImage(args) {
      const { path, runAs } = args ?? {};
      refuseRunAs(runAs);
      const guest = this.guestPath(path);
      const files = this.live().files;
      const found = await files.stat(guest);
      if (found === null) throw new UserError(`Image file not found: ${path}`);
      if (found.kind !== 'file') throw new UserError(`Image path is not a file: ${path}`);
      if (found.size > BigInt(internal.MAX_VIEW_IMAGE_BYTES)) throw new UserError(`Image file exceeds the 10 MB limit: ${path}`);
      const bytes = await files.read(guest, { maxBytes: internal.MAX_VIEW_IMAGE_BYTES });
      if (bytes === null) throw new UserError(`Image file not found: ${path}`);
      return imageOutputFromBytes(path, bytes);
    }

    async listDir(args) {
      const { path, runAs } = args ?? {};
      refuseRunAs(runAs);
      const guest = this.guestPath(path);
      const entries = await this.live().files.list(guest);
      if (entries === null) throw new sdk.SandboxWorkspaceReadNotFoundError(`Directory not found: ${path}`, { path });
      // As the SDK's clients say them: relative to the root below it, absolute elsewhere.
      const relative = posix.relative(this.state.manifest.root, guest);
      const outside = relative === '..' || relative.startsWith('../');
      const base = relative === '' ? '' : outside ? guest : relative;
      return entries.map(({ name, kind }) => ({ name, path: base === '' ? name : `${base}/${name}`, type: kind === 'directory' ? 'dir' : kind === 'file' ? 'file' : 'other' }));
    }

    async pathExists(path, runAs) {
      refuseRunAs(runAs);
      return (await this.live().files.stat(this.guestPath(path))) !== null;
    }

    async directoryExists(path, runAs) {
      refuseRunAs(runAs);
      return (await this.live().files.stat(this.guestPath(path)))?.kind === 'directory';
    }

    async materializeEntry(args) {
      const { path, entry, runAs } = args ?? {};
      refuseRunAs(runAs);
      checkManifestContents({ entries: { [path]: entry } });
      await writeEntry(this.live().files, this.guestPath(path), entry, path);
      this.state.manifest = new sdk.Manifest({ ...manifestInit(this.state.manifest), entries: { ...this.state.manifest.entries, [path]: entry } });
    }

    async applyManifest(manifest, runAs) {
      refuseRunAs(runAs);
      checkManifest(manifest, this.state.manifest.root);
      await writeEntries(this.live().files, this.state.manifest.root, manifest.entries);
      this.state.environment = { ...this.state.environment, ...(await manifest.resolveEnvironment()) };
      this.state.manifest = new sdk.Manifest({ ...manifestInit(this.state.manifest), entries: { ...this.state.manifest.entries, ...manifest.entries } });
    }

    /** Ends every command it started (SIGTERM, SIGKILL after a grace); the sandbox keeps running. */
    async stop() {
      const active = [...this.#running];
      this.#commands.clear();
      await Promise.all(
        active.map(async (one) => {
          if (one.done) return;
          one.command.kill('SIGTERM');
          let timer;
          await Promise.race([one.exited, new Promise((resolve) => (timer = setTimeout(resolve, STOP_GRACE_MS)))]);
          clearTimeout(timer);
          if (!one.done) one.command.kill('SIGKILL');
          await one.settled;
        }),
      );
    }

    async shutdown() {
      await this.close();
    }

    async delete() {
      await this.close();
    }

    /**
     * Destroys the sandbox (every command, its storage). No call is admitted from its start; a
     * destroy that fails is tried again by the next close.
     */
    async close() {
      this.#sandbox = undefined;
      this.#commands.clear();
      // Forgotten at once: a resume or serialize meanwhile finds the sandbox by its record.
      this.#client.forget(this);
      this.#closing ??= this.#reservation.destroy().catch((error) => {
        this.#closing = undefined;
        throw error;
      });
      await this.#closing;
    }

    /** The sandbox's current recovery record (its started face's: the reservation's stops at start). */
    recoveryRecord() {
      return this.#started.recoveryRecord;
    }
  }

  /** Live sessions by sandbox id, whichever client made them: a resume in this process gets the same session. */
  const live = new Map();
  /** Every session by its state, closed ones too: a serialize finds its record. */
  const sessionOf = new WeakMap();

  class NativeSandboxClient {
    backendId = 'native-sandbox';
    /** No default options: the runtime then asks for no snapshot (a session resumes from its record). */
    supportsDefaultOptions = false;
    shell;
    env;
    #settings;

    constructor(settings) {
      this.#settings = settings;
      this.shell = settings.shell;
      this.env = settings.env;
    }

    async create(args, manifestOptions) {
      const normalized = sdk.normalizeSandboxClientCreateArgs(args, manifestOptions);
      if (normalized.options !== undefined && Object.keys(normalized.options).length > 0) {
        throw invalid(['options'], 'unknown_field', "per-session options are not taken: the sandbox's policy is the client's request, and no option widens it");
      }
      if (normalized.snapshot !== undefined && normalized.snapshot?.type !== 'noop') {
        throw new sdk.SandboxUnsupportedFeatureError('native-sandbox takes no snapshot spec: a session resumes from its recovery record', { feature: 'snapshot' });
      }
      const archiveLimits = normalized.archiveLimits === undefined ? this.#settings.archiveLimits : resolveArchiveLimits(normalized.archiveLimits);
      return this.#open(normalized.manifest, {}, archiveLimits);
    }

    /** A new started sandbox for `manifest`, its entries written into the workspace. */
    async #open(manifest, environment, archiveLimits = this.#settings.archiveLimits) {
      checkManifestContents(manifest);
      const { backend, request, recovery } = this.#settings;
      const reservation = backend.reserve(request, recovery);
      let sandbox;
      try {
        sandbox = await reservation.start();
        const root = checkManifest(manifest, sandbox.workspace);
        const bound = new sdk.Manifest({ ...manifestInit(manifest), root });
        await writeEntries(sandbox.files, root, bound.entries);
        const state = {
          manifest: bound,
          environment: { ...environment, ...(await bound.resolveEnvironment()) },
          workspaceReady: true,
          exposedPorts: {},
          sandboxId: sandbox.id,
        };
        const session = new NativeSandboxSession(this, reservation, sandbox, state, archiveLimits);
        live.set(sandbox.id, session);
        sessionOf.set(state, session);
        return session;
      } catch (error) {
        await reservation.destroy().catch(() => {});
        throw error;
      }
    }

    forget(session) {
      if (live.get(session.state.sandboxId) === session) live.delete(session.state.sandboxId);
    }

    async serializeSessionState(state) {
      const session = live.get(state.sandboxId) ?? sessionOf.get(state);
      const record = session?.recoveryRecord() ?? state.recoveryRecord;
      return {
        format: STATE_FORMAT,
        sandboxId: state.sandboxId,
        manifest: serializeManifest(state.manifest),
        // As the SDK's clients persist it: ephemeral values and references left out.
        environment: stringsOf(sanitizeEnvironmentForPersistence(state)),
        ...(record === undefined ? {} : { recoveryRecord: JSON.parse(JSON.stringify(record)) }),
      };
    }

    canPersistOwnedSessionState() {
      return true;
    }

    async deserializeSessionState(value) {
      if (value?.format !== STATE_FORMAT || typeof value.sandboxId !== 'string') throw new sdk.SandboxConfigurationError(`not a ${STATE_FORMAT} session state`, { format: value?.format });
      return {
        manifest: deserializeManifest(value.manifest),
        environment: stringsOf(value.environment ?? {}),
        workspaceReady: true,
        exposedPorts: {},
        sandboxId: value.sandboxId,
        ...(value.recoveryRecord === undefined ? {} : { recoveryRecord: value.recoveryRecord }),
      };
    }

    /**
     * The live session of `state` when this process still holds it; else the sandbox it names is
     * found from its recovery record and removed (its commands could not be reached again), and
     * a new sandbox is made with the same manifest and environment.
     */
    async resume(state) {
      const held = live.get(state.sandboxId);
      if (held !== undefined) return held;
      await this.#removeRecorded(state);
      return this.#open(state.manifest, state.environment ?? {});
    }

    /** Removes the sandbox `state` names: the live session's, or the one its record proves. */
    async delete(state) {
      const held = live.get(state.sandboxId);
      if (held !== undefined) return held.close();
      await this.#removeRecorded(state);
    }

    async #removeRecorded(state) {
      if (state.recoveryRecord === undefined) return;
      const found = await this.#settings.backend.reconcile(state.recoveryRecord);
      if (found.kind === 'conflict') throw new sdk.SandboxProviderError(`sandbox ${state.sandboxId} cannot be proven this client's: ${found.reason}; nothing was touched`, { sandboxId: state.sandboxId });
      if (found.kind === 'matched' || found.kind === 'uncertain') await found.owner.destroy();
    }
  }

  /** Writes manifest `entries` under `root`. */
  async function writeEntries(files, root, entries) {
    for (const [path, entry] of Object.entries(entries ?? {})) {
      await writeEntry(files, posix.resolve(root, path), entry, path);
    }
  }

  async function writeEntry(files, guest, entry, name) {
    switch (entry?.type) {
      case 'file':
        await files.write(guest, typeof entry.content === 'string' ? entry.content : Buffer.from(entry.content), entry.permissions === undefined ? {} : { mode: modeOf(entry.permissions, name) });
        return;
      case 'dir':
        await files.mkdir(guest, { recursive: true });
        for (const [child, inner] of Object.entries(entry.children ?? {})) await writeEntry(files, posix.resolve(guest, child), inner, `${name}/${child}`);
        return;
      default:
        throw unsupportedEntry(name, entry);
    }
  }

  /** The manifest's root as the sandbox's workspace, or why the manifest cannot be honoured. */
  function checkManifest(manifest, workspace) {
    checkManifestContents(manifest);
    if (manifest.root !== DEFAULT_ROOT && manifest.root !== workspace) {
      throw new sdk.SandboxConfigurationError(`manifest root ${manifest.root} is not the sandbox's workspace ${workspace} (leave it at ${DEFAULT_ROOT}, which stands for it)`, { root: manifest.root });
    }
    return workspace;
  }

  /**
   * Archive limits judged (a `SandboxValidationError` at `archiveLimits.<field>`), each unset
   * field given the SDK's default. Where the SDK reads an unset option as no limit at all, an
   * unset option here is the SDK's defaults too: an archive is bounded unless the caller says
   * `null`.
   */
  function resolveArchiveLimits(limits) {
    checkWorkspaceArchiveOptions({ archiveLimits: limits ?? null });
    return sdk.resolveSandboxArchiveLimits(limits === undefined ? {} : limits);
  }

  /**
   * `fn()`, a crossed archive limit (of `limits`) or a refused archive thrown as the SDK's
   * `SandboxArchiveError` (the count and the member that crossed it are in its message).
   */
  async function archiveErrors(limits, fn) {
    try {
      return await fn();
    } catch (error) {
      const issue = error instanceof SandboxValidationError ? error.issues[0] : undefined;
      if (issue?.path[0] === 'archiveLimits' && issue.code === 'too_large') {
        const reason = ARCHIVE_LIMIT_REASONS[issue.path[1]];
        throw new sdk.SandboxArchiveError(`Workspace ${reason}: ${issue.message}`, { reason, limit: limits?.[issue.path[1]] ?? null, limitName: issue.path[1], cause: error });
      }
      if (issue?.path[0] === 'archive') {
        throw new sdk.SandboxArchiveError(`Workspace archive refused: ${issue.message}`, { reason: 'invalid archive', cause: error });
      }
      throw error;
    }
  }

  /** The archive's bytes: a string as UTF-8 (as the SDK's clients read one), else its bytes. */
  function archiveBytes(data) {
    if (typeof data === 'string') return new TextEncoder().encode(data);
    if (data instanceof Uint8Array) return data;
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    throw invalid(['data'], 'invalid_type', 'data must be a string, an ArrayBuffer or an ArrayBuffer view (a Uint8Array)');
  }

  /** What of a manifest no sandbox here honours, refused before any is made. */
  function checkManifestContents(manifest) {
    for (const [field, list] of [['users', manifest.users], ['groups', manifest.groups], ['extraPathGrants', manifest.extraPathGrants]]) {
      if ((list ?? []).length > 0) throw new sdk.SandboxUnsupportedFeatureError(`manifest ${field} are not offered: commands run as the sandbox's one user, with no host path`, { feature: field });
    }
    const visit = (entries, prefix) => {
      for (const [path, entry] of Object.entries(entries ?? {})) {
        const name = prefix === '' ? path : `${prefix}/${path}`;
        if (entry?.type === 'dir') visit(entry.children, name);
        else if (entry?.type !== 'file') throw unsupportedEntry(name, entry);
        else if (entry.permissions !== undefined) modeOf(entry.permissions, name);
      }
    };
    visit(manifest.entries, '');
  }

  function unsupportedEntry(name, entry) {
    return new sdk.SandboxUnsupportedFeatureError(
      `manifest entry ${name} is a ${entry?.type} entry: native-sandbox writes file and dir entries into the workspace; host files, repositories and mounts are not brought in (no host mount widens the sandbox's policy)`,
      { path: name, type: entry?.type },
    );
  }

  /** An entry's permissions (any form the SDK takes: a mode, `'rwxr-xr-x'`, owner/group/other) as a file mode. */
  function modeOf(permissions, name) {
    try {
      return new sdk.Permissions(permissions).toMode() & 0o777;
    } catch (cause) {
      throw new sdk.SandboxConfigurationError(`manifest entry ${name}: its permissions are not the SDK's: ${cause?.message ?? cause}`, { path: name });
    }
  }

  function manifestInit(manifest) {
    return {
      version: manifest.version,
      root: manifest.root,
      entries: manifest.entries,
      environment: manifest.environment,
      remoteMountCommandAllowlist: manifest.remoteMountCommandAllowlist,
    };
  }

  function refuseRunAs(runAs) {
    if (runAs !== undefined && runAs !== null) throw new sdk.SandboxUnsupportedFeatureError(`runAs ${runAs} is not offered: every command and file call runs as the sandbox's one user`, { feature: 'runAs' });
  }

  return function createOpenAiAgentsSandboxClient(options) {
    const settings = parseOptions(options);
    return new NativeSandboxClient({ ...settings, archiveLimits: resolveArchiveLimits(settings.archiveLimits) });
  };
}

/**
 * Writes `bytes` to the command's stdin in pieces, each once the last drained, until `deadline`
 * (epoch ms): the bytes not written by then (or once the stdin closed), 0 when all were.
 */
async function feed(active, bytes, deadline) {
  const stdin = active.command.stdin;
  // No piece past the stream's own high-water mark: what waits for the guest stays within it.
  const pieceBytes = Math.max(1, Math.min(STDIN_PIECE_BYTES, stdin?.writableHighWaterMark ?? STDIN_PIECE_BYTES));
  let at = 0;
  while (at < bytes.length && !active.done && stdin?.writable) {
    const piece = bytes.subarray(at, at + pieceBytes);
    at += piece.length;
    const taken = new Promise((resolve) => stdin.write(piece, (error) => resolve(!error)));
    // Another piece at once only while what the native side has not taken yet stays under the
    // stream's high-water mark, so the policy's buffered input is never passed.
    if (stdin.writableLength + pieceBytes <= stdin.writableHighWaterMark) continue;
    // Else until this piece (and every one before it) is taken, the deadline, or the exit.
    const timer = new AbortController();
    const wentOn = await Promise.race([
      taken,
      sleep(Math.max(0, deadline - Date.now()), false, { signal: timer.signal }).catch(() => false),
      active.exited.then(() => false),
    ]);
    timer.abort();
    if (!wentOn) break;
  }
  return bytes.length - at;
}

/** The first `maxBytes` bytes of `stream` (all when undefined); the rest is not read. */
async function readAtMost(stream, maxBytes) {
  const chunks = [];
  let length = 0;
  for await (const chunk of stream) {
    const room = maxBytes === undefined ? chunk.length : maxBytes - length;
    chunks.push(room < chunk.length ? chunk.subarray(0, room) : chunk);
    length += Math.min(room, chunk.length);
    if (maxBytes !== undefined && length >= maxBytes) {
      stream.destroy();
      break;
    }
  }
  return new Uint8Array(Buffer.concat(chunks, length));
}

function stringsOf(environment) {
  return Object.fromEntries(Object.entries(environment ?? {}).filter(([, value]) => typeof value === 'string'));
}

/** A receipt as the framework's providers say it: the code; 128 + n for a signal. */
function exitCodeOf(exit) {
  if (exit.kind === 'exited') return exit.code;
  if (exit.kind === 'signaled') return 128 + (native.signalNumber(exit.signal) ?? 0);
  // Its sandbox stopped under it: as a kill.
  return 137;
}

function parseOptions(options) {
  const { check, done } = readAdapterOptions(options, OPTION_NAMES);
  const { backend, request, recovery = { kind: 'in_process' }, shell = '/bin/sh', env = {}, archiveLimits } = options;
  check(backend !== null && typeof backend?.reserve === 'function' && typeof backend?.reconcile === 'function', 'backend', 'backend must be a sandbox backend (createDockerSandboxBackend)');
  check(request !== null && typeof request === 'object', 'request', 'request must be a sandbox request ({ policy })');
  check(typeof shell === 'string' && shell.startsWith('/'), 'shell', 'shell must be an absolute path');
  check(isStringRecord(env), 'env', 'env must be an object of strings');
  done();
  return { backend, request, recovery, shell, env: { ...env }, archiveLimits };
}
