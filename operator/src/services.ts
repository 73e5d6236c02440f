/**
 * Headless Services for service invocation on a cluster: for every app id that has pods annotated
 * `rt.io/enabled` (or `dapr.io/enabled`) and labelled `rt.io/app-id` by the injector, a Service
 * `<app-id>-rt` in the pods' namespace (clusterIP None, selector rt.io/app-id) with the sidecar's
 * ports, so cluster DNS answers `<app-id>-rt.<ns>.svc.<domain>` with the pods' addresses. It goes
 * with the last such pod. Level-triggered: every key is worked out from the caches (pods, and the
 * Services labelled as ours), so a missed event, a restart or a hand edit converges the same way.
 * No owner references: a Service outlives each of its pods, and its workload can change (a
 * Deployment and a StatefulSet of one app id); the operator removes it instead.
 */
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ANNOTATIONS, injectionRequested, parseAnnotations } from '../../injector/src/index.ts';
import { ApiError, type KubeClient } from '../../shared/kube/client.ts';
import { WorkQueue } from './queue.ts';
import type { Watched } from '../../shared/kube/watched.ts';

export const APP_ID_LABEL = 'rt.io/app-id';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'rt-operator';
export const SERVICE_SUFFIX = '-rt';
/** The sidecars' internal invocation port (sidecar/src/invoke/resolve.ts); not configurable per pod. */
export const INTERNAL_PORT = 50002;

/** A Service name is a DNS-1035 label: lowercase letters, digits and '-', starting with a letter, at most 63. */
const DNS_1035 = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The Service of an app id, or undefined when `<app-id>-rt` cannot name one (see docs/kubernetes.md). */
export function serviceName(appId: string): string | undefined {
  const name = `${appId}${SERVICE_SUFFIX}`;
  return DNS_1035.test(name) ? name : undefined;
}

/** The app id a pod's Service selects it by, when the pod is one of a Service's. */
function appIdOf(pod: k8s.V1Pod): string | undefined {
  const md = pod.metadata;
  const id = md?.labels?.[APP_ID_LABEL];
  if (!id || !injectionRequested(md?.annotations ?? {})) return undefined;
  // a finished pod (a Job's) takes no calls
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return undefined;
  return id;
}

/** The Service for these pods: the sidecar ports of the newest one (they agree outside a rollout). */
export function desiredService(namespace: string, appId: string, pods: k8s.V1Pod[]): k8s.V1Service {
  const newest = [...pods].sort((a, b) => String(b.metadata?.creationTimestamp ?? '').localeCompare(String(a.metadata?.creationTimestamp ?? '')))[0];
  const { config } = parseAnnotations(newest?.metadata?.annotations ?? {});
  const port = (name: string, n: number) => ({ name, port: n, targetPort: n, protocol: 'TCP' });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: serviceName(appId), namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [APP_ID_LABEL]: appId } },
    spec: {
      clusterIP: 'None',
      selector: { [APP_ID_LABEL]: appId },
      ports: [
        port('http', config.httpPort ?? ANNOTATIONS.httpPort.fallback),
        port('grpc', config.grpcPort ?? ANNOTATIONS.grpcPort.fallback),
        port('internal', INTERNAL_PORT),
        port('metrics', config.metricsPort ?? ANNOTATIONS.metricsPort.fallback),
      ],
    },
  };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const portsOf = (s: k8s.V1Service | undefined) => (s?.spec?.ports ?? []).map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol ?? 'TCP' }));

export class ServiceReconciler {
  private readonly client: KubeClient;
  private readonly pods: Watched<k8s.V1Pod>;
  private readonly services: Watched<k8s.V1Service>;
  private readonly log: Logger;
  private readonly canWrite: () => boolean;
  private readonly queue: WorkQueue;
  /** Pods (uid) and Services (ns/name) already warned about, so a resync does not repeat it. */
  private readonly warned = new Set<string>();

  constructor(client: KubeClient, pods: Watched<k8s.V1Pod>, services: Watched<k8s.V1Service>, log: Logger, canWrite: () => boolean) {
    this.client = client;
    this.pods = pods;
    this.services = services;
    this.log = log.child({ scope: 'services' });
    this.canWrite = canWrite;
    this.queue = new WorkQueue((key) => this.reconcile(key), 4);
  }

  /** A pod changed: its app id, and every app id with a Service in its namespace (its label may have changed). */
  onPod(pod: k8s.V1Pod): void {
    const ns = pod.metadata?.namespace ?? '';
    const id = appIdOf(pod);
    if (id) this.queue.add(`${ns}/${id}`);
    this.warnUnnamed(pod);
    for (const s of this.services.list(ns)) this.onService(s);
  }

  onService(s: k8s.V1Service): void {
    const id = s.metadata?.labels?.[APP_ID_LABEL];
    if (id && s.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY) this.queue.add(`${s.metadata.namespace}/${id}`);
  }

  /** Every key again (at start, and when this replica becomes the leader). */
  resync(): void {
    for (const p of this.pods.list()) this.onPod(p);
    for (const s of this.services.list()) this.onService(s);
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  stop(): void {
    this.queue.stop();
  }

  private async reconcile(key: string): Promise<void> {
    if (!this.canWrite()) return;
    const [ns, appId] = key.split('/');
    const name = serviceName(appId);
    if (!name) return;
    const pods = this.pods.list(ns).filter((p) => appIdOf(p) === appId);
    const have = this.services.get(name, ns);
    const base = `/api/v1/namespaces/${encodeURIComponent(ns)}/services`;
    try {
      if (pods.length === 0) {
        if (!have) return;
        await this.client.delete(`${base}/${name}`, { preconditions: { uid: have.metadata?.uid } });
        this.log.info({ service: `${ns}/${name}` }, `headless Service removed: no pod of app "${appId}" is left`);
        return;
      }
      const want = desiredService(ns, appId, pods);
      if (!have) {
        await this.client.create(base, want);
        this.log.info({ service: `${ns}/${name}` }, `headless Service created for app "${appId}"`);
      } else if (!same(have.spec?.selector, want.spec!.selector) || !same(portsOf(have), portsOf(want)) || have.spec?.clusterIP !== 'None') {
        // clusterIP cannot change in place: a Service someone turned into a ClusterIP one is made again
        if (have.spec?.clusterIP !== 'None') {
          await this.client.delete(`${base}/${name}`, { preconditions: { uid: have.metadata?.uid } });
          await this.client.create(base, want);
        } else {
          await this.client.mergePatch(`${base}/${name}`, { spec: { selector: want.spec!.selector, ports: want.spec!.ports } });
        }
        this.log.info({ service: `${ns}/${name}` }, `headless Service of app "${appId}" updated`);
      }
    } catch (e) {
      if (e instanceof ApiError && e.code === 404) return; // gone meanwhile: nothing to remove
      if (e instanceof ApiError && e.code === 409 && e.reason === 'AlreadyExists') return this.foreign(ns, name, appId);
      this.log.warn({ service: `${ns}/${name}` }, `reconciling the headless Service failed, will retry: ${(e as Error).message}`);
      throw e;
    }
  }

  /** A Service of that name exists and is not ours (we only watch ours): left alone, said once. */
  private async foreign(ns: string, name: string, appId: string): Promise<void> {
    const s = await this.client.get<k8s.V1Service>(`/api/v1/namespaces/${encodeURIComponent(ns)}/services/${name}`).catch(() => undefined);
    if (!s || s.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY || this.warned.has(`${ns}/${name}`)) return;
    this.warned.add(`${ns}/${name}`);
    this.log.warn({ service: `${ns}/${name}` }, `a Service ${name} that rt operator does not manage exists: left alone, so other apps' calls to "${appId}" go wherever it points`);
  }

  private warnUnnamed(pod: k8s.V1Pod): void {
    const md = pod.metadata;
    const id = md?.annotations?.[APP_ID_LABEL];
    if (!md?.uid || !id || this.warned.has(md.uid) || !injectionRequested(md.annotations ?? {})) return;
    if (md.labels?.[APP_ID_LABEL] === id && serviceName(id)) return;
    if (!md.labels?.[APP_ID_LABEL] && !pod.spec?.containers?.some((c) => c.name === 'rt-sidecar')) return; // the watchdog's case
    this.warned.add(md.uid);
    const why = serviceName(id) ? `it has no ${APP_ID_LABEL}: ${id} label (injected by an older injector? restart it)` : `"${id}-rt" is not a valid Service name (lowercase letters, digits and '-', starting with a letter, at most 60 characters before "-rt")`;
    this.log.warn({ pod: `${md.namespace}/${md.name}` }, `no headless Service for app "${id}": ${why}; other sidecars cannot reach it through cluster DNS`);
  }
}
