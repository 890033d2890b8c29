// The conformance suite, sessions included, against the Kubernetes backend on the test cluster
// (runc), with the census of every kind of object a scope could hold.
import { runSandboxConformance } from 'native-sandbox/conformance';
import { createKubernetesSandboxBackend } from 'native-sandbox/kubernetes';
import { IMAGE } from '../docker-helpers.mjs';
import { census, KUBECONFIG, NAMESPACE, scopeFor } from './cluster.mjs';

const scope = scopeFor('c');

runSandboxConformance({
  name: 'Kubernetes backend (runc)',
  createBackend: () => createKubernetesSandboxBackend({ kubeconfig: KUBECONFIG, namespace: NAMESPACE, scope, image: IMAGE, imagePullPolicy: 'Never', podPidsLimit: 256 }),
  guest: { shell: '/bin/sh' },
  census: () => Object.entries(census(scope)).flatMap(([kind, names]) => names.map((name) => `${kind} ${name}`)),
});
