/**
 * vitest global setup, once per run:
 * - starts the servers the suites share (a private Redis and PostgreSQL) unless the environment
 *   already names them (RT_TEST_REDIS_URL, RT_TEST_POSTGRES_URL); the URLs go into process.env,
 *   which the test workers inherit;
 * - builds the Kubernetes binaries and unpacks kubectl/helm into their cache when they are
 *   missing, before any suite needs them (minutes on a fresh machine, nothing after that); the
 *   same for Jaeger, the tracing suites' trace backend (test/services/jaeger/binary.ts).
 * - gives the run an RT_HOME of its own (removed at the end): sidecars that a suite starts without
 *   --data-dir, or kills before they remove their registry entry, write there and not into the
 *   user's ~/.rt.
 * - first removes what runs killed before their teardown left in the temp folder (temp-sweep.ts).
 * A server or build that fails is reported here; the suites that need it then fail under
 * CI=true (requireService) or skip on a laptop.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSharedServices } from './shared-services.ts';
import { markOwner, sweepTempLeftovers } from './temp-sweep.ts';

export default async function setup(): Promise<() => Promise<void>> {
  // names this run's cluster folders (read when kube/control-plane.ts loads, so set it first)
  process.env.RT_TEST_RUN_ID ??= randomBytes(4).toString('hex');
  // the servers' folders and RT_HOMEs of runs that were killed before their teardown
  sweepTempLeftovers((s) => console.warn(`[services] ${s}`));
  const home = mkdtempSync(join(tmpdir(), 'rt-test-home-'));
  markOwner(home);
  process.env.RT_HOME = home;
  const { ensureKubeBinaries, ensureKubectlAndHelm, kubeUnavailable } = await import('./kube.ts');
  const { sweepKubeLeftovers } = await import('./kube/sweep.ts');
  const { ensureJaeger, jaegerUnavailable } = await import('./jaeger/binary.ts');
  const services = await startSharedServices();
  const builds: Array<Promise<void>> = [];
  if (!kubeUnavailable()) {
    builds.push(Promise.all([ensureKubeBinaries((s) => console.log(`[kube] ${s}`)), ensureKubectlAndHelm()]).then(
      () => {},
      (e: Error) => console.warn(`[kube] ${e.message}`),
    ));
  }
  if (!jaegerUnavailable()) {
    builds.push(ensureJaeger((s) => console.log(`[jaeger] ${s}`)).then(
      () => {},
      (e: Error) => console.warn(`[jaeger] ${e.message}`),
    ));
  }
  await Promise.all(builds);
  return async () => {
    await services.stop();
    rmSync(home, { recursive: true, force: true });
    // a suite that died halfway must not leave a cluster or a Docker engine running for the next run
    await sweepKubeLeftovers((s) => console.warn(`[kube] ${s}`));
    const { stopDockerIfUnused } = await import('./docker.ts');
    if (await stopDockerIfUnused()) console.warn('[docker] stopped an engine that no suite stopped');
  };
}
