// The AIP-36 sandbox spec (`agentsandbox/v1`, as @agentproto/sandbox 0.2.1 validates it) read
// for the Docker provider, strictly and before any engine call: every refusal is a typed error
// naming the field. It becomes this package's sandbox request and the daemon's process recipe,
// both checked by the Rust parsers here too, so nothing the engine would refuse gets that far.
import { SandboxUnsupportedError, SandboxValidationError } from '../errors.js';
import { SANDBOX_DEFAULT_TRANSFER_BUFFERS } from '../constants.js';
import { parseSandboxProcessSpec, parseSandboxRequest } from '../parsers.js';
import { DOCKER_SANDBOX_GUEST } from '../docker.js';
import { SandboxProviderError } from './errors.js';
import { idleWindowMs } from './lifecycle.js';
import { IDLE_WINDOW_MS_MAX } from './idle-gate.js';

const MIB = 1024 * 1024;
/** The defaults the provider applies where the spec is silent. */
export const SPEC_DEFAULTS = Object.freeze({ cpus: 1, pids: 256, memoryMb: 512 });
const TOP_LEVEL = new Set(['schema', 'id', 'version', 'provider', 'config', 'limits', 'env', 'network', 'mounts', 'identity', 'lifecycle', 'read_only', 'metadata']);
const CONFIG = new Set(['image', 'daemon', 'cpus', 'pids']);
const DAEMON = new Set(['executable', 'args', 'cwd']);
const ID_PATTERN = /^@[a-z0-9][a-z0-9-]*\/[a-z0-9][a-z0-9-]*$/;
const SEMVER_PATTERN = /^\d+\.\d+\.\d+(?:[-+][\w.-]+)?$/;
const IMAGE_BYTES_MAX = 1024;

const isPlainObject = (value) =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && [Object.prototype, null].includes(Object.getPrototypeOf(value));

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

/** Collects issues in the contract's shape, so one call reports every problem. */
class Issues {
  list = [];
  add(code, path, message) {
    this.list.push({ code, path, message });
  }
  type(path, expected, value) {
    this.add('invalid_type', path, `expected ${expected}, received ${describe(value)}`);
  }
  object(value, path, known) {
    if (!isPlainObject(value)) {
      this.type(path, 'a plain object', value);
      return false;
    }
    for (const key of Object.keys(value)) {
      if (!known.has(key)) this.add('unrecognized_keys', [...path, key], `unknown key "${key}"`);
    }
    return true;
  }
  integer(value, path) {
    if (value === undefined) return;
    if (!Number.isSafeInteger(value) || value < 1) this.type(path, 'an integer of at least 1', value);
  }
  strings(value, path) {
    if (!Array.isArray(value)) {
      this.type(path, 'an array of strings', value);
      return false;
    }
    value.forEach((item, index) => {
      if (typeof item !== 'string') this.type([...path, index], 'a string', item);
    });
    return true;
  }
  throwIfAny() {
    if (this.list.length > 0) throw new SandboxValidationError(this.list);
  }
}

function readDaemon(daemon, issues) {
  const at = ['spec', 'config', 'daemon'];
  if (!issues.object(daemon, at, DAEMON)) return;
  if (typeof daemon.executable !== 'string' || daemon.executable === '') issues.type([...at, 'executable'], 'a non-empty guest path', daemon.executable);
  if (daemon.args !== undefined) issues.strings(daemon.args, [...at, 'args']);
  if (daemon.cwd !== undefined && typeof daemon.cwd !== 'string') issues.type([...at, 'cwd'], 'a guest path', daemon.cwd);
}

function readConfig(config, issues, required) {
  const at = ['spec', 'config'];
  if (!issues.object(config, at, CONFIG)) return;
  if (config.image === undefined) {
    if (required) issues.add('invalid_type', [...at, 'image'], 'required: the guest image (a reference or sha256: ID) the daemon runs in');
  } else if (typeof config.image !== 'string' || config.image === '' || Buffer.byteLength(config.image) > IMAGE_BYTES_MAX) {
    issues.type([...at, 'image'], `a non-empty image reference of at most ${IMAGE_BYTES_MAX} bytes`, config.image);
  }
  if (config.daemon === undefined) {
    if (required) issues.add('invalid_type', [...at, 'daemon'], 'required: { executable, args?, cwd? }, the process that speaks MCP over stdio');
  } else {
    readDaemon(config.daemon, issues);
  }
  if (config.cpus !== undefined && (typeof config.cpus !== 'number' || !Number.isFinite(config.cpus) || config.cpus <= 0)) {
    issues.type([...at, 'cpus'], 'a positive number', config.cpus);
  }
  issues.integer(config.pids, [...at, 'pids']);
}

function readStructure(spec, issues, required) {
  if (!issues.object(spec, ['spec'], TOP_LEVEL)) return;
  if (spec.schema !== undefined && spec.schema !== 'sandbox/v1') issues.add('invalid_value', ['spec', 'schema'], 'expected "sandbox/v1"');
  if (spec.id !== undefined && (typeof spec.id !== 'string' || !ID_PATTERN.test(spec.id))) issues.add('invalid_value', ['spec', 'id'], 'expected "@owner/slug"');
  if (spec.version !== undefined && (typeof spec.version !== 'string' || !SEMVER_PATTERN.test(spec.version))) issues.add('invalid_value', ['spec', 'version'], 'expected a semantic version');
  if (typeof spec.provider !== 'string' || spec.provider === '') {
    issues.type(['spec', 'provider'], 'a non-empty string', spec.provider);
  } else if (spec.provider !== 'docker') {
    issues.add('invalid_value', ['spec', 'provider'], `this provider serves "docker", not "${spec.provider}"`);
  }
  if (spec.config === undefined) issues.add('invalid_type', ['spec', 'config'], 'required: a plain object');
  else readConfig(spec.config, issues, required);
  if (spec.limits !== undefined && issues.object(spec.limits, ['spec', 'limits'], new Set(['timeout_ms', 'memory_mb', 'cpu_ms']))) {
    for (const key of ['timeout_ms', 'memory_mb', 'cpu_ms']) issues.integer(spec.limits[key], ['spec', 'limits', key]);
  }
  if (spec.env !== undefined && issues.object(spec.env, ['spec', 'env'], new Set(['auth', 'passthrough'])) && spec.env.passthrough !== undefined) {
    issues.strings(spec.env.passthrough, ['spec', 'env', 'passthrough']);
  }
  if (spec.network !== undefined && issues.object(spec.network, ['spec', 'network'], new Set(['egress'])) && spec.network.egress !== undefined) {
    issues.strings(spec.network.egress, ['spec', 'network', 'egress']);
  }
  if (spec.mounts !== undefined && !Array.isArray(spec.mounts)) issues.type(['spec', 'mounts'], 'an array', spec.mounts);
  if (spec.lifecycle !== undefined && issues.object(spec.lifecycle, ['spec', 'lifecycle'], new Set(['pause_after_idle', 'destroy_on']))) {
    for (const key of ['pause_after_idle', 'destroy_on']) {
      const value = spec.lifecycle[key];
      if (value !== undefined && (typeof value !== 'string' || value === '')) issues.type(['spec', 'lifecycle', key], 'a non-empty string', value);
    }
    const idleMs = idleWindowMs(spec.lifecycle.pause_after_idle);
    const idleEvent = typeof spec.lifecycle.pause_after_idle === 'string' && /^idle-\d+$/.test(spec.lifecycle.pause_after_idle);
    if (idleEvent && !(idleMs >= 1000 && idleMs <= IDLE_WINDOW_MS_MAX)) {
      issues.add('invalid_value', ['spec', 'lifecycle', 'pause_after_idle'], `an idle window of 1 to ${Math.floor(IDLE_WINDOW_MS_MAX / 1000)} seconds`);
    }
  }
  if (spec.read_only !== undefined && typeof spec.read_only !== 'boolean') issues.type(['spec', 'read_only'], 'a boolean', spec.read_only);
  if (spec.metadata !== undefined && !isPlainObject(spec.metadata)) issues.type(['spec', 'metadata'], 'a plain object', spec.metadata);
}

/** `network.egress` as the request's network: [] isolated, ['*'] outbound, else an allowlist. */
function networkOf(spec) {
  const egress = spec.network?.egress ?? [];
  if (egress.length === 0) return { kind: 'isolated' };
  if (egress.length === 1 && egress[0] === '*') return { kind: 'outbound' };
  return { kind: 'allowlist', hosts: egress };
}

/** Where a request issue came from in the spec. */
function specPath(path) {
  const exact = REQUEST_FIELDS.get(path.join('.'));
  if (exact !== undefined) return exact;
  if (path[0] === 'policy' && path[1] === 'network' && path[2] === 'hosts') return ['spec', 'network', 'egress', ...path.slice(3)];
  return ['spec', ...path];
}

/** Issue paths of the request parser, as the spec fields they came from. */
const REQUEST_FIELDS = new Map([
  ['policy.resources.cpus', ['spec', 'config', 'cpus']],
  ['policy.resources.memoryBytes', ['spec', 'limits', 'memory_mb']],
  ['policy.resources.pids', ['spec', 'config', 'pids']],
]);

function requestOf(spec, network) {
  const memoryMb = spec.limits?.memory_mb ?? SPEC_DEFAULTS.memoryMb;
  const input = {
    policy: {
      resources: { cpus: spec.config.cpus ?? SPEC_DEFAULTS.cpus, memoryBytes: memoryMb * MIB, pids: spec.config.pids ?? SPEC_DEFAULTS.pids },
      temporaryStorage: { homeBytes: 64 * MIB, tempBytes: 64 * MIB },
      network,
      deadlines: { startupMs: 60_000, cleanupMs: 30_000 },
      transfers: SANDBOX_DEFAULT_TRANSFER_BUFFERS,
      // A daemon lives long: no total on its streams, and staging that holds the largest MCP
      // message the endpoint admits (4 MiB) several times over.
      streams: { maxBufferedInputBytes: 16 * MIB, maxBufferedOutputBytes: 16 * MIB, highWaterMark: 64 * 1024 },
      execution: { kind: 'until_stopped' },
    },
  };
  try {
    return parseSandboxRequest(input);
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    throw new SandboxValidationError(
      error.issues.map((issue) => ({ ...issue, path: specPath(issue.path) })),
    );
  }
}

/**
 * Reads `spec` for `boot` (`required`: image and daemon must be given) or `connect` (they may be
 * left out: the stored ones apply). Throws `SandboxValidationError`, `SandboxProviderError`
 * (`sandbox_read_only`) or `SandboxUnsupportedError`; warns once per call about per-command caps
 * it cannot enforce.
 */
export function readSandboxSpec(spec, { required }) {
  const issues = new Issues();
  readStructure(spec, issues, required);
  issues.throwIfAny();
  if (spec.read_only === true) {
    throw new SandboxProviderError('sandbox_read_only', 'spec.read_only is true: a read-only sandbox admits no command execution, and its daemon is one');
  }
  const network = networkOf(spec);
  if (spec.mounts !== undefined && spec.mounts.length > 0) {
    throw new SandboxUnsupportedError(`spec.mounts lists ${spec.mounts.length} mount(s); the Docker provider mounts nothing from the host (only [] is accepted)`);
  }
  // A host list becomes an allowlist (its hosts read strictly, a bad one a validation error
  // naming it), enforced by the sandbox's egress gateway; a backend that cannot enforce one
  // (gVisor) refuses it at reserve.
  const request = requestOf(spec, network);
  const unenforced = ['timeout_ms', 'cpu_ms'].filter((key) => spec.limits?.[key] !== undefined);
  if (unenforced.length > 0) {
    process.emitWarning(
      `spec.limits.${unenforced.join(' and spec.limits.')} are per-command caps in AIP-36; the Docker provider runs one long-lived daemon and cannot enforce them per command (accepted, not applied)`,
      { code: 'NATIVE_SANDBOX_AGENTPROTO_UNENFORCED_LIMIT' },
    );
  }
  return Object.freeze({
    image: spec.config.image,
    daemon: spec.config.daemon,
    request,
    idleMs: idleWindowMs(spec.lifecycle?.pause_after_idle),
  });
}

/** Reads `opts` (`SandboxBootOpts`): `env` a plain object of strings, `expose`, `keepAlive`. */
export function readBootOptions(opts) {
  const issues = new Issues();
  if (issues.object(opts, ['opts'], new Set(['env', 'expose', 'keepAlive']))) {
    if (!isPlainObject(opts.env)) issues.type(['opts', 'env'], 'a plain object of strings', opts.env);
    if (opts.expose !== undefined && opts.expose !== 'public' && opts.expose !== 'private') issues.add('invalid_value', ['opts', 'expose'], 'expected "public" or "private"');
    if (opts.keepAlive !== undefined && typeof opts.keepAlive !== 'boolean') issues.type(['opts', 'keepAlive'], 'a boolean', opts.keepAlive);
  }
  issues.throwIfAny();
  return Object.freeze({ env: opts.env, expose: opts.expose ?? 'public', keepAlive: opts.keepAlive === true });
}

/** The daemon's process recipe, checked by the Rust parser; issues name the spec or opts field. */
export function daemonRecipe(daemon, env) {
  const recipe = { executable: daemon.executable, args: daemon.args ?? [], env, cwd: daemon.cwd ?? DOCKER_SANDBOX_GUEST.workspace };
  try {
    return parseSandboxProcessSpec(recipe);
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    throw new SandboxValidationError(
      error.issues.map((issue) => ({
        ...issue,
        path: issue.path[0] === 'env' ? ['opts', ...issue.path] : ['spec', 'config', 'daemon', ...issue.path],
      })),
    );
  }
}
