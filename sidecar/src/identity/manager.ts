/**
 * The sidecar's workload identity: its key, its certificate (X.509 SVID) and the trust bundle it
 * checks peers against. The key is made in this process (a fresh one for every request) and never
 * leaves it; the CSR goes to an issuer (the operator's CA service on a cluster, a local CA with
 * `rt run --enable-mtls`). The certificate is renewed at about 70% of its life; when renewal
 * fails the current one keeps serving until it expires, and the manager retries with backoff.
 * Every new certificate is announced (`onRotate`), so TLS servers swap their secure context and
 * new client connections present the new certificate while established ones go on.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { Backoff, type BackoffPolicy } from '../../../shared/backoff.ts';
import { SYSTEM_CLOCK, type Clock, type Timer } from '../../../shared/clock.ts';
import { certificateWorkload, sameWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';
import { createCsr, newWorkloadKey, splitPemBundle } from './x509.ts';

/** What an issuer answers: the certificate (leaf first) and the roots to trust. */
export interface SignedCertificate {
  certPem: string;
  trustChainPems: string[];
  notAfter: Date;
}

/** Where certificates come from. */
export interface Signer {
  /** Named in logs and in /v1.0/healthz (e.g. `identity issuer at rt-operator:6500`). */
  readonly description: string;
  sign(csrPem: string, id: WorkloadId): Promise<SignedCertificate>;
  /**
   * A source that holds the key itself (the kubelet's credential bundle): the manager makes no key
   * and no CSR, and takes key and certificate as they are. The same certificate as the one in
   * force means "not renewed yet": looked at again a little later, without a warning.
   */
  load?(id: WorkloadId): Promise<SignedCertificate & { keyPem: string }>;
  close?(): void;
}

/** How often a source that renews by itself (the kubelet) is looked at again once its renewal is due. */
const RELOAD_POLL_MS = 10_000;

/** The identity in force: what node:tls takes (key, cert, ca) and who it names. */
export interface Svid {
  id: WorkloadId;
  keyPem: string;
  certPem: string;
  /** The roots peers are checked against (PEM, one or more). */
  bundlePem: string;
  notAfter: number;
  /** When this process received it (its life for renewal counts from here: certificates are backdated). */
  receivedAt: number;
}

export interface IdentityManagerOptions {
  id: WorkloadId;
  signer: Signer;
  log: Logger;
  clock?: Clock;
  /** Roots trusted before the issuer's first answer (RT_TRUST_ANCHORS_FILE), PEM. */
  trustAnchorsPem?: string;
  /** Renew at this fraction of the certificate's life (default 0.7). */
  renewAt?: number;
  /** The renewal time is spread by ± this fraction of the life (default 0.05). */
  jitter?: number;
  /** Waits between failed attempts (default 500 ms doubling to 30 s, ±20%). */
  backoff?: BackoffPolicy;
  /** Warn when less than this fraction of the life is left and renewal keeps failing (default 0.1). */
  warnAt?: number;
}

const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, jitter: 0.2 };

export class IdentityManager {
  readonly id: WorkloadId;
  private readonly o: IdentityManagerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly backoff: Backoff;
  private svid: Svid | undefined;
  private lastError: string | undefined;
  private timer: Timer | undefined;
  private closed = false;
  private readonly listeners = new Set<(s: Svid) => void>();
  private readonly waiting: ((s: Svid) => void)[] = [];
  private firstAttempt: Promise<void> | undefined;

  constructor(o: IdentityManagerOptions) {
    this.o = o;
    this.id = o.id;
    this.clock = o.clock ?? SYSTEM_CLOCK;
    this.log = o.log.child({ scope: 'identity' });
    this.backoff = new Backoff(o.backoff ?? DEFAULT_BACKOFF);
  }

  /** The SPIFFE ID this sidecar asks for. */
  get uri(): string {
    return spiffeUri(this.id);
  }

  /** Starts asking; settles after the first attempt, whether it got a certificate or not. */
  start(): Promise<void> {
    this.firstAttempt ??= this.attempt();
    return this.firstAttempt;
  }

  /** The identity in force, or undefined before the first certificate. */
  get current(): Svid | undefined {
    return this.svid;
  }

  /** The roots to trust now: the issuer's, or the configured anchors before its first answer. */
  get bundlePem(): string | undefined {
    return this.svid?.bundlePem ?? this.o.trustAnchorsPem;
  }

  /** Resolves with the first certificate (at once when there is one). */
  ready(): Promise<Svid> {
    if (this.svid) return Promise.resolve(this.svid);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Called with every new certificate (first and renewals); returns the way to stop. */
  onRotate(fn: (s: Svid) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Why this sidecar has no usable identity now (for /v1.0/healthz), or undefined. */
  problem(): string | undefined {
    if (!this.svid) return `no workload certificate yet from the ${this.o.signer.description}${this.lastError ? `: ${this.lastError}` : ''}`;
    if (this.svid.notAfter <= this.clock.now()) return `the workload certificate expired at ${new Date(this.svid.notAfter).toISOString()} and the ${this.o.signer.description} has not renewed it${this.lastError ? `: ${this.lastError}` : ''}`;
    return undefined;
  }

  /** Seconds until the certificate's notAfter (negative once expired), undefined before the first. */
  secondsLeft(): number | undefined {
    return this.svid ? (this.svid.notAfter - this.clock.now()) / 1000 : undefined;
  }

  close(): void {
    this.closed = true;
    this.timer?.cancel();
    this.o.signer.close?.();
  }

  private async attempt(): Promise<void> {
    if (this.closed) return;
    try {
      const svid = await this.request();
      if (this.closed) return;
      if (this.svid && svid.certPem === this.svid.certPem) {
        // a source that renews by itself has not yet: look again soon, well before the end
        this.schedule(Math.min(RELOAD_POLL_MS, Math.max(this.backoff.policy.initialMs, (this.svid.notAfter - this.clock.now()) / 4)));
        return;
      }
      const renewed = this.svid !== undefined;
      this.svid = svid;
      this.lastError = undefined;
      this.backoff.reset();
      this.log.info({ spiffeId: this.uri, notAfter: new Date(svid.notAfter).toISOString() }, renewed ? 'workload certificate renewed' : 'workload certificate issued');
      for (const fn of this.listeners) fn(svid);
      for (const resolve of this.waiting.splice(0)) resolve(svid);
      this.schedule(this.renewalDelay(svid));
    } catch (e) {
      if (this.closed) return;
      this.lastError = (e as Error).message;
      // nearer the end of the current certificate, tries come more often than the backoff would have them
      const left = this.svid ? this.svid.notAfter - this.clock.now() : 0;
      const delay = left > 0 ? Math.min(this.backoff.next(), Math.max(this.backoff.policy.initialMs, left / 4)) : this.backoff.next();
      this.failed(delay);
      this.schedule(delay);
    }
  }

  private schedule(ms: number): void {
    this.timer?.cancel();
    if (this.closed) return;
    this.timer = this.clock.after(ms, () => void this.attempt());
  }

  /** renewAt of the life left when it arrived, spread by the jitter. */
  private renewalDelay(s: Svid): number {
    const life = Math.max(0, s.notAfter - s.receivedAt);
    const spread = (this.o.jitter ?? 0.05) * (2 * Math.random() - 1);
    return Math.max(0, life * ((this.o.renewAt ?? 0.7) + spread));
  }

  private failed(retryMs: number): void {
    const s = this.svid;
    const retry = `retrying in ${Math.round(retryMs)} ms`;
    if (!s) {
      this.log.warn({ spiffeId: this.uri }, `no workload certificate from the ${this.o.signer.description}: ${this.lastError}; ${retry} (the internal port waits for it)`);
      return;
    }
    const left = s.notAfter - this.clock.now();
    const life = s.notAfter - s.receivedAt;
    if (left <= 0) this.log.error({ spiffeId: this.uri }, `the workload certificate has expired and the ${this.o.signer.description} does not renew it: ${this.lastError}; ${retry}`);
    else if (left < (this.o.warnAt ?? 0.1) * life) this.log.warn({ spiffeId: this.uri, secondsLeft: Math.round(left / 1000) }, `the workload certificate expires in ${Math.round(left / 1000)} s and renewal keeps failing: ${this.lastError}; ${retry}`);
    else this.log.warn({ spiffeId: this.uri }, `renewing the workload certificate failed (the current one serves until ${new Date(s.notAfter).toISOString()}): ${this.lastError}; ${retry}`);
  }

  private async request(): Promise<Svid> {
    let key: { keyPem: string; key: KeyObject };
    let signed: SignedCertificate;
    if (this.o.signer.load) {
      const loaded = await this.o.signer.load(this.id);
      key = { keyPem: loaded.keyPem, key: createPrivateKey(loaded.keyPem) };
      signed = loaded;
      if (this.svid?.certPem === signed.certPem) return { ...this.svid };
    } else {
      key = newWorkloadKey();
      signed = await this.o.signer.sign(await createCsr(key, this.id), this.id);
    }
    const receivedAt = this.clock.now();
    // what came back must name this workload and carry this key: anything else would fail every handshake later
    const leaf = new X509Certificate(signed.certPem);
    const named = certificateWorkload(leaf);
    if (!named || !sameWorkload(named, this.id)) throw new Error(`the issuer answered a certificate for ${leaf.subjectAltName ?? 'no SPIFFE ID'}, not ${this.uri}`);
    if (!leaf.checkPrivateKey(key.key)) throw new Error('the issuer answered a certificate for another key');
    const roots = signed.trustChainPems.flatMap((p) => splitPemBundle(p));
    const bundlePem = roots.length ? roots.join('') : this.o.trustAnchorsPem;
    if (!bundlePem) throw new Error('the issuer sent no trust chain and no trust anchors are configured (RT_TRUST_ANCHORS_FILE)');
    return { id: this.id, keyPem: key.keyPem, certPem: signed.certPem, bundlePem, notAfter: signed.notAfter.getTime(), receivedAt };
  }
}
