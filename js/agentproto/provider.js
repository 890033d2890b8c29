// createDockerSandboxProvider: the @agentproto/sandbox 0.2.1 `SandboxProvider` on this package's
// Docker sandboxes. A boot starts a sandbox, runs the spec's daemon as its one (reattachable)
// process and serves it as an MCP Streamable HTTP endpoint on loopback; connect finds the
// sandbox again, in this process or from its state file in a new one, proving ownership by
// reconciliation before it touches anything.
import { SandboxRunError, SandboxStartError, SandboxStateError, SandboxValidationError, errorFromDescriptor } from '../errors.js';
import { settle } from '../driver-port.js';
import { native } from '../native.js';
import { shared } from '../shared.js';
import { createDockerSandboxBackend, nativeRecoveredOf } from '../docker.js';
import { nativeTransfersOf } from '../owner.js';
import { processStreams, reserveProcess } from '../process.js';
import { SandboxProviderError } from './errors.js';
import { daemonRecipe, readBootOptions, readSandboxSpec } from './spec.js';
import { createToken } from './token.js';
import { ServedSandbox } from './served-sandbox.js';
import {
  checkSandboxId,
  checkStateDirectory,
  checkStateDirectoryPath,
  readState,
  removeState,
  writeState,
} from './state-store.js';

/** Sandboxes served in this process, by namespace and id, whichever provider serves them. */
const served = shared('agentprotoServed', () => new Map());
const keyOf = (namespace, sandboxId) => `${namespace}\n${sandboxId}`;

async function loadSdk() {
  try {
    const [http, types] = await Promise.all([
      import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
      import('@modelcontextprotocol/sdk/types.js'),
    ]);
    return { StreamableHTTPServerTransport: http.StreamableHTTPServerTransport, isInitializeRequest: types.isInitializeRequest };
  } catch (cause) {
    throw new SandboxProviderError(
      'sandbox_sdk_missing',
      'native-sandbox/agentproto serves MCP with @modelcontextprotocol/sdk 1.x, an optional peer dependency that is not installed here: add it beside native-sandbox',
      { cause },
    );
  }
}

/** A connect's spec may leave the image and daemon out; what it names must be what runs. */
function checkSameSandbox(sandboxId, read, running) {
  if (read.image !== undefined && read.image !== running.image && read.image !== running.imageId) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['spec', 'config', 'image'], message: `sandbox ${sandboxId} runs image ${running.image}, not ${read.image}` }]);
  }
  const named = (daemon) => JSON.stringify({ executable: daemon.executable, args: daemon.args ?? [], cwd: daemon.cwd ?? null });
  if (read.daemon !== undefined && named(read.daemon) !== named(running.daemon)) {
    throw new SandboxValidationError([{ code: 'invalid_value', path: ['spec', 'config', 'daemon'], message: `sandbox ${sandboxId} runs another daemon` }]);
  }
}

/** See agentproto.d.ts. */
/**
 * What one sandbox's state file says, and its writes: `fixed()` gives what never changes after the
 * record is known; a private connect may add a token, a private endpoint its port. A token is
 * known only once it is written (nobody is handed one the file does not hold); a port is set
 * before its write (a record persisted meanwhile writes it too) and put back if the write fails.
 */
function stateWriter(stateDirectory, fixed, { token, port }) {
  const stored = { token, port };
  const write = ({ token = stored.token } = {}) =>
    writeState(stateDirectory, {
      ...fixed(),
      expose: token === undefined ? 'public' : 'private',
      ...(token === undefined ? {} : { token }),
      ...(stored.port === undefined ? {} : { port: stored.port }),
    });
  const storeToken = async (next) => {
    await write({ token: next });
    stored.token = next;
  };
  const storePort = async (next) => {
    const previous = stored.port;
    stored.port = next;
    try {
      await write();
    } catch (error) {
      stored.port = previous;
      throw error;
    }
  };
  return { stored, write: () => write(), storeToken, storePort };
}

export function createDockerSandboxProvider(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SandboxValidationError([{ code: 'invalid_type', path: [], message: 'expected the provider options object' }]);
  }
  const { stateDirectory, ...dockerOptions } = options;
  if (Object.hasOwn(options, 'image')) {
    throw new SandboxValidationError([{ code: 'unknown_field', path: ['image'], message: "the provider takes no image: each spec names its own (spec.config.image)" }]);
  }
  checkStateDirectoryPath(stateDirectory);
  // The Docker options are checked now, as createDockerSandboxBackend checks them; the image
  // comes from each spec.
  settle(native.parseDockerOptions({ ...dockerOptions, image: `sha256:${'0'.repeat(64)}` }), { owner: undefined, errors: undefined }, errorFromDescriptor);
  const { namespace } = dockerOptions;
  const backends = new Map();
  const backendFor = (image) => {
    let backend = backends.get(image);
    if (backend === undefined) {
      backend = createDockerSandboxBackend({ ...dockerOptions, image });
      backends.set(image, backend);
    }
    return backend;
  };
  let directoryChecked;
  const ready = async () => {
    directoryChecked ??= checkStateDirectory(stateDirectory).catch((error) => {
      directoryChecked = undefined;
      throw error;
    });
    await directoryChecked;
    return loadSdk();
  };

  async function boot(spec, opts) {
    const read = readSandboxSpec(spec, { required: true });
    const bootOptions = readBootOptions(opts);
    const recipe = daemonRecipe(read.daemon, bootOptions.env);
    const sdk = await ready();
    const token = bootOptions.expose === 'private' ? createToken() : undefined;
    // What the state file says; a later private connect may add a token, a private endpoint its port.
    let record;
    const file = stateWriter(stateDirectory, () => ({ namespace, sandboxId: record.sandboxId, image: read.image, daemon: read.daemon, request: read.request, record }), { token });
    const reservation = backendFor(read.image).reserve(read.request, {
      kind: 'persisted',
      persist: (next) => {
        record = next;
        return file.write();
      },
    });
    const sandboxId = reservation.id;
    let sandbox;
    // Once anything may exist on the engine, a failed boot leaves nothing: the sandbox is
    // destroyed and its state file removed before the error is thrown.
    const cleanUp = async (error) => {
      const started = sandbox ?? (error instanceof SandboxStartError ? error.owner : reservation);
      const owner = Object.freeze({
        destroy: async () => {
          await started.destroy();
          await removeState(stateDirectory, sandboxId);
        },
      });
      try {
        await owner.destroy();
      } catch (cleanupError) {
        throw new SandboxRunError({ primaryError: error, cleanupError, owner });
      }
      throw error;
    };
    try {
      sandbox = await reservation.start();
      const live = nativeTransfersOf(sandbox);
      const daemon = reserveProcess({
        owner: live.owner,
        spec: recipe,
        context: live.context,
        limits: read.request.policy.streams,
        stopSandbox: () => sandbox.stop(),
        reattachable: true,
      });
      const streams = await daemon.start();
      const entry = new ServedSandbox({
        sandboxId,
        sdk,
        streams,
        readyMs: read.request.policy.deadlines.startupMs,
        control: {
          freeze: async (paused) => settle(await live.owner.freezeSandbox(paused), live.context, errorFromDescriptor),
          storePort: file.storePort,
          destroy: () => sandbox.destroy(),
          forget: async () => {
            served.delete(keyOf(namespace, sandboxId));
            await removeState(stateDirectory, sandboxId);
          },
        },
      });
      served.set(
        keyOf(namespace, sandboxId),
        Promise.resolve({
          entry,
          image: read.image,
          imageId: sandbox.recoveryRecord.imageDigest,
          daemon: read.daemon,
          token: () => file.stored.token,
          storeToken: file.storeToken,
        }),
      );
      return await entry.serve({ token, idleMs: bootOptions.keepAlive ? undefined : read.idleMs, booting: true });
    } catch (error) {
      served.delete(keyOf(namespace, sandboxId));
      return cleanUp(error);
    }
  }

  /** The served sandbox for `state`, found again on the engine and attached to. */
  async function recover(state, sdk) {
    const { sandboxId } = state;
    const backend = backendFor(state.record.imageDigest);
    const reconciled = await backend.reconcile(state.record);
    if (reconciled.kind === 'absent') {
      await removeState(stateDirectory, sandboxId);
      throw new SandboxProviderError('sandbox_not_found', `sandbox ${sandboxId} no longer exists on the engine; its state file was removed`, { sandboxId });
    }
    if (reconciled.kind === 'conflict') {
      throw new SandboxProviderError('sandbox_foreign', `sandbox ${sandboxId} cannot be proven this provider's: ${reconciled.reason}; nothing was touched`, { sandboxId });
    }
    const owner = reconciled.owner;
    const recovered = nativeRecoveredOf(owner);
    const context = { owner, errors: undefined };
    const gone = (why, cause) =>
      new SandboxProviderError('sandbox_daemon_gone', `the daemon of sandbox ${sandboxId} cannot be served again: ${why}; the sandbox stays owned (its state file is kept: a reconcile of the record in it removes the sandbox)`, { sandboxId, cause });
    if (reconciled.kind === 'uncertain') throw gone('the sandbox never finished booting');
    // The engine attaches only to a running process: a paused one is resumed first.
    const port = recovered.processPort();
    try {
      settle(await recovered.freeze(false), context, errorFromDescriptor);
      settle(await port.attach(state.request), context, errorFromDescriptor);
    } catch (cause) {
      // A process that ended or was not started reattachable is the engine's state; anything
      // else (an unreachable engine, a deadline) is not a verdict on the daemon.
      if (cause instanceof SandboxStateError) throw gone(cause.message, cause);
      throw cause;
    }
    const streams = processStreams({ owner: port, context, limits: state.request.policy.streams, stopSandbox: () => owner.stop(), sandboxId, openStdin: true });
    // What the state file says from here; a private connect may add a token, a private endpoint its port.
    const file = stateWriter(stateDirectory, () => ({ namespace, sandboxId, image: state.image, daemon: state.daemon, request: state.request, record: state.record }), { token: state.token, port: state.port });
    const entry = new ServedSandbox({
      sandboxId,
      sdk,
      streams,
      port: state.port,
      token: state.token,
      readyMs: state.request.policy.deadlines.startupMs,
      control: {
        freeze: async (paused) => settle(await recovered.freeze(paused), context, errorFromDescriptor),
        storePort: file.storePort,
        destroy: async () => {
          await owner.destroy();
          await port.detach();
        },
        forget: async () => {
          served.delete(keyOf(namespace, sandboxId));
          await removeState(stateDirectory, sandboxId);
        },
      },
    });
    return {
      entry,
      image: state.image,
      imageId: state.record.imageDigest,
      daemon: state.daemon,
      token: () => file.stored.token,
      storeToken: file.storeToken,
    };
  }

  async function connect(sandboxId, spec, opts) {
    checkSandboxId(sandboxId);
    const read = readSandboxSpec(spec, { required: false });
    const bootOptions = readBootOptions(opts);
    const sdk = await ready();
    const key = keyOf(namespace, sandboxId);
    let pending = served.get(key);
    if (pending === undefined) {
      pending = (async () => {
        const state = await readState(stateDirectory, sandboxId, namespace);
        // A spec that names another image or daemon is refused before anything is touched.
        checkSameSandbox(sandboxId, read, { image: state.image, imageId: state.record.imageDigest, daemon: state.daemon });
        return recover(state, sdk);
      })();
      served.set(key, pending);
      pending.catch(() => {
        if (served.get(key) === pending) served.delete(key);
      });
    }
    const found = await pending;
    checkSameSandbox(sandboxId, read, found);
    let token;
    if (bootOptions.expose === 'private') {
      token = found.token();
      if (token === undefined) {
        // A sandbox booted public gets its token now, stored before anyone is handed it; every
        // connect that asks meanwhile gets the same one.
        found.storing ??= (async () => {
          const fresh = createToken();
          await found.storeToken(fresh);
          return fresh;
        })().finally(() => {
          found.storing = undefined;
        });
        token = await found.storing;
      }
    }
    return found.entry.serve({ token, idleMs: bootOptions.keepAlive ? undefined : read.idleMs });
  }

  return Object.freeze({ boot, connect });
}
