/**
 * `rt operator`: watches Components, Configurations, Subscriptions, HTTPEndpoints (rt.io), Secrets
 * and Pods; writes each Component's Ready condition and observedGeneration; serves every connected
 * sidecar the resources of its app over gRPC (TLS), sending a new snapshot whenever its namespace
 * changes; and runs the watchdog for pods the injector missed.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { RESOURCE_GROUPS } from '../../crds/validate.ts';
import { RESOURCE_KINDS, type ComponentObject, type Condition, type RtResourceObject } from '../../crds/types.ts';
import { checkComponent } from './check.ts';
import { type Caller, IdentityChecker, IdentityError } from './identity.ts';
import { CertificateIssuer, DEFAULT_TRUST_DOMAIN, type IssuerOptions } from './issuer.ts';
import { caService } from '../../sidecar/src/index.ts';
import { verifiedPeerCertificate } from '../../shared/grpc-server-credentials.ts';
import { startGrpcServer, type GrpcServerCredentialsOptions, type StartedGrpcServer } from '../../shared/grpc-server.ts';
import { certificateWorkload } from '../../shared/spiffe.ts';
import { operatorService, type ResourceSnapshot, type WatchResourcesRequest } from './proto.ts';
import { loadInCluster, loadKubeconfig } from '../../shared/kube/config.ts';
import { LeaderElector } from './leader.ts';
import { PCR_API, PodCertificateSigner } from './pod-certificates.ts';
import { ApiError, KubeClient, NotLeaderError } from '../../shared/kube/client.ts';
import { WorkQueue } from './queue.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, ServiceReconciler } from './services.ts';
import { buildSnapshot } from './snapshot.ts';
import { Watched, type WatchEvent } from '../../shared/kube/watched.ts';
import { SIDECAR_CONTAINER, Watchdog } from './watchdog.ts';
import { ReferencedSecrets, referencedSecrets } from './secrets.ts';
import { metaTime } from '../../shared/kube/times.ts';

export const GROUP = 'rt.io';
export const DEFAULT_GRPC_PORT = 6500;

export interface OperatorOptions {
  /** Admin kubeconfig file; absent = the in-cluster config. */
  kubeconfig?: string;
  grpcPort: number;
  listenAddress?: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  watchdogDeleteUninjected?: boolean;
  /** Where the leader-election Lease lives (default: POD_NAMESPACE, else "default"). */
  leaderElectionNamespace?: string;
  /** Minimum time between two watchdog deletions (default 1 s). */
  watchdogDeleteIntervalMs?: number;
  /** Sign workload certificates (dapr.proto.sentry.v1.CA/SignCertificate on the gRPC port). */
  issuer?: IssuerOptions;
  /**
   * Roots of workload certificates (PEM file): WatchResources takes a client certificate that
   * verifies against them as the caller's identity instead of a token. Needs the TLS files.
   */
  clientTrustBundleFile?: string;
  /** The trust domain a client certificate must name (default cluster.local). */
  trustDomain?: string;
  log: Logger;
}

interface Subscriber {
  caller: Caller;
  digest: string;
  version: number;
  send(snap: ResourceSnapshot): void;
}

export class Operator {
  readonly client: KubeClient;
  private readonly opts: OperatorOptions;
  private readonly log: Logger;
  private readonly kinds = new Map<string, Watched<RtResourceObject>>();
  /** Values of the Secrets resources reference, and a metadata-only watch of all (secrets.ts). */
  private readonly secrets: ReferencedSecrets;
  private readonly pods: Watched<k8s.V1Pod>;
  private readonly services: Watched<k8s.V1Service>;
  private readonly serviceReconciler: ServiceReconciler;
  private readonly elector: LeaderElector;
  /** The client for the leader's writes: each is sent only while the Lease is held (KubeClient.withFence). */
  private readonly writer: KubeClient;
  private readonly queue: WorkQueue;
  private readonly identity: IdentityChecker;
  /** The workload-certificate issuer, when the CA files are given. */
  readonly issuer: CertificateIssuer | undefined;
  /** The rt.io/workload signer of PodCertificateRequests, when the issuer is on and the cluster serves them. */
  private podCertificates: PodCertificateSigner | undefined;
  private readonly watchdog: Watchdog;
  private readonly subscribers = new Set<Subscriber>();
  private readonly dirtyNamespaces = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;
  private server: StartedGrpcServer | undefined;
  /** Every cache has its first list: before that, a missing pod or Service proves nothing. */
  private synced = false;
  private closing = false;
  /** Components reconciled (status written or found up to date), for the benchmark and metrics. */
  reconciled = 0;

  constructor(opts: OperatorOptions) {
    this.opts = opts;
    this.log = opts.log;
    const replica = `${process.env.POD_NAME || hostname()}_${randomBytes(4).toString('hex')}`;
    // the User-Agent names the replica, so the API server's audit log tells who wrote what
    this.client = new KubeClient(opts.kubeconfig ? loadKubeconfig(opts.kubeconfig) : loadInCluster(), { userAgent: `rt-operator/${replica}` });
    this.identity = new IdentityChecker(this.client);
    this.issuer = opts.issuer ? new CertificateIssuer(opts.issuer, this.identity, this.log) : undefined;
    this.elector = new LeaderElector(this.client, {
      namespace: opts.leaderElectionNamespace || process.env.POD_NAMESPACE || 'default',
      identity: replica,
      log: this.log,
      onChange: (leader) => this.onLeader(leader),
    });
    // every write of the leader's (status, Events, deletions, Services) goes through this fence
    this.writer = this.client.withFence(() => this.elector.isLeader());
    this.watchdog = new Watchdog(this.writer, this.log, !!opts.watchdogDeleteUninjected, opts.watchdogDeleteIntervalMs, () => this.elector.isLeader());
    this.queue = new WorkQueue((key) => this.reconcile(key), 16);

    for (const group of RESOURCE_GROUPS) {
      for (const k of RESOURCE_KINDS) {
        const w = new Watched<RtResourceObject>(this.client, `${k.plural}.${group}`, `/apis/${group}/${k.version}/${k.plural}`, this.log, (type, o) => this.onResource(group, k.kind, type, o));
        this.kinds.set(`${group}/${k.kind}`, w);
      }
    }
    this.secrets = new ReferencedSecrets(this.client, this.log, (ns) => this.touch(ns));
    this.pods = new Watched<k8s.V1Pod>(this.client, 'pods', '/api/v1/pods', this.log, (t, p) => this.onPod(t, p), { trim: trimPod });
    this.services = new Watched<k8s.V1Service>(this.client, 'services', '/api/v1/services', this.log, (_t, s) => this.serviceReconciler.onService(s), {
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}`,
    });
    this.serviceReconciler = new ServiceReconciler(this.writer, this.pods, this.services, this.log, () => this.synced && this.elector.isLeader());
  }

  /** Starts the watches, waits for their first lists, then serves sidecars. Returns the gRPC port. */
  async start(): Promise<number> {
    // the ecosystem's dapr.io kinds are read too, where their CRDs are installed
    for (const k of RESOURCE_KINDS) {
      const key = `dapr.io/${k.kind}`;
      const installed = await this.client.get(`/apis/dapr.io/${k.version}/${k.plural}`, { limit: 1 }).then(
        () => true,
        () => false,
      );
      if (!installed) this.kinds.delete(key);
    }
    // only the leader writes; the first attempt is made before the caches fill, so a lone replica writes at once
    await this.elector.start();
    const all = [...this.kinds.values(), this.secrets.watched, this.pods, this.services];
    for (const w of all) w.start();
    await Promise.all(all.map((w) => w.whenSynced()));
    this.synced = true;
    this.onLeader(this.elector.isLeader());
    const credentials = this.credentials();
    await this.startPodCertificates();
    this.server = await startGrpcServer({
      host: this.opts.listenAddress ?? '0.0.0.0',
      port: this.opts.grpcPort,
      ...credentials,
      // sidecars' watch streams never end by themselves: close() cuts them (they reconnect to another replica)
      shutdownGraceMs: 0,
      services: (server) => {
        server.addService(operatorService(), { WatchResources: (call: grpc.ServerWritableStream<WatchResourcesRequest, ResourceSnapshot>) => void this.serve(call) });
        if (this.issuer) server.addService(caService(), this.issuer.implementation());
      },
    });
    const port = this.server.port;
    this.log.info({ grpcPort: port, tls: !!this.opts.tlsCertFile, issuer: !!this.issuer, clientCertificates: !!this.opts.clientTrustBundleFile }, `rt operator ready: serving sidecars on port ${port}`);
    return port;
  }

  /**
   * With the issuer on a cluster that serves PodCertificateRequests: sign those for rt.io/workload
   * with the same CA (the leader writes their status). Not awaited for its first list: pods wait
   * for their certificates, sidecars' other requests do not wait for this.
   */
  private async startPodCertificates(): Promise<void> {
    const issuer = this.issuer;
    if (!issuer) return;
    const served = await this.client.get(`${PCR_API}/podcertificaterequests`, { limit: 1 }).then(
      () => true,
      () => false,
    );
    if (!served) {
      this.log.info('the cluster does not serve PodCertificateRequests (certificates.k8s.io/v1beta1): sidecars ask the issuer for their certificates');
      return;
    }
    this.podCertificates = new PodCertificateSigner({ client: this.writer, log: this.log, issuer: () => issuer.settings });
    this.podCertificates.start();
    this.log.info('signing PodCertificateRequests for rt.io/workload');
  }

  /** Whether this replica holds the leader Lease (writes status, Events, deletions and Services). */
  get leader(): boolean {
    return this.elector.isLeader();
  }

  /** Resolves when every queued Component and Service has been reconciled. */
  async idle(): Promise<void> {
    await Promise.all([this.queue.idle(), this.serviceReconciler.idle()]);
  }

  /** Ready to serve sidecars: the caches are filled and the gRPC port is bound, and not closing. */
  get ready(): boolean {
    return this.synced && this.server !== undefined && !this.closing;
  }

  async close(): Promise<void> {
    this.closing = true;
    this.queue.stop();
    this.serviceReconciler.stop();
    this.watchdog.stop();
    await this.podCertificates?.stop();
    await this.elector.stop();
    clearTimeout(this.flushTimer);
    await Promise.all([...this.kinds.values(), this.secrets.watched, this.pods, this.services].map((w) => w.stop().catch(() => undefined)));
    await this.server?.close();
    this.subscribers.clear();
    this.client.close();
  }

  private credentials(): GrpcServerCredentialsOptions {
    const { tlsCertFile, tlsKeyFile, clientTrustBundleFile } = this.opts;
    if (!tlsCertFile || !tlsKeyFile) {
      if (clientTrustBundleFile) throw new Error('workload certificates as client identity need TLS: give --tls-cert-file and --tls-key-file');
      this.log.warn('the operator serves sidecars without TLS (no --tls-cert-file/--tls-key-file): tokens and secrets travel in clear text');
      return { log: this.log };
    }
    // a client certificate is asked for, not required: sidecars without one send their token;
    // the files are read again when they change (a renewed serving certificate, a root rotation)
    return { tls: { certFile: tlsCertFile, keyFile: tlsKeyFile, caFile: clientTrustBundleFile }, clientCertificate: clientTrustBundleFile ? 'request' : 'none', log: this.log };
  }

  // ------------------------------------------------------------------ reconcile

  private onResource(group: string, kind: string, type: WatchEvent, o: RtResourceObject): void {
    const ns = o.metadata?.namespace;
    this.touch(ns);
    // status is written on rt.io's own Components; dapr.io objects are only served
    if (group === GROUP && kind === 'Component' && type !== 'delete') this.queue.add(`${ns}/${o.metadata.name}`);
  }

  /** A namespace's objects; an rt.io object wins over a dapr.io one of the same kind and name. */
  private objectsOf(ns: string): RtResourceObject[] {
    const seen = new Set<string>();
    const out: RtResourceObject[] = [];
    for (const group of RESOURCE_GROUPS) {
      for (const k of RESOURCE_KINDS) {
        for (const o of this.kinds.get(`${group}/${k.kind}`)?.list(ns) ?? []) {
          const id = `${k.kind}/${o.metadata.name}`;
          if (seen.has(id)) continue;
          seen.add(id);
          out.push(o);
        }
      }
    }
    return out;
  }

  /** Became the leader (or the caches filled while leader): everything is looked at again. */
  private onLeader(leader: boolean): void {
    if (!leader || !this.synced) return;
    for (const c of this.kinds.get(`${GROUP}/Component`)!.list()) this.queue.add(`${c.metadata.namespace}/${c.metadata.name}`);
    for (const p of this.pods.list()) void this.watchdog.observe(p);
    this.serviceReconciler.resync();
    this.podCertificates?.resync();
  }

  /** Level-triggered and idempotent: reads the cached object, writes status only when it differs. */
  private async reconcile(key: string): Promise<void> {
    if (!this.elector.isLeader()) return; // the leader does it (and looks at every key when it becomes one)
    const [ns, name] = key.split('/');
    const c = this.kinds.get(`${GROUP}/Component`)!.get(name, ns) as ComponentObject | undefined;
    if (!c) return;
    const v = checkComponent(c);
    const generation = c.metadata.generation ?? 0;
    const prev = c.status?.conditions?.find((x) => x.type === 'Ready');
    const status: Condition['status'] = v.ready ? 'True' : 'False';
    this.reconciled++;
    if (c.status?.observedGeneration === generation && prev?.status === status && prev.reason === v.reason && prev.message === v.message) return;
    const condition: Condition = {
      type: 'Ready',
      status,
      reason: v.reason,
      message: v.message,
      observedGeneration: generation,
      lastTransitionTime: prev?.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : metaTime(),
    };
    const others = (c.status?.conditions ?? []).filter((x) => x.type !== 'Ready');
    try {
      await this.writer.mergePatch(`/apis/${GROUP}/v1alpha1/namespaces/${encodeURIComponent(ns)}/components/${encodeURIComponent(name)}/status`, {
        status: { observedGeneration: generation, conditions: [...others, condition] },
      });
    } catch (e) {
      if (e instanceof ApiError && e.code === 404) return; // deleted meanwhile
      if (e instanceof NotLeaderError) return; // the new leader looks at every key when it takes over
      this.log.warn({ component: key }, `writing status failed, will retry: ${(e as Error).message}`);
      throw e;
    }
    if (!v.ready) this.log.warn({ component: key }, `Component not ready: ${v.message}`);
  }

  // ------------------------------------------------------------------ serving sidecars

  /**
   * Who a WatchResources caller is: the workload its verified client certificate names, else the
   * pod of its token. A certificate proves the identity until it expires; a token is checked
   * against the pod now.
   */
  private async callerOf(call: grpc.ServerWritableStream<WatchResourcesRequest, ResourceSnapshot>): Promise<Caller> {
    const workload = this.opts.clientTrustBundleFile ? certificateWorkload(verifiedPeerCertificate(call)) : undefined;
    if (workload) {
      const trustDomain = this.opts.trustDomain ?? DEFAULT_TRUST_DOMAIN;
      if (workload.trustDomain !== trustDomain) throw new IdentityError(`client certificate is of trust domain "${workload.trustDomain}", not "${trustDomain}"`);
      return { namespace: workload.namespace, appId: workload.appId, podName: '(client certificate)', serviceAccount: '' };
    }
    const auth = String(call.metadata.get('authorization')[0] ?? '').trim();
    return this.identity.identify(/^Bearer\s+(\S+)$/i.exec(auth)?.[1] ?? '');
  }

  private async serve(call: grpc.ServerWritableStream<WatchResourcesRequest, ResourceSnapshot>): Promise<void> {
    let caller: Caller;
    try {
      caller = await this.callerOf(call);
    } catch (e) {
      const refused = e instanceof IdentityError;
      this.log.warn(`sidecar refused: ${(e as Error).message}`);
      fail(call, refused ? grpc.status.UNAUTHENTICATED : grpc.status.UNAVAILABLE, refused ? (e as Error).message : `cannot check the token: ${(e as Error).message}`);
      return;
    }
    const req = call.request;
    const byToken = caller.serviceAccount !== '';
    const mismatch =
      req.namespace && req.namespace !== caller.namespace
        ? `namespace "${req.namespace}" is not the namespace of its ${byToken ? 'token' : 'client certificate'} (${caller.namespace})`
        : req.appId && req.appId !== caller.appId
          ? `app id "${req.appId}" is not ${byToken ? `the rt.io/app-id of its pod ${caller.namespace}/${caller.podName}` : 'the app id of its client certificate'} ("${caller.appId}")`
          : undefined;
    if (mismatch) {
      this.log.warn(`sidecar of pod ${caller.namespace}/${caller.podName} refused: ${mismatch}`);
      fail(call, grpc.status.PERMISSION_DENIED, `refused: ${mismatch}`);
      return;
    }
    const sub: Subscriber = { caller, digest: '', version: 0, send: (s) => call.write(s) };
    this.subscribers.add(sub);
    const drop = () => this.subscribers.delete(sub);
    call.on('cancelled', drop);
    call.on('close', drop);
    call.on('error', drop);
    this.log.info({ pod: `${caller.namespace}/${caller.podName}`, appId: caller.appId }, 'sidecar connected');
    void this.push(sub).catch((e: Error) => this.log.error({ appId: caller.appId }, `sending resources failed: ${e.message}`));
  }

  private async push(sub: Subscriber): Promise<void> {
    const { namespace, appId } = sub.caller;
    // the values of the Secrets this namespace's resources reference, read now if not held yet
    await this.secrets.want(namespace, referencedSecrets(this.objectsOf(namespace)));
    const snap = buildSnapshot(
      {
        objects: (ns) => this.objectsOf(ns),
        secret: (ns, name) => this.secrets.get(ns, name),
      },
      namespace,
      appId,
    );
    for (const p of snap.problems) this.log.warn({ appId }, `left out of the resources sent to the sidecar: ${p}`);
    if (snap.digest === sub.digest) return;
    sub.digest = snap.digest;
    sub.send({ resources: snap.resources, withheld: snap.withheld, appId, version: String(++sub.version) });
  }

  /** A namespace changed: its sidecars get a new snapshot (changes within a few ms are merged). */
  private touch(ns: string | undefined): void {
    if (!ns) return;
    this.dirtyNamespaces.add(ns);
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      const dirty = new Set(this.dirtyNamespaces);
      this.dirtyNamespaces.clear();
      for (const s of this.subscribers) if (dirty.has(s.caller.namespace)) void this.push(s).catch((e: Error) => this.log.error({ appId: s.caller.appId }, `sending resources failed: ${e.message}`));
    }, 10);
  }

  private onPod(type: WatchEvent, pod: k8s.V1Pod): void {
    if (type === 'delete') this.watchdog.forget(pod);
    else void this.watchdog.observe(pod);
    this.serviceReconciler.onPod(pod);
  }
}

/** Ends a server stream with a status (grpc-js sends an emitted error as the call's status). */
function fail(call: grpc.ServerWritableStream<unknown, unknown>, code: grpc.status, details: string): void {
  call.emit('error', { code, details, metadata: new grpc.Metadata() } satisfies Partial<grpc.StatusObject>);
}

/** What the operator reads of a pod (its cache holds thousands on a big cluster): metadata, container names, phase. */
function trimPod(p: k8s.V1Pod): k8s.V1Pod {
  const names = (cs: { name: string }[] | undefined) => cs?.map((c) => ({ name: c.name }) as k8s.V1Container);
  // of the container statuses only the sidecar's, and only how it last ended (watchdog: SidecarFailed)
  const sidecar = (cs: k8s.V1ContainerStatus[] | undefined) =>
    cs?.filter((c) => c.name === SIDECAR_CONTAINER).map((c) => ({ name: c.name, restartCount: c.restartCount, state: { terminated: c.state?.terminated }, lastState: { terminated: c.lastState?.terminated } }) as k8s.V1ContainerStatus);
  return {
    metadata: p.metadata,
    spec: p.spec && { containers: names(p.spec.containers) ?? [], initContainers: names(p.spec.initContainers) },
    status: { phase: p.status?.phase, initContainerStatuses: sidecar(p.status?.initContainerStatuses), containerStatuses: sidecar(p.status?.containerStatuses) },
  };
}
