/**
 * Loopback stand-in for Microsoft Entra ID (the cloud identity provider), speaking the real
 * protocol the SDKs use:
 *   GET  /<tenant>/v2.0/.well-known/openid-configuration   OpenID configuration
 *   POST /<tenant>/oauth2/v2.0/token                        client-credentials grant → RS256 JWT
 *   GET  /<tenant>/discovery/v2.0/keys                      JWKS
 * It also mints the delivery tokens the event-routing service would send to a webhook.
 */
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import type { TestCa } from '../ca.ts';
import { json, startHttps } from './https.ts';

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

export interface MintOptions {
  aud: string;
  /** Default: the v2 issuer. */
  iss?: string;
  /** Seconds from now; negative = already expired. Default 3600. */
  expiresIn?: number;
  /** Sign with a key the JWKS does not publish (a forged signature). */
  foreignKey?: boolean;
  /** Sign with the current key but claim another kid (signature mismatch on a known kid). */
  kid?: string;
  claims?: JWTPayload;
}

export interface EntraStandIn {
  /** The authority host, e.g. https://127.0.0.1:1234. */
  url: string;
  tenantId: string;
  issuerV2: string;
  issuerV1: string;
  /** Client credentials the token endpoint accepts. */
  addClient(clientId: string, secret: string): void;
  tokenRequests: { clientId: string; scope: string }[];
  jwksRequests: number;
  /** Signs a JWT with the tenant's current key. */
  mint(opts: MintOptions): Promise<string>;
  /** Publishes a new signing key (and keeps the old one unless dropOld). */
  rotateKeys(dropOld?: boolean): Promise<void>;
  /** Verifies an access token this stand-in issued for `audience`. */
  verify(token: string, audience: string): Promise<JWTPayload>;
  close(): Promise<void>;
}

async function newKey(): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = randomUUID().replace(/-/g, '').slice(0, 20);
  const jwk = { ...(await exportJWK(publicKey)), kid, use: 'sig', alg: 'RS256', kty: 'RSA' };
  return { kid, privateKey, publicKey, jwk };
}

export async function startEntraStandIn(ca: TestCa, tenantId = randomUUID()): Promise<EntraStandIn> {
  let keys: SigningKey[] = [await newKey()];
  const foreign = await newKey();
  const clients = new Map<string, string>();
  const state = { jwksRequests: 0, tokenRequests: [] as { clientId: string; scope: string }[] };
  let base = '';

  const sign = async (payload: JWTPayload, key: SigningKey, kid: string, expiresIn: number) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ ver: '2.0', tid: tenantId, ...payload })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid })
      .setIssuedAt(now - 5)
      .setNotBefore(now - 5)
      .setExpirationTime(now + expiresIn)
      .setJti(randomUUID())
      .sign(key.privateKey);
  };

  const server = await startHttps(ca, async (req, res, body) => {
    const u = new URL(req.url ?? '/', 'https://x');
    const parts = u.pathname.split('/').filter(Boolean);
    const tenant = parts[0];
    const rest = parts.slice(1).join('/');
    if (tenant !== tenantId) return json(res, 400, { error: 'invalid_tenant', error_description: `AADSTS90002: Tenant '${tenant}' not found.` });
    if (req.method === 'GET' && rest === 'v2.0/.well-known/openid-configuration') {
      return json(res, 200, {
        issuer: `${base}/${tenantId}/v2.0`,
        authorization_endpoint: `${base}/${tenantId}/oauth2/v2.0/authorize`,
        token_endpoint: `${base}/${tenantId}/oauth2/v2.0/token`,
        device_authorization_endpoint: `${base}/${tenantId}/oauth2/v2.0/devicecode`,
        end_session_endpoint: `${base}/${tenantId}/oauth2/v2.0/logout`,
        jwks_uri: `${base}/${tenantId}/discovery/v2.0/keys`,
        response_modes_supported: ['query', 'fragment', 'form_post'],
        response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
        scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
        subject_types_supported: ['pairwise'],
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
        tenant_region_scope: 'EU',
        cloud_instance_name: 'microsoftonline.com',
      });
    }
    if (req.method === 'GET' && rest === 'discovery/v2.0/keys') {
      state.jwksRequests++;
      return json(res, 200, { keys: keys.map((k) => k.jwk) });
    }
    if (req.method === 'POST' && rest === 'oauth2/v2.0/token') {
      const form = new URLSearchParams(body.toString('utf8'));
      const clientId = form.get('client_id') ?? '';
      const secret = form.get('client_secret') ?? '';
      const scope = form.get('scope') ?? '';
      if (form.get('grant_type') !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type', error_description: 'AADSTS70003: grant type not supported' });
      const known = clients.get(clientId);
      if (known === undefined || known !== secret) {
        return json(res, 401, { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.', error_codes: [7000215] });
      }
      const resource = scope.split(' ').find((s) => s.endsWith('/.default'));
      if (!resource) return json(res, 400, { error: 'invalid_scope', error_description: 'AADSTS1002012: The provided value for scope is not valid.' });
      state.tokenRequests.push({ clientId, scope });
      const aud = resource.slice(0, -'/.default'.length);
      const token = await sign({ aud, iss: `https://sts.windows.net/${tenantId}/`, appid: clientId, azp: clientId, sub: clientId, oid: clientId, ver: '1.0' }, keys[0], keys[0].kid, 3600);
      return json(res, 200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: token });
    }
    return json(res, 404, { error: 'not_found', error_description: `${req.method} ${u.pathname} is not served by the stand-in` });
  });
  base = server.url;

  return {
    url: base,
    tenantId,
    issuerV2: `${base}/${tenantId}/v2.0`,
    issuerV1: `https://sts.windows.net/${tenantId}/`,
    addClient: (id, secret) => clients.set(id, secret),
    tokenRequests: state.tokenRequests,
    get jwksRequests() {
      return state.jwksRequests;
    },
    mint: async (o) => {
      const key = o.foreignKey ? foreign : keys[0];
      return sign({ aud: o.aud, iss: o.iss ?? `${base}/${tenantId}/v2.0`, ...o.claims }, key, o.kid ?? key.kid, o.expiresIn ?? 3600);
    },
    rotateKeys: async (dropOld = false) => {
      const k = await newKey();
      keys = dropOld ? [k] : [k, ...keys];
    },
    verify: async (token, audience) => {
      const { payload } = await jwtVerify(token, async (header) => {
        const k = keys.find((x) => x.kid === header.kid);
        if (!k) throw new Error('unknown kid');
        return k.publicKey;
      }, { audience, issuer: `https://sts.windows.net/${tenantId}/` });
      return payload;
    },
    close: () => server.close(),
  } as EntraStandIn;
}
