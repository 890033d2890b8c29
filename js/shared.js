// One runtime per process and version, however many copies of the package npm installed. An npm
// alias (`"@agen-ai/sandbox": "npm:native-sandbox@…"`) beside the Docker companion package (which
// depends on `native-sandbox` itself) installs this package twice; both copies must behave as
// one: the native addon is loaded once, the error classes are the same objects (so `instanceof`
// holds across copies), and the registry of native sandboxes is one map. The first copy to load
// creates each piece; every later copy of the same version takes it from here.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { version } = require('../package.json');
const REGISTRY = Symbol.for(`native-sandbox.runtime@${version}`);

/** The process-wide piece `name`, created by the first copy that asks for it. */
export function shared(name, create) {
  const registry = (globalThis[REGISTRY] ??= Object.create(null));
  if (!Object.hasOwn(registry, name)) registry[name] = create();
  return registry[name];
}
