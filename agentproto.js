// native-sandbox/agentproto: the @agentproto/sandbox 0.2.1 provider contract on Docker sandboxes,
// each daemon served as a (optionally token-gated) MCP Streamable HTTP endpoint on loopback.
// @modelcontextprotocol/sdk, an optional peer dependency, is loaded only when a sandbox is served.
export { createDockerSandboxProvider } from './js/agentproto/provider.js';
export { resolveLifecyclePolicy } from './js/agentproto/lifecycle.js';
export { SandboxProviderError } from './js/agentproto/errors.js';
