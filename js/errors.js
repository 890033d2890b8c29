// The error classes of the contract. Every class is a real Error subclass with its own name.

export class SandboxOperationError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'SandboxOperationError';
    this.code = code;
  }
}

/** Renders an issue path as `policy.resources.cpus` or `args[3]`. */
export function renderIssuePath(path) {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out === '' ? '(input)' : out;
}

const SHOWN_ISSUES = 5;

export class SandboxValidationError extends Error {
  constructor(issues) {
    const list = Array.from(issues ?? [], (issue) =>
      Object.freeze({
        code: String(issue.code),
        path: Object.freeze(Array.from(issue.path ?? [])),
        message: String(issue.message),
      }),
    );
    const shown = list.slice(0, SHOWN_ISSUES).map((issue) => `${renderIssuePath(issue.path)}: ${issue.message} (${issue.code})`);
    const more = list.length > SHOWN_ISSUES ? `; and ${list.length - SHOWN_ISSUES} more` : '';
    super(list.length === 0 ? 'Invalid sandbox input' : `Invalid sandbox input: ${shown.join('; ')}${more}`);
    this.name = 'SandboxValidationError';
    this.issues = Object.freeze(list);
  }
}

export class SandboxUnsupportedError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SandboxUnsupportedError';
  }
}

export class SandboxStateError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SandboxStateError';
  }
}

export class SandboxCleanupError extends Error {
  constructor(message, options) {
    super(message, { cause: options?.cause });
    if (options?.operation !== 'stop' && options?.operation !== 'destroy') {
      throw new TypeError("SandboxCleanupError: operation must be 'stop' or 'destroy'");
    }
    this.name = 'SandboxCleanupError';
    this.owner = options.owner;
    this.operation = options.operation;
  }

  /** Retries the exact cleanup that failed, on the same owner. */
  retryCleanup() {
    return this.owner[this.operation]();
  }
}

export class SandboxStartError extends Error {
  constructor(message, options) {
    super(message, { cause: options?.cause });
    this.name = 'SandboxStartError';
    this.owner = options?.owner;
  }
}

export class SandboxRunError extends Error {
  constructor(options) {
    super('Sandbox operation and cleanup both failed', { cause: options?.primaryError });
    this.name = 'SandboxRunError';
    this.primaryError = options?.primaryError;
    this.cleanupError = options?.cleanupError;
    this.owner = options?.owner;
  }

  /** Retries destruction on the same owner; the original errors stay as they were. */
  retryCleanup() {
    return this.owner.destroy();
  }
}
