/**
 * Keys of the local crypto providers (crypto.dapr.localstorage, crypto.dapr.jwks) and what they
 * do with them, as the reference's local providers do:
 *  - a key is a JWK (JSON), PEM (PKCS#1, PKCS#8, SPKI) or raw symmetric bytes (optionally base64
 *    or base64url), told apart by a hint (the file's extension) or else by its first bytes;
 *  - a JWK's `use` / `key_ops` must allow wrapKey / unwrapKey, and its `alg`, when set, must be
 *    the algorithm asked for;
 *  - A256KW (RFC 3394) wraps with a 256-bit symmetric key, RSA-OAEP-256 with an RSA key (the
 *    public half wraps, the private key unwraps). Every other algorithm is refused: the format's
 *    A*CBC-NOPAD names are not done by the reference's local providers either, and ECDH-ES is
 *    not a key-wrap algorithm of the format.
 */
import { constants, createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, privateDecrypt, publicEncrypt, type JsonWebKey, type KeyObject } from 'node:crypto';
import { KeyError } from './types.ts';

export interface StoredKey {
  /** Symmetric bytes, or an asymmetric key object. */
  secret?: Buffer;
  key?: KeyObject;
  alg?: string;
  use?: string;
  keyOps?: string[];
}

export type KeyFormat = 'json' | 'pem' | undefined;

/** Parses key material; a KeyError says what it is not. */
export function parseKey(raw: Buffer, format?: KeyFormat): StoredKey {
  if (raw.length === 0) throw new KeyError('the key is empty');
  const looksJson = raw[0] === 0x7b && raw.length !== 16 && raw.length !== 24 && raw.length !== 32;
  const looksPem = raw.length > 10 && raw.subarray(0, 5).toString('latin1') === '-----';
  if (format === 'json' || (format === undefined && looksJson)) {
    let jwk: unknown;
    try {
      jwk = JSON.parse(raw.toString('utf8'));
    } catch (e) {
      throw new KeyError(`the key is not valid JSON: ${(e as Error).message}`);
    }
    return keyFromJwk(jwk);
  }
  if (format === 'pem' || (format === undefined && looksPem)) return keyFromPem(raw);
  return { secret: symmetricBytes(raw) };
}

function keyFromPem(pem: Buffer): StoredKey {
  try {
    return { key: createPrivateKey(pem) };
  } catch {
    try {
      return { key: createPublicKey(pem) };
    } catch (e) {
      throw new KeyError(`the key is not a PEM private or public key: ${(e as Error).message}`);
    }
  }
}

/** A JWK (an object with `kty`); its `alg`, `use` and `key_ops` are kept for the checks. */
export function keyFromJwk(jwk: unknown): StoredKey {
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw new KeyError('the key is not a JWK object');
  const j = jwk as JsonWebKey & { alg?: unknown; use?: unknown; key_ops?: unknown };
  const meta: StoredKey = {};
  if (typeof j.alg === 'string' && j.alg) meta.alg = j.alg;
  if (typeof j.use === 'string' && j.use) meta.use = j.use;
  if (Array.isArray(j.key_ops)) meta.keyOps = j.key_ops.filter((o): o is string => typeof o === 'string');
  try {
    switch (j.kty) {
      case 'oct':
        if (typeof j.k !== 'string' || !j.k || !B64URL.test(j.k.replace(/=+$/, ''))) throw new Error('an "oct" key needs "k" in base64url');
        return { ...meta, secret: Buffer.from(j.k, 'base64url') };
      case 'RSA':
      case 'EC':
      case 'OKP':
        return { ...meta, key: j.d ? createPrivateKey({ key: j, format: 'jwk' }) : createPublicKey({ key: j, format: 'jwk' }) };
      default:
        throw new Error(`key type "${String(j.kty).slice(0, 20)}" is not one of oct, RSA, EC, OKP`);
    }
  } catch (e) {
    throw new KeyError(`the JWK is not a usable key: ${(e as Error).message}`);
  }
}

const STD = /^[A-Za-z0-9+/]*$/;
const B64URL = /^[A-Za-z0-9_-]*$/;

/** Raw symmetric key bytes: base64 (standard, then URL-safe; padding and newlines trimmed) or the bytes as they are. */
function symmetricBytes(raw: Buffer): Buffer {
  let end = raw.length;
  while (end > 0 && (raw[end - 1] === 0x0a || raw[end - 1] === 0x3d)) end--;
  const text = raw.subarray(0, end).toString('latin1');
  if (text.length % 4 !== 1 && (STD.test(text) || B64URL.test(text))) return Buffer.from(text, STD.test(text) ? 'base64' : 'base64url');
  return raw;
}

type Operation = 'wrapKey' | 'unwrapKey';

/** The reference's KeyCanPerformOperation and KeyCanPerformAlgorithm. */
function checkUsable(k: StoredKey, op: Operation, algorithm: string): void {
  if (k.keyOps && k.keyOps.length > 0 && !k.keyOps.includes(op)) throw new KeyError(`the key cannot perform the '${op}' operation`);
  if (k.use && k.use !== 'enc') throw new KeyError(`the key cannot perform the '${op}' operation (its use is "${k.use}")`);
  if (k.alg && k.alg !== algorithm) throw new KeyError(`the key cannot be used with algorithm '${algorithm}' (it is for '${k.alg}')`);
}

const KW_IV = Buffer.from('A6A6A6A6A6A6A6A6', 'hex');

function aesKwKey(k: StoredKey): Buffer {
  if (!k.secret || k.secret.length !== 32) throw new KeyError('key type mismatch: A256KW needs a 256-bit symmetric key');
  return k.secret;
}

function rsaKey(k: StoredKey, needPrivate: boolean): KeyObject {
  if (!k.key || k.key.asymmetricKeyType !== 'rsa') throw new KeyError('key type mismatch: RSA-OAEP-256 needs an RSA key');
  if (needPrivate && k.key.type !== 'private') throw new KeyError('key type mismatch: unwrapping with RSA-OAEP-256 needs the private key');
  return k.key;
}

function unsupported(algorithm: string): KeyError {
  return new KeyError(`unsupported algorithm '${algorithm}': this provider wraps keys with A256KW or RSA-OAEP-256`);
}

export function wrapWith(k: StoredKey, algorithm: string, plaintext: Buffer): Buffer {
  checkUsable(k, 'wrapKey', algorithm);
  switch (algorithm) {
    case 'A256KW': {
      const c = createCipheriv('id-aes256-wrap', aesKwKey(k), KW_IV);
      return Buffer.concat([c.update(plaintext), c.final()]);
    }
    case 'RSA-OAEP-256':
      return publicEncrypt({ key: rsaKey(k, false), padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, plaintext);
    default:
      throw unsupported(algorithm);
  }
}

export function unwrapWith(k: StoredKey, algorithm: string, wrapped: Buffer): Buffer {
  checkUsable(k, 'unwrapKey', algorithm);
  try {
    switch (algorithm) {
      case 'A256KW': {
        const d = createDecipheriv('id-aes256-wrap', aesKwKey(k), KW_IV);
        return Buffer.concat([d.update(wrapped), d.final()]);
      }
      case 'RSA-OAEP-256':
        return privateDecrypt({ key: rsaKey(k, true), padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, wrapped);
      default:
        throw unsupported(algorithm);
    }
  } catch (e) {
    if (e instanceof KeyError) throw e;
    throw new KeyError('failed to unwrap the key: it was not wrapped with this key');
  }
}
