// native-sandbox/mastra: a Mastra WorkspaceSandbox on this package's sandboxes. `@mastra/core` is
// an optional peer dependency: this entry point fails at once, naming it, without it. Its classes
// are loaded here (an ES module import, so `require()` of this entry point is not supported).
import { SandboxUnsupportedError } from './js/errors.js';
import { mastraSandboxFactory } from './js/mastra.js';

let workspace;
try {
  workspace = await import('@mastra/core/workspace');
} catch (cause) {
  if (cause?.code !== 'ERR_MODULE_NOT_FOUND') throw cause;
  const error = new SandboxUnsupportedError(
    "native-sandbox/mastra adapts sandboxes to Mastra, whose package '@mastra/core' is not installed here: add it beside native-sandbox (npm install @mastra/core@1)",
  );
  throw Object.assign(error, { cause });
}

export const createMastraSandbox = mastraSandboxFactory(workspace);
