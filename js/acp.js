// createSandboxAcpIntegration: one native ACP connection whose agent process runs inside an
// explicitly started sandbox. No ACP package is imported here; the host brings its own.
import { SandboxStateError } from './errors.js';
import { keepsStdinOpen } from './stall-warnings.js';

/** See acp.d.ts. */
export function createSandboxAcpIntegration(sandbox) {
  let reserved = false;
  const executionBoundary = Object.freeze({
    reserve(launch) {
      if (reserved) throw new SandboxStateError('Sandbox ACP integration admits one native connection.');
      reserved = true;
      const process = sandbox.reserveProcess({ executable: launch?.executable, args: launch?.args, env: launch?.env, cwd: launch?.cwd });
      return Object.freeze({
        async start(context) {
          const { stdin, stdout, stderr } = await process.start(context?.signal === undefined ? undefined : { signal: context.signal });
          // The conversation holds stdin open between turns: a quiet agent is no stall.
          keepsStdinOpen(stdin);
          return Object.freeze({ stdin, stdout, stderr });
        },
        async release() {
          await sandbox.stop();
        },
      });
    },
  });
  return Object.freeze({ executionBoundary, host: Object.freeze({}) });
}
