/**
 * Resources from the operator (kubernetes mode): one WatchResources stream over TLS, carrying the
 * whole desired state of this app each time something changes. The sidecar proves who it is with
 * its projected service-account token. When the operator cannot be reached the sidecar keeps what
 * it has, retries with backoff, and says so in the log and in /v1.0/healthz/outbound.
 */
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { operatorClient, RESOLVED_SECRETS_ANNOTATION, type ResourceSnapshot } from '../../../operator/src/index.ts';
import { Backoff } from '../../../shared/backoff.ts';
import type { IdentityManager } from '../identity/manager.ts';
import { grpcClientCredentials } from '../identity/tls.ts';
import type { SidecarOptions } from '../options.ts';
import { parseResources } from './loader.ts';
import { emptyResources, type ResourceSource } from './source.ts';
import { type Resources, ResourceError } from './types.ts';

export const DEFAULT_TOKEN_FILE = '/var/run/secrets/rt.io/token';
/** 200 ms doubling to 10 s, each wait spread ±20% so that a cluster's sidecars do not all call at once. */
const BACKOFF = { initialMs: 200, maxMs: 10_000, jitter: 0.2 };

export class OperatorSource implements ResourceSource {
  readonly description: string;
  private readonly options: SidecarOptions;
  private readonly log: Logger;
  private readonly env: NodeJS.ProcessEnv;
  private readonly identity?: IdentityManager;
  private client: ReturnType<typeof operatorClient> | undefined;
  private call: grpc.ClientReadableStream<ResourceSnapshot> | undefined;
  private latest: Resources | undefined;
  private onChange: ((r: Resources) => void) | undefined;
  private firstSnapshot: (() => void) | undefined;
  private problemText: string | undefined = 'not connected to the operator yet';
  private readonly backoff = new Backoff(BACKOFF);
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;

  /** `identity` (mTLS): the stream presents the workload certificate too (the token stays). */
  constructor(options: SidecarOptions, log: Logger, env: NodeJS.ProcessEnv = process.env, identity?: IdentityManager) {
    this.options = options;
    this.identity = identity;
    this.log = log.child({ scope: 'operator-source' });
    this.env = env;
    this.description = `operator at ${options.controlPlaneAddress}`;
  }

  /** Waits for the first snapshot (RT_OPERATOR_INITIAL_WAIT ms, default 10 s); then goes on without it. */
  async list(): Promise<Resources> {
    const waitMs = Number(this.env.RT_OPERATOR_INITIAL_WAIT ?? 10_000);
    const first = new Promise<void>((resolve) => (this.firstSnapshot = resolve));
    this.connect();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([first, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    if (!this.latest) this.log.warn(`no resources from the ${this.description} within ${waitMs} ms; starting without them and retrying (${this.problemText})`);
    return this.latest ?? emptyResources();
  }

  watch(onChange: (desired: Resources) => void): void {
    this.onChange = onChange;
    if (this.latest) onChange(this.latest);
  }

  problem(): string | undefined {
    return this.problemText ? `${this.description}: ${this.problemText}` : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.call?.cancel();
    this.client?.close();
  }

  private credentials(): grpc.ChannelCredentials {
    const caFile = this.env.RT_OPERATOR_CA_FILE;
    // the workload certificate as client certificate, the one in force at each new connection
    if (this.identity) return grpcClientCredentials(this.identity, { caPem: caFile ? readFileSync(caFile) : undefined });
    if (!caFile) return grpc.credentials.createInsecure();
    return grpc.credentials.createSsl(readFileSync(caFile));
  }

  private connect(): void {
    if (this.closed) return;
    let token: string;
    try {
      token = readFileSync(this.env.RT_OPERATOR_TOKEN_FILE || DEFAULT_TOKEN_FILE, 'utf8').trim();
    } catch (e) {
      this.retry(`cannot read the service-account token: ${(e as Error).message}`);
      return;
    }
    if (!this.client) {
      try {
        this.client = operatorClient(this.options.controlPlaneAddress!, this.credentials());
      } catch (e) {
        this.retry(`cannot create the operator client: ${(e as Error).message}`);
        return;
      }
    }
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    const call = this.client.WatchResources({ namespace: this.options.namespace, appId: this.options.appId, podName: this.env.POD_NAME ?? '' }, md);
    this.call = call;
    call.on('data', (snap: ResourceSnapshot) => {
      if (this.problemText) this.log.info(`connected to the ${this.description}`);
      this.problemText = undefined;
      this.backoff.reset();
      this.latest = this.toResources(snap);
      this.firstSnapshot?.();
      this.onChange?.(this.latest);
    });
    call.on('error', (e: grpc.ServiceError) => {
      if (this.call !== call || this.closed) return;
      this.call = undefined;
      this.retry(e.code === grpc.status.PERMISSION_DENIED || e.code === grpc.status.UNAUTHENTICATED ? `refused: ${e.details}` : `unreachable: ${e.details || e.message}`);
    });
    call.on('end', () => {
      if (this.call !== call || this.closed) return;
      this.call = undefined;
      this.retry('the operator ended the stream');
    });
  }

  private retry(why: string): void {
    if (this.closed) return;
    this.problemText = why;
    const delay = this.backoff.next();
    // components already loaded keep working while the operator is away
    this.log.warn(`${this.description} ${why}; retrying in ${Math.round(delay)} ms`);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  /** Each object goes through the same parser as files; one bad object is reported and left out. */
  private toResources(snap: ResourceSnapshot): Resources {
    const out = emptyResources();
    const opts = { appId: this.options.appId, namespace: this.options.namespace };
    for (const r of snap.resources) {
      try {
        const one = parseResources(Buffer.from(r.json).toString('utf8'), `operator ${r.kind}/${r.name}`, opts);
        // values the operator resolved from Secrets are secrets here too: never logged
        const fromSecrets = (c: Resources['components'][number]) => (c.spec.annotations[RESOLVED_SECRETS_ANNOTATION] ?? '').split(',').filter(Boolean);
        out.components.push(...one.components.map((c) => ({ ...c, spec: { ...c.spec, source: 'operator', secretKeys: [...c.spec.secretKeys, ...fromSecrets(c)] } })));
        out.subscriptions.push(...one.subscriptions);
        out.httpEndpoints.push(...one.httpEndpoints);
        if (one.resiliencies?.length) (out.resiliencies ??= []).push(...one.resiliencies);
        // on a cluster --config names the Configuration (the pod's rt.io/config annotation)
        if (one.configuration && one.configuration.name === this.options.configFile) out.configuration = one.configuration;
      } catch (e) {
        if (!(e instanceof ResourceError)) throw e;
        this.log.error(`resource from the operator left out: ${e.message}`);
      }
    }
    out.withheld = (snap.withheld ?? []).filter((w) => w.kind === 'Component').map((w) => ({ name: w.name, type: w.type, reason: w.reason }));
    return out;
  }
}
