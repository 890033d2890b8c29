// native-sandbox/node: explicit host directory import/export and spill storage.
export { createSandboxSpillStore, exportSandboxDirectory, importSandboxDirectory, SandboxDirectoryCleanupError } from './js/node-helpers.js';
