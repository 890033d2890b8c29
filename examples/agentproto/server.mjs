// An MCP server on stdio, the daemon an agentproto spec names: tools that write and read files of
// the workspace (its working directory), read a value of its environment, sleep with progress,
// and ask the host's model (a request from the daemon to the client). It runs inside the
// sandbox (the Node.js guest image carries it with the MCP SDK at /opt/mcp).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const workspace = process.cwd();
const inWorkspace = (path) => {
  const full = resolve(workspace, path);
  if (full !== workspace && !full.startsWith(workspace + sep)) throw new Error(`${path} is outside the workspace`);
  return full;
};
const text = (value) => ({ content: [{ type: 'text', text: value }] });

const server = new McpServer({ name: 'native-sandbox-example-daemon', version: '1.0.0' });
server.registerTool(
  'write_file',
  { description: 'Writes a text file of the workspace', inputSchema: { path: z.string(), content: z.string() } },
  async ({ path, content }) => {
    const full = inWorkspace(path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, content);
    return text(`wrote ${Buffer.byteLength(content)} bytes to ${path}`);
  },
);
server.registerTool(
  'read_file',
  { description: 'Reads a text file of the workspace', inputSchema: { path: z.string() } },
  async ({ path }) => text(await readFile(inWorkspace(path), 'utf8')),
);
server.registerTool(
  'read_env',
  { description: 'Reads a value of the daemon environment', inputSchema: { name: z.string() } },
  async ({ name }) => text(process.env[name] ?? ''),
);
server.registerTool(
  'sleep',
  { description: 'Answers after the given milliseconds, reporting progress on the way', inputSchema: { ms: z.number().int().min(0).max(60_000) } },
  async ({ ms }, extra) => {
    const token = extra._meta?.progressToken;
    if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: 0, total: 1 } });
    await new Promise((done) => setTimeout(done, ms));
    return text(`slept ${ms} ms`);
  },
);
server.registerTool(
  'ask_host',
  { description: "Asks the host's model a question (MCP sampling) and returns its answer", inputSchema: { question: z.string() } },
  async ({ question }) => {
    try {
      const answer = await server.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: question } }], maxTokens: 64 });
      return text(answer.content.type === 'text' ? answer.content.text : `(${answer.content.type})`);
    } catch (error) {
      return { content: [{ type: 'text', text: `the host could not answer: ${error.message}` }], isError: true };
    }
  },
);
await server.connect(new StdioServerTransport());
