// native-sandbox/docker: one hardened container per sandbox process on a Docker engine.
export { createDockerSandboxBackend, dockerSandboxEgress, dockerSandboxRuntime, DOCKER_SANDBOX_GUEST, prepareDockerSandboxImage } from './js/docker.js';
