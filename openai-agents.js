// native-sandbox/openai-agents: a SandboxClient of OpenAI Agents JS on this package's sandboxes.
// `@openai/agents-core` (which `@openai/agents` brings) is an optional peer dependency: this entry
// point fails at once, naming it, without it. Its modules are loaded here (an ES module import,
// so `require()` of this entry point is not supported).
import { SandboxUnsupportedError } from './js/errors.js';
import { openAiAgentsClientFactory } from './js/openai-agents.js';

let framework;
try {
  const [core, sandbox, internal] = await Promise.all([
    import('@openai/agents-core'),
    import('@openai/agents-core/sandbox'),
    import('@openai/agents-core/sandbox/internal'),
  ]);
  framework = { core, sandbox, internal };
} catch (cause) {
  if (cause?.code !== 'ERR_MODULE_NOT_FOUND') throw cause;
  const error = new SandboxUnsupportedError(
    "native-sandbox/openai-agents adapts sandboxes to OpenAI Agents JS, whose package '@openai/agents-core' is not installed here: add it beside native-sandbox (npm install @openai/agents@0.20)",
  );
  throw Object.assign(error, { cause });
}

export const createOpenAiAgentsSandboxClient = openAiAgentsClientFactory(framework);
