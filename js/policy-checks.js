// The original's public policy assertions, over the same checks the owner applies.
import { errorFromDescriptor } from './errors.js';
import { settle } from './driver-port.js';
import { native } from './native.js';
import { parseSandboxEffectivePolicy, parseSandboxRequest, parseSandboxSupport } from './parsers.js';

const noOwner = { owner: undefined, errors: undefined };

/** Throws `SandboxUnsupportedError` when `support` cannot enforce `request` (see index.d.ts). */
export function assertSandboxRequestSupported(request, support) {
  settle(native.checkSupported(parseSandboxRequest(request), parseSandboxSupport(support)), noOwner, errorFromDescriptor);
}

/** Throws `SandboxUnsupportedError` when `effective` is looser than `request` (see index.d.ts). */
export function assertSandboxEffectivePolicy(request, effective) {
  settle(native.checkEffective(parseSandboxRequest(request), parseSandboxEffectivePolicy(effective)), noOwner, errorFromDescriptor);
}
