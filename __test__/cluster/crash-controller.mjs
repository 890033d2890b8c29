// A controller of the crash suite (kubernetes-recovery.test.mjs): starts one Kubernetes sandbox
// with persisted records (each written to the record file), works it to the phase asked, prints
// that phase's name and waits to be killed. Pinned at `starting` by a persist that never settles
// once the pod is identified (the owner waits on it, so the kill finds it exactly there); at
// `stopping`, the name is printed as the stop begins and the kill lands while it runs.
import { writeFileSync } from 'node:fs';
import { createKubernetesSandboxBackend, KUBERNETES_SANDBOX_GUEST } from 'native-sandbox/kubernetes';
import { IMAGE, request } from '../docker-helpers.mjs';
import { KUBECONFIG, NAMESPACE } from './cluster.mjs';

const [scope, recordFile, phase] = process.argv.slice(2);
const sh = (script) => ({ executable: '/bin/sh', args: ['-c', script], env: {}, cwd: KUBERNETES_SANDBOX_GUEST.workspace });
const pinned = (record) => phase === 'starting' && record.phase === 'starting' && record.resources.find((r) => r.role === 'compute').identity.kind === 'identified';
const persist = async (record) => {
  writeFileSync(recordFile, JSON.stringify(record));
  if (pinned(record)) {
    console.log(phase);
    await new Promise(() => {});
  }
};
const backend = await createKubernetesSandboxBackend({ kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 });
const asked = request((policy) => {
  policy.resources.pids = 256;
  policy.resources.cpus = 0.25;
  policy.network = { kind: 'outbound' };
  // The contract's longest: a cluster slow to take up pods is not the crash under test.
  policy.deadlines.startupMs = 60_000;
});
const sandbox = await backend.reserve(asked, { kind: 'persisted', persist }).start();
if (phase === 'importing') {
  // A file whose body never ends: the import is in flight when the controller dies.
  const body = async function* () {
    for (let i = 0; i < 4; i += 1) yield new Uint8Array(64 * 1024);
    console.log('importing');
    await new Promise(() => {});
  };
  await sandbox.importTree([{ kind: 'file', path: 'endless.bin', byteLength: 1024 * 1024 * 1024, executable: false, open: body }]);
}
const process_ = await sandbox.reserveProcess(sh('sleep 600')).start();
process_.stdin.end();
for (let i = 0; i < 3; i += 1) await sandbox.exec(sh('sleep 600 & sleep 600'), { stdin: false });
if (phase === 'running') console.log('running');
if (phase === 'stopping') {
  const stopping = sandbox.stop();
  console.log('stopping');
  await stopping;
}
setInterval(() => {}, 1000);
