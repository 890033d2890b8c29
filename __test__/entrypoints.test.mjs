// Every entry point of the exports map imports as ESM, exposes exactly what is built, and the
// root has no dependency on ACP packages.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const ROOT_EXPORTS = [
  'SANDBOX_DEFAULT_STREAM_LIMITS',
  'SANDBOX_DEFAULT_TRANSFER_BUFFERS',
  'SANDBOX_LIMITS',
  'SandboxCleanupError',
  'SandboxOperationError',
  'SandboxRunError',
  'SandboxStartError',
  'SandboxStateError',
  'SandboxUnsupportedError',
  'SandboxValidationError',
  'TransferBody',
  'assertSandboxEffectivePolicy',
  'assertSandboxRequestSupported',
  'parseSandboxEffectivePolicy',
  'parseSandboxGuestPath',
  'parseSandboxId',
  'parseSandboxProcessId',
  'parseSandboxProcessSpec',
  'parseSandboxRecoveryPolicy',
  'parseSandboxRecoveryRecord',
  'parseSandboxRelativePath',
  'parseSandboxRequest',
  'parseSandboxSupport',
  'parseTransferOptions',
  'withSandbox',
  'createSandboxPool',
  'fileFromBytes',
];

test('the package imports itself by name, root and every subpath', async () => {
  const root = await import('native-sandbox');
  assert.deepEqual(Object.keys(root).sort(), [...ROOT_EXPORTS].sort());
  const built = { backend: ['createSandboxBackend'], node: ['SandboxDirectoryCleanupError', 'createSandboxSpillStore', 'exportSandboxDirectory', 'importSandboxDirectory'], acp: ['createSandboxAcpIntegration'], docker: ['DOCKER_SANDBOX_GUEST', 'createDockerSandboxBackend', 'dockerSandboxEgress', 'dockerSandboxRuntime', 'prepareDockerSandboxImage'], kubernetes: ['KUBERNETES_SANDBOX_GUEST', 'createKubernetesSandboxBackend'], conformance: ['runSandboxConformance'], agentproto: ['SandboxProviderError', 'createDockerSandboxProvider', 'resolveLifecyclePolicy'], 'ai-sdk': ['createAiSdkSandbox'] };
  // Mastra (an ES module entry point, loading the framework at import) needs Node.js 22.13 or later.
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 13)) built.mastra = ['createMastraSandbox'];
  for (const [subpath, names] of Object.entries(built)) {
    const module = await import(`native-sandbox/${subpath}`);
    assert.deepEqual(Object.keys(module).sort(), names, subpath);
  }
});

test('the exports map lists the entry points of the contract, the adapters\' frameworks optional peers', () => {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.deepEqual(Object.keys(manifest.exports).filter((k) => k !== './package.json'), ['.', './backend', './node', './acp', './docker', './kubernetes', './conformance', './agentproto', './ai-sdk', './mastra', './openai-agents']);
  assert.equal(manifest.peerDependenciesMeta['@modelcontextprotocol/sdk'].optional, true);
  assert.match(manifest.peerDependencies['@modelcontextprotocol/sdk'], /^\^1\./);
  assert.equal(manifest.peerDependenciesMeta.ai.optional, true);
  assert.match(manifest.peerDependencies.ai, /^\^7\./);
  assert.equal(manifest.peerDependenciesMeta['@mastra/core'].optional, true);
  assert.match(manifest.peerDependencies['@mastra/core'], /^\^1\./);
  assert.equal(manifest.peerDependenciesMeta['@openai/agents-core'].optional, true);
  assert.match(manifest.peerDependencies['@openai/agents-core'], /^~0\.20\./);
  for (const framework of ['ai', '@mastra/core', '@openai/agents-core']) assert.equal(manifest.dependencies?.[framework], undefined, 'installing native-sandbox alone pulls no framework');
  assert.equal(manifest.type, 'module');
  assert.equal(manifest.engines.node, '>=20');
  const platform = JSON.parse(readFileSync(new URL('../npm/linux-x64-gnu/package.json', import.meta.url), 'utf8'));
  assert.equal(manifest.optionalDependencies[platform.name], platform.version);
  assert.equal(platform.version, manifest.version);
});

test('constants are the published values, frozen', async () => {
  const { SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_LIMITS } = await import('native-sandbox');
  assert.deepEqual(SANDBOX_DEFAULT_TRANSFER_BUFFERS, { chunkBytes: 65536, metadataBatchBytes: 65536, mergeFanIn: 8 });
  assert.deepEqual(Object.keys(SANDBOX_DEFAULT_STREAM_LIMITS).sort(), ['highWaterMark', 'maxBufferedInputBytes', 'maxBufferedOutputBytes']);
  assert.equal(SANDBOX_LIMITS.startupMs, 60_000);
  assert.equal(SANDBOX_LIMITS.cleanupMs, 30_000);
  assert.equal(SANDBOX_LIMITS.processRecipeBytes, 256 * 1024);
  assert.equal(SANDBOX_LIMITS.recoveryRecordBytes, 64 * 1024);
  for (const constant of [SANDBOX_DEFAULT_TRANSFER_BUFFERS, SANDBOX_DEFAULT_STREAM_LIMITS, SANDBOX_LIMITS]) {
    assert.ok(Object.isFrozen(constant));
  }
});

test('the native addon is loaded through the package loader, not from target/', async () => {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  await import('native-sandbox');
  const loaded = Object.keys(require.cache).filter((file) => file.endsWith('.node'));
  assert.equal(loaded.length, 1, `one addon loaded: ${loaded}`);
  assert.doesNotMatch(loaded[0], /\/target\//);
});

test('the root entry point does not reach ACP packages', () => {
  const sources = ['../index.js', '../js/parsers.js', '../js/errors.js', '../js/constants.js', '../js/native.js', '../js/freeze.js', '../js/with-sandbox.js', '../js/bytes.js'];
  for (const source of sources) {
    const text = readFileSync(new URL(source, import.meta.url), 'utf8');
    assert.doesNotMatch(text, /acp|agentclientprotocol/i, source);
  }
});

test('the MCP SDK is loaded only when the agentproto provider serves a sandbox', () => {
  const rootSources = ['../index.js', '../js/parsers.js', '../js/errors.js', '../js/constants.js', '../js/native.js', '../js/freeze.js', '../js/with-sandbox.js', '../js/bytes.js'];
  for (const source of rootSources) {
    assert.doesNotMatch(readFileSync(new URL(source, import.meta.url), 'utf8'), /modelcontextprotocol/, source);
  }
  // In the agentproto entry, only dynamic imports reach it.
  for (const source of ['../agentproto.js', ...readdirSync(new URL('../js/agentproto/', import.meta.url)).map((f) => `../js/agentproto/${f}`)]) {
    const text = readFileSync(new URL(source, import.meta.url), 'utf8');
    assert.doesNotMatch(text, /^import [^;]*modelcontextprotocol/m, source);
  }
});

test('require() of every entry point gives the same module as import (Node 20.19+ and 22.12+)', async () => {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  for (const entry of ['native-sandbox', 'native-sandbox/backend', 'native-sandbox/node', 'native-sandbox/acp', 'native-sandbox/docker', 'native-sandbox/kubernetes', 'native-sandbox/conformance', 'native-sandbox/agentproto', 'native-sandbox/ai-sdk']) {
    const required = require(entry);
    const imported = await import(entry);
    assert.deepEqual(Object.keys(required).sort(), Object.keys(imported).sort(), entry);
    for (const name of Object.keys(imported)) assert.equal(required[name], imported[name], `${entry} ${name} is the same object`);
  }
  const { SandboxValidationError, parseSandboxId } = require('native-sandbox');
  assert.throws(() => parseSandboxId(''), SandboxValidationError);
});
