// native-sandbox/acp: put one native ACP agent process inside a sandbox.
export { createSandboxAcpIntegration } from './js/acp.js';
