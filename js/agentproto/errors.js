// The agentproto provider's own error: a refusal or a lost sandbox, with a `code` a host can act
// on. Defined once per process (shared.js), so every installed copy throws the same class.
import { shared } from '../shared.js';

export const SandboxProviderError = shared('SandboxProviderError', () => {
  class SandboxProviderError extends Error {
    /**
     * @param {string} code `sandbox_read_only`, `sandbox_not_found`, `sandbox_foreign`,
     *   `sandbox_daemon_gone`, `sandbox_state_invalid`, `sandbox_sdk_missing` or
     *   `sandbox_port_taken`.
     */
    constructor(code, message, options) {
      super(message, options);
      this.name = 'SandboxProviderError';
      this.code = code;
      if (options?.sandboxId !== undefined) this.sandboxId = options.sandboxId;
    }
  }
  return SandboxProviderError;
});
