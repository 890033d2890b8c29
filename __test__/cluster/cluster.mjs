// What the cluster suites share: where the test cluster's kubeconfig and kubectl are, a scope of
// their own for each suite, and the census of what a scope still holds in the cluster.
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { RUN } from '../docker-helpers.mjs';

export const KUBECONFIG = process.env.NATIVE_SANDBOX_KUBECONFIG ?? new URL('../../target/cluster/run/admin.kubeconfig', import.meta.url).pathname;
export const KUBECTL = process.env.NATIVE_SANDBOX_KUBECTL ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'native-sandbox/cluster/bin/kubectl');
export const NAMESPACE = 'default';

/** A scope for one suite of this run: a DNS label of at most 37 characters. */
export const scopeFor = (prefix) => `${prefix}${RUN}`.toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, 30);

export function kubectl(...args) {
  return execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], { encoding: 'utf8' });
}

/** Every object of `scope` still in the cluster, by kind. */
export function census(scope) {
  const selector = `native-sandbox.dev/scope=${scope}`;
  const names = (kind) => kubectl('get', kind, '-n', NAMESPACE, '-l', selector, '-o', 'name').split('\n').filter(Boolean);
  return { pods: names('pods'), networkpolicies: names('networkpolicies'), persistentvolumeclaims: names('persistentvolumeclaims'), secrets: names('secrets'), configmaps: names('configmaps') };
}
export const EMPTY = { pods: [], networkpolicies: [], persistentvolumeclaims: [], secrets: [], configmaps: [] };

/** Deletes whatever `scope` still holds (after a failed test, so that it does not hold the node's room for the next). */
export function sweep(scope) {
  kubectl('delete', 'pods,networkpolicies', '-n', NAMESPACE, '-l', `native-sandbox.dev/scope=${scope}`, '--grace-period=0', '--force', '--ignore-not-found', '--wait=true');
}
