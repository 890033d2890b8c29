// The contract's constants, read once from the core so both sides share one definition.
import { deepFreeze } from './freeze.js';
import { native } from './native.js';

export const SANDBOX_DEFAULT_TRANSFER_BUFFERS = deepFreeze(native.defaultTransferBuffers());
export const SANDBOX_DEFAULT_STREAM_LIMITS = deepFreeze(native.defaultStreamLimits());
export const SANDBOX_LIMITS = deepFreeze(native.sandboxLimits());
