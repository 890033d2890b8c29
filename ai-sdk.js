// native-sandbox/ai-sdk: a started sandbox as the `experimental_sandbox` session of the AI SDK 7
// (`ai`, an optional peer dependency: this entry point fails at once, naming it, without it).
import { SandboxUnsupportedError } from './js/errors.js';

try {
  import.meta.resolve('ai');
} catch (cause) {
  const error = new SandboxUnsupportedError(
    "native-sandbox/ai-sdk adapts sandboxes to the AI SDK 7, whose package 'ai' is not installed here: add it beside native-sandbox (npm install ai@7)",
  );
  throw Object.assign(error, { cause });
}

export { createAiSdkSandbox } from './js/ai-sdk.js';
