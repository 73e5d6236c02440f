/**
 * The signer `rt.io/workload` for PodCertificateRequests (certificates.k8s.io/v1beta1, beta in
 * Kubernetes 1.35): a pod that projects a `podCertificate` volume for this signer gets its
 * workload certificate from the kubelet, which makes the key, asks the API server (proving it
 * holds the key), and rotates it. This controller answers those requests: it reads the pod the
 * request names, checks it is that pod (uid, service account), takes the app id from the pod's
 * `rt.io/app-id` annotation and signs the SPIFFE ID `spiffe://<trust domain>/ns/<ns>/<app id>`,
 * with the same CA and checks as the SignCertificate path. Anything else is Denied with a reason.
 *
 * The API server's rules shape the times: notBefore within 5 minutes of its clock (so backdated
 * by 2 minutes, not 15), a lifetime of at least an hour and at most the request's
 * maxExpirationSeconds, and beginRefreshAt at least 10 minutes inside both ends.
 */
import { X509Certificate } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CsrError, type IssuerSettings, issueWorkloadCertificate, spkiPublicKey, splitPemBundle } from '../../sidecar/src/index.ts';
import { spiffeUri, workloadIdProblem, type WorkloadId } from '../../shared/spiffe.ts';
import { APP_ID_ANNOTATION } from './identity.ts';
import { ApiError, isNotFound, NotLeaderError, type KubeClient } from '../../shared/kube/client.ts';
import { metaTime } from '../../shared/kube/times.ts';
import { Backoff } from '../../shared/backoff.ts';
import { Watched } from '../../shared/kube/watched.ts';

export const WORKLOAD_SIGNER = 'rt.io/workload';
export const PCR_API = '/apis/certificates.k8s.io/v1beta1';
const PCR_PATH = `${PCR_API}/podcertificaterequests`;

const HOUR_S = 3600;
/** The API server refuses a notBefore further than 5 minutes from its clock. */
const BACKDATE_MS = 2 * 60_000;
/** beginRefreshAt: at this share of the life, kept 10 minutes inside both ends. */
const REFRESH_AT = 0.7;
const REFRESH_MARGIN_MS = 10 * 60_000;

export interface PodCertificateRequest {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string; uid?: string; generation?: number };
  spec: {
    signerName: string;
    podName: string;
    podUID: string;
    serviceAccountName: string;
    serviceAccountUID: string;
    nodeName: string;
    nodeUID: string;
    maxExpirationSeconds?: number;
    /** base64 of the DER SubjectPublicKeyInfo */
    pkixPublicKey: string;
    proofOfPossession: string;
    unverifiedUserAnnotations?: Record<string, string>;
  };
  status?: {
    conditions?: Array<{ type: string; status: string; reason: string; message: string; lastTransitionTime: string; observedGeneration?: number }>;
    certificateChain?: string;
    notBefore?: string;
    beginRefreshAt?: string;
    notAfter?: string;
  };
}

/** What the signer decided for one request. */
export type Decision =
  | { kind: 'Issued'; id: WorkloadId; certificateChain: string; notBefore: Date; beginRefreshAt: Date; notAfter: Date }
  | { kind: 'Denied' | 'Failed'; reason: string; message: string };

const TERMINAL = new Set(['Issued', 'Denied', 'Failed']);

export function isSettled(pcr: PodCertificateRequest): boolean {
  return (pcr.status?.conditions ?? []).some((c) => TERMINAL.has(c.type) && c.status === 'True');
}

/** Decides one request against the pod it names (undefined: the pod is gone). */
export async function decide(pcr: PodCertificateRequest, pod: k8s.V1Pod | undefined, issuer: IssuerSettings, now = new Date()): Promise<Decision> {
  const ns = pcr.metadata.namespace ?? '';
  const s = pcr.spec;
  const deny = (reason: string, message: string): Decision => ({ kind: 'Denied', reason, message });
  if (!pod || pod.metadata?.uid !== s.podUID) return deny('PodGone', `pod ${ns}/${s.podName} with uid ${s.podUID} does not exist`);
  if ((pod.spec?.serviceAccountName ?? 'default') !== s.serviceAccountName) return deny('ServiceAccountMismatch', `pod ${ns}/${s.podName} runs as ${pod.spec?.serviceAccountName ?? 'default'}, not ${s.serviceAccountName}`);
  if (pod.spec?.nodeName !== s.nodeName) return deny('NodeMismatch', `pod ${ns}/${s.podName} is not on node ${s.nodeName}`);
  const unknown = Object.keys(s.unverifiedUserAnnotations ?? {});
  if (unknown.length) return deny('UnknownAnnotations', `signer ${WORKLOAD_SIGNER} reads no user annotations; remove ${unknown.join(', ')}`);
  const appId = pod.metadata?.annotations?.[APP_ID_ANNOTATION];
  if (!appId) return deny('NoAppId', `pod ${ns}/${s.podName} has no ${APP_ID_ANNOTATION} annotation`);
  const id: WorkloadId = { trustDomain: issuer.trustDomain, namespace: ns, appId };
  const problem = workloadIdProblem(id);
  if (problem) return deny('InvalidIdentity', problem);
  let key;
  try {
    key = await spkiPublicKey(Buffer.from(s.pkixPublicKey, 'base64'));
  } catch (e) {
    if (e instanceof CsrError) return deny('UnsupportedKeyType', e.message);
    throw e;
  }
  // a whole number of seconds: the certificate's times are, and status must equal them
  const lifetimeS = Math.min(s.maxExpirationSeconds ?? 24 * HOUR_S, Math.max(HOUR_S, Math.floor(issuer.ttlMs / 1000)));
  const at = new Date(Math.floor(now.getTime() / 1000) * 1000);
  const { certPem } = await issueWorkloadCertificate(issuer.ca, key, id, { now: at, backdateMs: BACKDATE_MS, ttlMs: lifetimeS * 1000 - BACKDATE_MS });
  const cert = new X509Certificate(certPem);
  const notBefore = new Date(cert.validFrom);
  const notAfter = new Date(cert.validTo);
  const lifeMs = notAfter.getTime() - notBefore.getTime();
  if (lifeMs < HOUR_S * 1000) return { kind: 'Failed', reason: 'CaExpiresSoon', message: `the signing CA expires at ${notAfter.toISOString()}, within the hour a certificate must at least live` };
  const refresh = Math.min(Math.max(notBefore.getTime() + lifeMs * REFRESH_AT, notBefore.getTime() + REFRESH_MARGIN_MS), notAfter.getTime() - REFRESH_MARGIN_MS);
  // the trust bundle's roots ride behind the leaf: the kubelet writes them into the pod's credential
  // bundle, so a pod on this path follows a root rotation at each refresh, as issuer-path pods do
  // at each renewal (the sidecar takes self-signed certificates there as roots, never presents them)
  const certificateChain = [certPem, ...splitPemBundle(issuer.trustBundlePem)].join('');
  return { kind: 'Issued', id, certificateChain, notBefore, notAfter, beginRefreshAt: new Date(Math.floor(refresh / 1000) * 1000) };
}

/** The request with its decision in status, ready for PUT …/status. */
export function withDecision(pcr: PodCertificateRequest, d: Decision, now = new Date()): PodCertificateRequest {
  const condition = {
    type: d.kind,
    status: 'True',
    reason: d.kind === 'Issued' ? 'Issued' : d.reason,
    message: d.kind === 'Issued' ? `signed ${spiffeUri(d.id)}` : d.message,
    lastTransitionTime: metaTime(now),
    ...(pcr.metadata.generation !== undefined ? { observedGeneration: pcr.metadata.generation } : {}),
  };
  const status: PodCertificateRequest['status'] = { conditions: [...(pcr.status?.conditions ?? []).filter((c) => !TERMINAL.has(c.type)), condition] };
  if (d.kind === 'Issued') Object.assign(status, { certificateChain: d.certificateChain, notBefore: metaTime(d.notBefore), beginRefreshAt: metaTime(d.beginRefreshAt), notAfter: metaTime(d.notAfter) });
  return { ...pcr, status };
}

export interface PodCertificateSignerOptions {
  client: KubeClient;
  log: Logger;
  /** The issuer's CA and settings of the moment (undefined: identity off, nothing is signed). */
  issuer: () => IssuerSettings | undefined;
  onDecision?: (kind: Decision['kind'], pcr: PodCertificateRequest) => void;
}

/** Watches PodCertificateRequests for rt.io/workload and settles each one once. */
export class PodCertificateSigner {
  private readonly o: PodCertificateSignerOptions;
  private readonly watched: Watched<PodCertificateRequest>;
  private readonly busy = new Set<string>();
  /** Requests whose settling failed (an API error): tried again after a backoff of their own. */
  private readonly retries = new Map<string, { backoff: Backoff; timer?: NodeJS.Timeout }>();
  private stopped = false;

  constructor(o: PodCertificateSignerOptions) {
    this.o = o;
    this.watched = new Watched<PodCertificateRequest>(o.client, 'podcertificaterequests', PCR_PATH, o.log, (type, pcr) => {
      if (type !== 'delete') void this.settle(pcr);
    });
  }

  start(): void {
    this.watched.start();
  }

  whenSynced(): Promise<void> {
    return this.watched.whenSynced();
  }

  /** Every request not settled yet is looked at again (this replica became the leader). */
  resync(): void {
    for (const pcr of this.watched.list()) void this.settle(pcr);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const r of this.retries.values()) clearTimeout(r.timer);
    this.retries.clear();
    await this.watched.stop().catch(() => undefined);
  }

  private async settle(pcr: PodCertificateRequest): Promise<void> {
    const key = `${pcr.metadata.namespace}/${pcr.metadata.name}`;
    if (pcr.spec?.signerName !== WORKLOAD_SIGNER || isSettled(pcr) || this.busy.has(key)) return;
    const issuer = this.o.issuer();
    if (!issuer) return;
    this.busy.add(key);
    try {
      const ns = encodeURIComponent(pcr.metadata.namespace ?? '');
      const pod = await this.o.client.get<k8s.V1Pod>(`/api/v1/namespaces/${ns}/pods/${encodeURIComponent(pcr.spec.podName)}`).catch((e: unknown) => {
        if (isNotFound(e)) return undefined;
        throw e;
      });
      const d = await decide(pcr, pod, issuer);
      await this.o.client.replace(`${PCR_API}/namespaces/${ns}/podcertificaterequests/${encodeURIComponent(pcr.metadata.name ?? '')}/status`, withDecision(pcr, d));
      this.o.onDecision?.(d.kind, pcr);
      if (d.kind === 'Issued') this.o.log.info({ pcr: key, id: spiffeUri(d.id), notAfter: d.notAfter.toISOString() }, 'pod certificate issued');
      else this.o.log.warn({ pcr: key, reason: d.reason }, `pod certificate ${d.kind.toLowerCase()}: ${d.message}`);
      this.retries.delete(key);
    } catch (e) {
      // a conflict means a newer version is on its way through the watch, which settles it then;
      // a replica that is not the leader leaves it to the leader (resync() when it becomes one)
      if ((e instanceof ApiError && e.code === 409) || e instanceof NotLeaderError) return;
      const retry = this.retries.get(key) ?? { backoff: new Backoff({ initialMs: 500, maxMs: 30_000, jitter: 0.2 }) };
      this.retries.set(key, retry);
      const delay = retry.backoff.next();
      this.o.log.warn({ pcr: key, err: (e as Error).message, retryInMs: Math.round(delay) }, 'pod certificate request not settled yet');
      clearTimeout(retry.timer);
      retry.timer = setTimeout(() => {
        const latest = this.watched.get(pcr.metadata.name ?? '', pcr.metadata.namespace ?? '');
        if (latest && !this.stopped) void this.settle(latest);
        else this.retries.delete(key);
      }, delay).unref();
    } finally {
      this.busy.delete(key);
    }
  }
}
