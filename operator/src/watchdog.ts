/**
 * Pods that ask for injection (the injector's own reading of the annotations: `rt.io/enabled` or
 * `dapr.io/enabled`, "true"/"yes"/"1"…) without an `rt-sidecar` container were created while the
 * injector was down. The watchdog reports each as a Warning Event on the pod; with
 * --watchdog-delete-uninjected it deletes those a controller owns (so they come back injected),
 * at most one per `deleteIntervalMs`.
 */
import type * as k8s from '@kubernetes/client-node';
import { injectionRequested } from '../../injector/src/index.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { Logger } from 'pino';

export const SIDECAR_CONTAINER = 'rt-sidecar';

export function uninjected(pod: k8s.V1Pod): boolean {
  // the injector's table, so a pod it would inject never slips past here
  if (!injectionRequested(pod.metadata?.annotations ?? {}) || pod.metadata?.deletionTimestamp) return false;
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  return !containers.some((c) => c.name === SIDECAR_CONTAINER);
}

export class Watchdog {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly deleteUninjected: boolean;
  private readonly deleteIntervalMs: number;
  private readonly reported = new Set<string>();
  /** Sidecar runs already reported as failed: pod uid / restart count / finish time. */
  private readonly failed = new Set<string>();
  private readonly deleteQueue: k8s.V1Pod[] = [];
  private deleteTimer: NodeJS.Timeout | undefined;
  private lastDelete = 0;
  /** Only the leader reports and deletes (leader.ts); a new leader looks at every pod again. */
  private readonly canWrite: () => boolean;

  constructor(client: KubeClient, log: Logger, deleteUninjected: boolean, deleteIntervalMs = 1000, canWrite: () => boolean = () => true) {
    this.client = client;
    this.canWrite = canWrite;
    this.log = log.child({ scope: 'watchdog' });
    this.deleteUninjected = deleteUninjected;
    this.deleteIntervalMs = deleteIntervalMs;
  }

  /**
   * A sidecar that stopped with an error: its termination message (what it wrote to
   * /dev/termination-log, else its last log lines) becomes a Warning Event `SidecarFailed` on the
   * pod, once per run that failed, so `kubectl describe pod` says why a pod waits in
   * PodInitializing without anyone reading the sidecar's log.
   */
  private async sidecarFailed(pod: k8s.V1Pod): Promise<void> {
    const uid = pod.metadata?.uid;
    const status = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].find((c) => c.name === SIDECAR_CONTAINER);
    const ended = status?.state?.terminated ?? status?.lastState?.terminated;
    if (!uid || !status || !ended || ended.exitCode === 0 || !this.canWrite()) return;
    const key = `${uid}/${status.restartCount}/${ended.finishedAt ?? ''}`;
    if (this.failed.has(key)) return;
    this.failed.add(key);
    const ns = pod.metadata!.namespace!;
    const why = (ended.message ?? '').trim() || `exit code ${ended.exitCode}${ended.reason ? ` (${ended.reason})` : ''}`;
    const message = `${SIDECAR_CONTAINER} stopped (exit code ${ended.exitCode}, restart ${status.restartCount}): ${why}`.slice(0, 1024);
    this.log.warn({ pod: `${ns}/${pod.metadata!.name}` }, message);
    await this.event(pod, message, 'SidecarFailed').catch((e: Error) => this.log.warn({ pod: `${ns}/${pod.metadata!.name}` }, `could not write the Event: ${e.message}`));
  }

  async observe(pod: k8s.V1Pod): Promise<void> {
    await this.sidecarFailed(pod);
    const uid = pod.metadata?.uid;
    if (!uid || !uninjected(pod) || this.reported.has(uid) || !this.canWrite()) return;
    this.reported.add(uid);
    const ns = pod.metadata!.namespace!;
    const name = pod.metadata!.name!;
    const owner = pod.metadata!.ownerReferences?.find((o) => o.controller);
    const action = !this.deleteUninjected
      ? 'run with --watchdog-delete-uninjected to have such pods recreated'
      : owner
        ? `deleting it so its ${owner.kind} ${owner.name} recreates it with the sidecar`
        : 'no controller owns it, so it is not deleted: recreate it yourself';
    const message = `pod has rt.io/enabled: "true" but no ${SIDECAR_CONTAINER} container (was the injector down when it was created?); ${action}`;
    this.log.warn({ pod: `${ns}/${name}` }, message);
    await this.event(pod, message).catch((e: Error) => this.log.warn({ pod: `${ns}/${name}` }, `could not write the Event: ${e.message}`));
    if (this.deleteUninjected && owner) {
      this.deleteQueue.push(pod);
      this.pumpDeletes();
    }
  }

  forget(pod: k8s.V1Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    this.reported.delete(uid);
    for (const k of this.failed) if (k.startsWith(`${uid}/`)) this.failed.delete(k);
  }

  stop(): void {
    clearTimeout(this.deleteTimer);
    this.deleteQueue.length = 0;
  }

  private event(pod: k8s.V1Pod, message: string, reason = 'SidecarNotInjected'): Promise<unknown> {
    const now = new Date();
    const ns = pod.metadata!.namespace!;
    return this.client.create(`/api/v1/namespaces/${encodeURIComponent(ns)}/events`, {
      metadata: { generateName: `${pod.metadata!.name}.rt-`, namespace: ns },
      involvedObject: { kind: 'Pod', apiVersion: 'v1', name: pod.metadata!.name, namespace: ns, uid: pod.metadata!.uid },
      reason,
      type: 'Warning',
      message,
      source: { component: 'rt-operator' },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  }

  /** Rate limit: one deletion per interval, so a mass of uninjected pods is not deleted at once. */
  private pumpDeletes(): void {
    if (this.deleteTimer || this.deleteQueue.length === 0) return;
    const wait = Math.max(0, this.lastDelete + this.deleteIntervalMs - Date.now());
    this.deleteTimer = setTimeout(() => {
      this.deleteTimer = undefined;
      const pod = this.deleteQueue.shift();
      if (!pod) return;
      this.lastDelete = Date.now();
      const ns = pod.metadata!.namespace!;
      const name = pod.metadata!.name!;
      this.client
        .delete(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`, { preconditions: { uid: pod.metadata!.uid } })
        .then(
          () => this.log.info({ pod: `${ns}/${name}` }, 'uninjected pod deleted'),
          (e: Error) => this.log.warn({ pod: `${ns}/${name}` }, `deleting the uninjected pod failed: ${e.message}`),
        )
        .finally(() => this.pumpDeletes());
    }, wait);
  }
}
