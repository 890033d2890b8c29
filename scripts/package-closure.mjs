// Prints, one per line, the packages a package needs at run time (itself, its dependencies and
// theirs, and its non-optional peers), as installed at the top of this project's node_modules.
// The guest image build copies exactly these.
import { readFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');
const seen = new Set();
const queue = process.argv.slice(2);
while (queue.length > 0) {
  const name = queue.shift();
  if (seen.has(name)) continue;
  const manifest = join(root, name, 'package.json');
  if (!existsSync(manifest)) {
    console.error(`package-closure: ${name} is not installed at the top of node_modules`);
    process.exit(1);
  }
  seen.add(name);
  const { dependencies = {}, peerDependencies = {}, peerDependenciesMeta = {} } = JSON.parse(readFileSync(manifest, 'utf8'));
  queue.push(...Object.keys(dependencies));
  queue.push(...Object.keys(peerDependencies).filter((peer) => peerDependenciesMeta[peer]?.optional !== true && existsSync(join(root, peer))));
}
console.log([...seen].sort().join('\n'));
