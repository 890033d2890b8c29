// The docs run as written: the README's Quick start and every recipe of docs/recipes.md are
// extracted from their code blocks and run as they are, each in an empty project where only the
// packages it names are installed (linked), against the engine; each leaves nothing behind. And
// no relative link of the README or docs/ is dead (files and heading anchors).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { leftovers, NOTHING } from './docker-helpers.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const recipesPage = readFileSync(join(root, 'docs', 'recipes.md'), 'utf8');

/** The fenced `js` blocks of `markdown` whose first line is `marker` + a name, by name. */
function blocks(markdown, marker) {
  const found = new Map();
  for (const [, body] of markdown.matchAll(/```js\n([\s\S]*?)```/g)) {
    const first = body.split('\n')[0];
    if (first.startsWith(marker)) found.set(first.slice(marker.length).trim(), body);
  }
  return found;
}

// `busybox` is what the docs ask a user to pull; with no registry here, the project's busybox
// guest image stands in for it when the engine has none (and the tag goes again afterwards).
let taggedBusybox = false;
before(() => {
  try {
    execFileSync('docker', ['image', 'inspect', 'busybox'], { stdio: 'ignore' });
  } catch {
    execFileSync('docker', ['tag', 'native-sandbox/busybox:1', 'busybox:latest']);
    taggedBusybox = true;
  }
});
after(() => {
  const tags = ['quickstart-busybox:1', 'recipes-busybox:1', ...(taggedBusybox ? ['busybox:latest'] : [])];
  for (const tag of tags) {
    try {
      execFileSync('docker', ['rmi', tag], { stdio: 'ignore' });
    } catch {
      // Not made (a test that failed before its prepare).
    }
  }
});

/** An empty project with only `links` installed (name → path), and `file` holding `source`. */
function project(source, links) {
  const dir = mkdtempSync(join(tmpdir(), 'native-sandbox-docs-'));
  for (const [name, target] of Object.entries(links)) {
    const at = join(dir, 'node_modules', name);
    mkdirSync(dirname(at), { recursive: true });
    symlinkSync(target, at, 'dir');
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'docs-check', private: true }));
  writeFileSync(join(dir, 'program.mjs'), source);
  return dir;
}

/**
 * Runs `program.mjs` of `dir` (with `nodeArgs`); `interrupt`: a stdout text after which the
 * program gets SIGINT. Resolves its exit code and output; fails after two minutes.
 */
function run(dir, { nodeArgs = [], interrupt, env = {} } = {}) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, 'program.mjs'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`not done within 120 s:\n${stdout}\n${stderr}`));
    }, 120_000);
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (interrupt && !interrupted && stdout.includes(interrupt)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

const installed = { 'native-sandbox': root };

test('the README Quick start runs as written in an empty project, in at most 40 lines, and leaves nothing', async () => {
  const quickstart = blocks(readme, '// ').get('quickstart.mjs');
  assert.ok(quickstart, 'the README has the quickstart.mjs block');
  assert.ok(quickstart.trimEnd().split('\n').length <= 40, 'at most 40 lines');
  const dir = project(quickstart, installed);
  try {
    const before = new Set(readdirSync(tmpdir()).filter((name) => name.startsWith('quickstart-')));
    const { code, stdout, stderr } = await run(dir);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /\[ 'hello from the host\\n', 'done\\n', \{ kind: 'exited', code: 0 \} \]/);
    assert.match(stdout, /size\.txt: 20/);
    assert.deepEqual(leftovers('quickstart'), NOTHING);
    const made = readdirSync(tmpdir()).filter((name) => name.startsWith('quickstart-') && !before.has(name));
    assert.deepEqual(made, [], 'its host directory is removed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README's no-registry note builds a busybox the Quick start can prepare and run", async () => {
  const [, body] = readme.match(/```sh\n# no-registry busybox\n([\s\S]*?)```/) ?? [];
  assert.ok(body, 'the README has the no-registry busybox block');
  const tag = `native-sandbox-no-registry-${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), 'no-registry-'));
  try {
    // As written, with this test's own tag instead of `busybox` (which the other tests use).
    const script = body.replaceAll('docker build -t busybox ', `docker build -t ${tag} `);
    assert.notEqual(script, body, 'the block builds the busybox tag');
    execFileSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    assert.equal(existsSync(join(dir, 'busybox-image')), false, 'the block removes its build directory');
    const { prepareDockerSandboxImage } = await import('native-sandbox/docker');
    const { image } = await prepareDockerSandboxImage({ from: tag, tag: `${tag}-prepared:1` });
    const out = execFileSync('docker', ['run', '--rm', '--network', 'none', image, '/bin/sh', '-c', 'echo "$(ls /bin | wc -l) applets"'], { encoding: 'utf8' });
    assert.match(out, /^\d{3} applets$/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    execFileSync('docker', ['image', 'rm', '-f', tag, `${tag}-prepared:1`], { stdio: 'ignore' });
  }
});

/** What each recipe must print, and what else it needs. */
const RECIPES = {
  'command-with-timeout': { expect: [/^"started\\n" timed out$/m] },
  'one-file-out': { expect: [/^out\/report\.txt: \S+/m] },
  'ctrl-c': { interrupt: 'running; press Ctrl-C', status: 130, expect: [/^stopped: cancelled \(got SIGINT\); the sandbox is destroyed$/m] },
  'long-lived-agent': { expect: [/agent: done with parse/, /agent: done with write/, /^exit: \{ kind: 'exited', code: 0 \}$/m] },
  'several-steps': { expect: [/output: \[ '1', '2', '3' \], status: 0/, /output: \[ '3' \], status: 0/, /status: [12] \}/, /^exit: \{ kind: 'exited', code: 0 \}$/m] },
  'several-commands': {
    expect: [
      /^lines: 2 \{ kind: 'exited', code: 0 \}$/m,
      /^sorted: "a\\nb\\nc\\n"$/m,
      /^background: started \{ kind: 'exited', code: 0 \}$/m,
      /^deadline: deadline_exceeded$/m,
      /^exec: "got one\\ngot two\\n" \{ kind: 'exited', code: 0 \}$/m,
      /^listing: \[ \{ name: 'todo\.txt', kind: 'file' \} \]$/m,
      /^absent: null$/m,
    ],
  },
  'warm-pool': {
    expect: [/^first task \{ kind: 'exited', code: 0 \}$/m, /^second task \{ kind: 'exited', code: 0 \}$/m, /^third task \{ kind: 'exited', code: 0 \}$/m, /^pool closed, ready: 0$/m],
  },
  'recover-after-crash': { expect: [/controller: started sbx-\S+, now crashing/, /recovery: sbx-\S+ is matched/, /recovery: destroyed/] },
  'swap-in': {
    links: { '@agen-ai/sandbox': root, '@agen-ai/sandbox-docker': join(root, 'packages', 'docker') },
    // As npm installs the aliases: each package's own dependencies next to it, not in this repository.
    nodeArgs: ['--preserve-symlinks'],
    env: { SANDBOX_IMAGE: 'native-sandbox/busybox:1' },
    expect: [/ran and destroyed sbx-\S+ through the original's package names/],
  },
  'agentproto-mcp': {
    links: { '@modelcontextprotocol': join(root, 'node_modules', '@modelcontextprotocol') },
    expect: [/tools: .*read_file/, /read back: hello/],
  },
  'ai-sdk': {
    links: { ai: join(root, 'node_modules', 'ai'), zod: join(root, 'node_modules', 'zod') },
    expect: [/^writeFile "wrote hello\.py"$/m, /^shell \{"exitCode":0,"stdout":"22 hello\.py\\n65532\\n","stderr":""\}$/m, /^answer: The file is written\.$/m],
  },
  mastra: {
    links: { '@mastra': join(root, 'node_modules', '@mastra') },
    expect: [/^tool: "13 answer\.py\\n65532\\n"$/m, /^answer: answer\.py is written\.$/m],
  },
  'openai-agents': {
    links: { '@openai': join(root, 'node_modules', '@openai'), zod: join(root, 'node_modules', 'zod') },
    expect: [/^tool: "Process exited with code 0\\nOutput:\\nwrite answer\.py\\nprint\(6 \* 7\)\\n12 answer\.py\\n65532\\n"$/m, /^answer: answer\.py is written\.$/m],
  },
  'acp-agent': {
    links: { '@agentclientprotocol': join(root, 'node_modules', '@agentclientprotocol') },
    expect: [/^turn ended: \w+$/m, /^the agent wrote \S+/m],
  },
};

test('docs/recipes.md holds every recipe its table of contents promises, each under its heading', () => {
  const contents = [...recipesPage.matchAll(/^- \[[^\]]+\]\(#([^)]+)\)$/gm)].map((m) => m[1]);
  const sections = recipesPage.split(/^## /m).slice(1);
  assert.deepEqual(contents, sections.map((section) => slug(section.split('\n')[0])), 'the list names every section, in order');
  const coded = sections.filter((section) => section.includes('// recipe:'));
  assert.equal(coded.length, contents.length, 'every section holds a recipe');
  assert.deepEqual([...blocks(recipesPage, '// recipe:').keys()].sort(), Object.keys(RECIPES).sort());
});

for (const [name, { links = {}, nodeArgs, interrupt, env, expect, status = 0 }] of Object.entries(RECIPES)) {
  test(`recipe ${name} runs as written and leaves nothing`, async () => {
    const source = blocks(recipesPage, '// recipe:').get(name);
    assert.ok(source, `docs/recipes.md has the ${name} block`);
    const dir = project(source, { ...installed, ...links });
    try {
      const { code, stdout, stderr } = await run(dir, { nodeArgs, interrupt, env });
      assert.equal(code, status, `${stdout}\n${stderr}`);
      for (const pattern of expect) assert.match(stdout, pattern);
      assert.deepEqual(leftovers('recipes'), NOTHING);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('recipe ctrl-c, interrupted while its sandbox starts: the start fails as cancelled, status 130, nothing left', async () => {
  const dir = project(blocks(recipesPage, '// recipe:').get('ctrl-c'), installed);
  try {
    const { code, stdout, stderr } = await run(dir, { interrupt: 'starting a sandbox' });
    assert.equal(code, 130, `${stdout}\n${stderr}`);
    assert.match(stdout, /^stopped: cancelled \(got SIGINT\); the sandbox is destroyed$/m);
    assert.doesNotMatch(stdout, /running; press Ctrl-C/, 'the signal came while the sandbox started');
    assert.deepEqual(leftovers('recipes'), NOTHING);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

test('no relative link of the README or docs/ is dead (files and anchors)', () => {
  const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];
  const anchorsOf = (file) => new Set([...readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').matchAll(/^#+ (.+)$/gm)].map((m) => slug(m[1])));
  const dead = [];
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#');
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
      if (!existsSync(file)) dead.push(`${page}: ${target} (no such file)`);
      else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(anchor)) dead.push(`${page}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(dead, []);
});

test("the Docker page's egress section says early how to reach your own test servers, in parts a reader can scan", () => {
  const page = readFileSync(join(root, 'docs', 'docker.md'), 'utf8');
  const section = page.slice(page.indexOf('## Egress by hostname'), page.indexOf('\n## ', page.indexOf('## Egress by hostname') + 1));
  const opening = section.split('\n### ')[0];
  assert.match(opening, /egress\.network/, 'the opening names egress.network');
  assert.match(opening, /embedded\s+DNS/);
  const parts = section.split('\n### ').slice(1);
  assert.ok(parts.length >= 8, `${parts.length} parts`);
  for (const part of parts) assert.ok(part.split('\n').length <= 40, `${part.split('\n')[0]}: ${part.split('\n').length} lines`);
});

test('the README is at most 250 lines', () => {
  assert.ok(readme.split('\n').length <= 250, `${readme.split('\n').length} lines`);
});
