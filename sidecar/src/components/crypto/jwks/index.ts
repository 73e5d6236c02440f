/**
 * crypto.dapr.jwks: keys from a JSON Web Key Set, named by their `kid`. The set is, as the
 * reference reads `jwks`: an https:// URL (fetched at start with the certificate verified,
 * then again every `minRefreshInterval`, keeping the last good set when a fetch fails), the
 * path of a file (read again when it changes), or the JSON itself, optionally base64. A plain
 * http:// URL is refused (the reference only warns): keys must not travel unauthenticated.
 */
import { readFile, stat } from 'node:fs/promises';
import { get } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import { decodeMetadata } from '../../metadata/decode.ts';
import type { ComponentContext, ComponentSpec } from '../../types.ts';
import { keyFromJwk, unwrapWith, wrapWith, type StoredKey } from '../keys.ts';
import { KeyError, type CryptoProvider, type UnwrapKeyRequest, type WrapKeyRequest } from '../types.ts';
import { METADATA } from './metadata.ts';

/** A JWKS larger than this is refused (a set of a few hundred keys is far smaller). */
const MAX_JWKS_BYTES = 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]+$/;

/** A JWKS document → its keys by kid (keys without a kid cannot be named, and are skipped). */
export function parseJwks(text: string): Map<string, StoredKey> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new Error(`the JWKS is not valid JSON: ${(e as Error).message}`);
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error('the JWKS has no "keys" array');
  const out = new Map<string, StoredKey>();
  keys.forEach((jwk: unknown, i) => {
    const kid = (jwk as { kid?: unknown } | null)?.kid;
    if (typeof kid !== 'string' || !kid) return;
    try {
      out.set(kid, keyFromJwk(jwk));
    } catch (e) {
      throw new Error(`key ${i} ("${kid.slice(0, 40)}") of the JWKS: ${(e as Error).message}`);
    }
  });
  return out;
}

type Source = { kind: 'inline' } | { kind: 'file'; path: string; version: string } | { kind: 'url'; url: string };

class JwksCrypto implements CryptoProvider {
  private keys = new Map<string, StoredKey>();
  private source: Source = { kind: 'inline' };
  private timer: NodeJS.Timeout | undefined;
  private log!: Logger;
  private timeoutMs = 30_000;
  private ca: string | undefined;

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    this.log = ctx.log.child({ component: spec.name });
    this.timeoutMs = md.requestTimeout >= 1 ? md.requestTimeout : 30_000;
    this.ca = md.caCertificate;
    const jwks = md.jwks;
    if (/^https:\/\//i.test(jwks)) {
      this.source = { kind: 'url', url: jwks };
      this.keys = parseJwks(await this.fetch(jwks));
      const every = md.minRefreshInterval >= 1000 ? md.minRefreshInterval : 600_000;
      this.timer = setInterval(() => void this.refresh(), every);
      this.timer.unref();
      return;
    }
    if (/^http:\/\//i.test(jwks)) throw new Error('the JWKS URL must be https:// (a key set fetched over plain HTTP could be replaced on the way)');
    const info = await stat(jwks).catch(() => undefined);
    if (info?.isFile()) {
      this.source = { kind: 'file', path: jwks, version: '' };
      await this.reload(true);
      return;
    }
    const trimmed = jwks.trim().replace(/=+$/, '');
    const text = BASE64.test(trimmed) ? Buffer.from(trimmed, 'base64').toString('utf8') : jwks;
    try {
      this.keys = parseJwks(text);
    } catch (e) {
      throw new Error(`metadata field "jwks" is not a URL, the path of a local file, or a JSON value (optionally base64-encoded): ${(e as Error).message}`);
    }
  }

  private fetch(url: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = get(url, { timeout: this.timeoutMs, ...(this.ca ? { ca: [...rootCertificates, this.ca] } : {}) }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`fetching the JWKS from ${url} answered ${res.statusCode}`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_JWKS_BYTES) {
            req.destroy(new Error(`the JWKS at ${url} is larger than ${MAX_JWKS_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`fetching the JWKS from ${url} took longer than ${this.timeoutMs} ms`)));
      req.on('error', (e) => reject(new Error(`failed to fetch the JWKS from ${url}: ${e.message}`)));
    });
  }

  private async refresh(): Promise<void> {
    if (this.source.kind !== 'url') return;
    try {
      this.keys = parseJwks(await this.fetch(this.source.url));
    } catch (e) {
      this.log.warn({ err: e }, 'refreshing the JWKS failed; keeping the last one');
    }
  }

  /** Re-reads the file when its size or time changed; at start a failure is the component's. */
  private async reload(first = false): Promise<void> {
    if (this.source.kind !== 'file') return;
    const s = this.source;
    try {
      const info = await stat(s.path);
      const version = `${info.size}:${info.mtimeMs}`;
      if (version === s.version) return;
      this.keys = parseJwks(await readFile(s.path, 'utf8'));
      s.version = version;
    } catch (e) {
      if (first) throw new Error(`failed to read the JWKS file ${s.path}: ${(e as Error).message}`);
      this.log.warn({ err: e }, 'reading the changed JWKS file failed; keeping the last one');
    }
  }

  private async key(kid: string): Promise<StoredKey> {
    await this.reload();
    const k = this.keys.get(kid);
    if (!k) throw new KeyError(`key '${kid.slice(0, 80)}' not found in the JWKS`);
    return k;
  }

  capabilities(): string[] {
    return [];
  }

  async wrapKey(req: WrapKeyRequest): Promise<Buffer> {
    return wrapWith(await this.key(req.keyName), req.algorithm, req.plaintextKey);
  }

  async unwrapKey(req: UnwrapKeyRequest): Promise<Buffer> {
    return unwrapWith(await this.key(req.keyName), req.algorithm, req.wrappedKey);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
  }
}

export const factory = () => new JwksCrypto();
