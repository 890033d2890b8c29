// A running sandbox's workspace as one tar archive, both ways, for the adapters (what an agent
// framework calls persisting and hydrating a workspace). The work is native
// (src/transfer/workspace_archive): the archive is read through the export path and written
// through the import path as a transfer beside the running commands, its limits and every
// member judged there. This file finds the sandbox's native owner and carries the call.
import { errorFromDescriptor, SandboxUnsupportedError, SandboxValidationError, withSignalReason } from './errors.js';
import { native } from './native.js';
import { settle } from './driver-port.js';
import { onAbort } from './options.js';
import { startedOwnerOf } from './owner.js';

/**
 * The workspace of `sandbox` (started, its stop not begun) as a tar archive: directories and
 * regular files, links, devices and FIFOs left out, and the workspace-relative paths of
 * `exclude` with all below them. `archiveLimits` (`{ maxInputBytes, maxExtractedBytes,
 * maxMembers }`, each a positive integer or null; null for none) bound it.
 */
export async function persistWorkspaceArchive(sandbox, { exclude, archiveLimits, signal } = {}) {
  return withArchive(sandbox, signal, async (call, outcomeOf) => {
    const result = await call.persist({ ...(exclude === undefined ? {} : { exclude }), archiveLimits: archiveLimits ?? null });
    return Buffer.isBuffer(result) ? result : outcomeOf(result);
  });
}

/**
 * Replaces the workspace's contents with the members of the tar archive `archive` (a Uint8Array,
 * copied at once: the caller may reuse it when this returns), judged whole against
 * `archiveLimits` first: a refused archive leaves the workspace as it was. Resolves the
 * import's summary.
 */
export async function hydrateWorkspaceArchive(sandbox, archive, { archiveLimits, signal } = {}) {
  return withArchive(sandbox, signal, async (call, outcomeOf) => {
    outcomeOf(call.prepareHydrate(archive, { archiveLimits: archiveLimits ?? null }));
    return outcomeOf(await call.hydrate());
  });
}

/**
 * Judges workspace archive options (`{ archiveLimits, exclude }`) before any sandbox is used:
 * a `SandboxValidationError` naming the field (`archiveLimits.maxMembers`, ...).
 */
export function checkWorkspaceArchiveOptions(options) {
  const checked = native.checkWorkspaceArchiveOptions(options);
  if (!checked.ok) throw new SandboxValidationError(checked.issues);
}

async function withArchive(sandbox, signal, body) {
  const face = startedOwnerOf(sandbox);
  if (face === undefined) throw new SandboxUnsupportedError("workspace archives need a sandbox of this package's backends");
  const { owner, context } = face;
  const call = owner.workspaceArchive();
  const detach = onAbort(signal, () => call.abort());
  try {
    return await body(call, (outcome) => settle(outcome, context, errorFromDescriptor));
  } catch (error) {
    throw withSignalReason(error, signal);
  } finally {
    detach();
  }
}
