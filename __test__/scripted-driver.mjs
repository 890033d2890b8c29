// A JavaScript backend driver whose every step can be told to succeed, fail, hang or wait: the
// stand-in for a backend author's driver that the createSandboxBackend seam exists for.
import { setTimeout as sleep } from 'node:timers/promises';

export const DIGEST = (c) => `sha256:${c.repeat(64)}`;

export const SUPPORT = Object.freeze({
  backendId: 'scripted',
  backendRevision: '1',
  network: ['isolated', 'outbound'],
  execution: ['until_stopped', 'deadline'],
  workspaceDiskQuota: false,
});

export function policy(deadlines = { startupMs: 2_000, cleanupMs: 1_000 }) {
  return {
    policy: {
      resources: { cpus: 1, memoryBytes: 64 * 1024 * 1024, pids: 32 },
      temporaryStorage: { homeBytes: 1024 * 1024, tempBytes: 1024 * 1024 },
      network: { kind: 'isolated' },
      deadlines,
      transfers: { chunkBytes: 65536, metadataBatchBytes: 65536, mergeFanIn: 8 },
      streams: { maxBufferedInputBytes: 65536, maxBufferedOutputBytes: 65536, highWaterMark: 16384 },
    },
  };
}

export function initialRecord(id, support = SUPPORT) {
  return {
    format: 'agenai.sandbox-recovery.v2',
    backendId: support.backendId,
    backendRevision: support.backendRevision,
    namespace: 'tests',
    operationId: `op-${id}`,
    sandboxId: id,
    imageDigest: DIGEST('a'),
    policyDigest: DIGEST('b'),
    configurationDigest: DIGEST('c'),
    phase: 'reserved',
    authority: { kind: 'unverified' },
    resources: [{ role: 'compute', name: `${id}-compute`, identity: { kind: 'planned' } }],
  };
}

/** A step: 'ok', 'fail', 'hang', or { delay: ms } (then ok), or { fail: Error }. */
async function perform(step, signal, label) {
  if (step === undefined || step === 'ok') return;
  if (step === 'fail') throw new Error(`${label} failed by script`);
  if (step.fail) throw step.fail;
  if (step === 'hang') {
    await new Promise((_, reject) => {
      if (signal) signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }
  if (step.delay !== undefined) await sleep(step.delay);
}

/**
 * `script.start | stop | destroy`: arrays of steps consumed per call (missing: ok).
 * `script.checkpoints(record)`: records to checkpoint during start, before the "effect".
 * `script.effective(request)`: the effective policy to report.
 * `script.reconcile(record, options)`: the reconciliation result.
 */
export function scriptedDriver(script = {}) {
  const log = [];
  const queues = { start: [...(script.start ?? [])], stop: [...(script.stop ?? [])], destroy: [...(script.destroy ?? [])] };
  let count = 0;
  const signals = [];
  const driver = {
    support: script.support ?? SUPPORT,
    reserve(request) {
      count += 1;
      const id = `sbx-${count}`;
      const recoveryRecord = script.initialRecord?.(id) ?? initialRecord(id);
      log.push(`reserve ${id}`);
      return {
        id,
        recoveryRecord,
        async start({ signal, checkpoint }) {
          log.push(`start ${id}`);
          signals.push(signal);
          for (const next of script.checkpoints?.(recoveryRecord) ?? []) await checkpoint(next);
          await perform(queues.start.shift(), signal, 'start');
          return {
            effective: script.effective?.(request) ?? {
              resources: request.policy.resources,
              temporaryStorage: request.policy.temporaryStorage,
              network: request.policy.network,
              workspaceDiskQuota: { kind: 'not_requested' },
            },
            workspace: '/sandbox/workspace',
          };
        },
        async stop() {
          log.push(`stop ${id}`);
          await perform(queues.stop.shift(), undefined, 'stop');
        },
        async destroy() {
          log.push(`destroy ${id}`);
          await perform(queues.destroy.shift(), undefined, 'destroy');
        },
      };
    },
    async reconcile(record, options) {
      log.push(`reconcile ${record.sandboxId}`);
      return script.reconcile(record, options);
    },
  };
  return { driver, log, signals };
}
