// The options of a framework adapter (native-sandbox/mastra, native-sandbox/openai-agents), read
// strictly: every issue names its field under `options`, and an unknown field is refused, since no
// adapter option widens the sandbox's policy.
import { SandboxValidationError } from './errors.js';

/** A `SandboxValidationError` of one issue at `path`. */
export function invalid(path, code, message) {
  return new SandboxValidationError([{ code, path, message }]);
}

/**
 * Starts reading `options`, whose fields may be `names`: throws unless it is a plain object, and
 * gives `check(ok, field, message)`, which adds an issue when `ok` is false, and `done()`, which
 * throws every issue found (unknown fields first) as one `SandboxValidationError`.
 */
export function readAdapterOptions(options, names) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw invalid(['options'], 'invalid_type', 'options must be an object');
  const issues = Object.keys(options)
    .filter((name) => !names.includes(name))
    .map((name) => ({ code: 'unknown_field', path: ['options', name], message: `unknown option ${name}: the sandbox's policy is its request's, and no option widens it` }));
  return {
    check(ok, field, message) {
      if (!ok) issues.push({ code: 'invalid_value', path: ['options', field], message });
    },
    done() {
      if (issues.length > 0) throw new SandboxValidationError(issues);
    },
  };
}

/** Whether `env` is a plain object of strings (an adapter's environment overlay). */
export function isStringRecord(env) {
  return env !== null && typeof env === 'object' && !Array.isArray(env) && Object.values(env).every((v) => typeof v === 'string');
}
