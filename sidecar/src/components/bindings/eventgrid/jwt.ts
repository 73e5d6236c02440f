/**
 * Validates the bearer tokens the event-routing service sends with each webhook delivery:
 * issued by the tenant (v1 or v2 issuer), for our application (audience), signed by a key
 * in the tenant's JWKS. Keys come from the OpenID configuration's jwks_uri and are cached by
 * jose; an unknown key id (rotation) triggers a refetch, at most once per cooldown.
 */
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';

export interface TokenValidatorOptions {
  authorityHost: string;
  tenantId: string;
  /** Accepted `aud` values. */
  audiences: string[];
  jwksRefreshCooldownMs: number;
  /** Bound on fetching the OpenID configuration and the JWKS. */
  fetchTimeoutMs?: number;
}

export type TokenCheck =
  | { ok: true; claims: JWTPayload }
  /** `unavailable`: keys could not be fetched; the sender should retry later (503). */
  | { ok: false; reason: string; unavailable?: boolean };

type KeySet = ReturnType<typeof createRemoteJWKSet>;

const CLOCK_TOLERANCE_S = 60;
/** Verified tokens are remembered this long at most (and never past their `exp`). */
const CACHE_TTL_MS = 5 * 60_000;
const CACHE_MAX = 1000;

export class TokenValidator {
  private readonly opts: TokenValidatorOptions;
  private discovery?: Promise<{ issuers: string[]; keys: KeySet }>;
  /** Tokens that passed verification: token → time until which it may be trusted. */
  private readonly verified = new Map<string, number>();

  constructor(opts: TokenValidatorOptions) {
    this.opts = opts;
  }

  /** The OpenID configuration URL of the tenant (v2 endpoint). */
  get configurationUrl(): string {
    return `${this.opts.authorityHost}/${encodeURIComponent(this.opts.tenantId)}/v2.0/.well-known/openid-configuration`;
  }

  /** Fetches the OpenID configuration now (at start), so the first delivery does not pay for it. */
  async warmUp(): Promise<void> {
    await this.discover();
  }

  async check(authorization: string | undefined): Promise<TokenCheck> {
    if (!authorization) return { ok: false, reason: 'missing Authorization header with a bearer token' };
    const m = /^Bearer[ ]+([A-Za-z0-9_.~+/=-]+)\s*$/i.exec(authorization);
    if (!m) return { ok: false, reason: 'the Authorization header is not "Bearer <token>"' };
    const token = m[1];
    const until = this.verified.get(token);
    if (until !== undefined) {
      if (until > Date.now()) return { ok: true, claims: {} };
      this.verified.delete(token);
    }
    let d;
    try {
      d = await this.discover();
    } catch (e) {
      return { ok: false, reason: `cannot load the tenant's signing keys: ${(e as Error).message}`, unavailable: true };
    }
    try {
      const { payload } = await jwtVerify(token, d.keys, {
        issuer: d.issuers,
        audience: this.opts.audiences,
        algorithms: ['RS256'],
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp', 'iss', 'aud'],
      });
      this.remember(token, payload);
      return { ok: true, claims: payload };
    } catch (e) {
      return classify(e);
    }
  }

  private remember(token: string, payload: JWTPayload): void {
    const until = Math.min(Date.now() + CACHE_TTL_MS, (payload.exp ?? 0) * 1000);
    if (this.verified.size >= CACHE_MAX) {
      // drop the oldest entry (Map keeps insertion order)
      const first = this.verified.keys().next();
      if (!first.done) this.verified.delete(first.value);
    }
    this.verified.set(token, until);
  }

  private discover(): Promise<{ issuers: string[]; keys: KeySet }> {
    if (!this.discovery) {
      this.discovery = this.load().catch((e) => {
        this.discovery = undefined; // try again on the next delivery
        throw e;
      });
    }
    return this.discovery;
  }

  private async load(): Promise<{ issuers: string[]; keys: KeySet }> {
    const timeout = this.opts.fetchTimeoutMs ?? 10_000;
    const res = await fetch(this.configurationUrl, { signal: AbortSignal.timeout(timeout) }).catch((e: Error) => {
      throw new Error(`GET ${this.configurationUrl} failed: ${(e.cause as Error | undefined)?.message ?? e.message}`);
    });
    if (!res.ok) throw new Error(`GET ${this.configurationUrl} answered ${res.status}`);
    const cfg = (await res.json().catch(() => ({}))) as { issuer?: unknown; jwks_uri?: unknown };
    if (typeof cfg.issuer !== 'string' || typeof cfg.jwks_uri !== 'string') {
      throw new Error(`${this.configurationUrl} has no issuer or jwks_uri`);
    }
    const jwksUri = new URL(cfg.jwks_uri);
    if (jwksUri.protocol !== 'https:') throw new Error(`jwks_uri ${jwksUri.origin} is not https`);
    // tokens for an app that accepts v1 tokens carry the v1 issuer of the same tenant
    const tid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i.exec(cfg.issuer)?.[0] ?? this.opts.tenantId;
    const issuers = [cfg.issuer, `https://sts.windows.net/${tid}/`];
    const keys = createRemoteJWKSet(jwksUri, {
      cooldownDuration: this.opts.jwksRefreshCooldownMs,
      cacheMaxAge: 24 * 3_600_000,
      timeoutDuration: timeout,
    });
    return { issuers, keys };
  }
}

function classify(e: unknown): TokenCheck {
  if (e instanceof joseErrors.JWTExpired) return { ok: false, reason: 'the token has expired' };
  if (e instanceof joseErrors.JWTClaimValidationFailed) {
    if (e.claim === 'aud') return { ok: false, reason: 'the token is not for this application (audience)' };
    if (e.claim === 'iss') return { ok: false, reason: 'the token was not issued by the configured tenant (issuer)' };
    if (e.claim === 'nbf') return { ok: false, reason: 'the token is not valid yet' };
    return { ok: false, reason: `the token's "${e.claim}" claim is invalid` };
  }
  if (e instanceof joseErrors.JWSSignatureVerificationFailed) return { ok: false, reason: 'the token signature is invalid' };
  if (e instanceof joseErrors.JWKSNoMatchingKey) return { ok: false, reason: "the token is not signed by a key of the tenant's key set" };
  if (e instanceof joseErrors.JOSEAlgNotAllowed) return { ok: false, reason: 'the token uses a signing algorithm that is not accepted' };
  if (e instanceof joseErrors.JWKSTimeout) return { ok: false, reason: "the tenant's key set did not download in time", unavailable: true };
  if (e instanceof joseErrors.JWKSInvalid) return { ok: false, reason: "the tenant's key set is invalid", unavailable: true };
  if (e instanceof joseErrors.JOSEError) return { ok: false, reason: 'the token is malformed' };
  // network errors while fetching keys
  return { ok: false, reason: `cannot load the tenant's signing keys: ${(e as Error)?.message ?? String(e)}`, unavailable: true };
}
