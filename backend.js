// native-sandbox/backend: drive a backend written in JavaScript with the shared Rust owner.
export { createSandboxBackend } from './js/backend.js';
