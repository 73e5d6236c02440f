/**
 * The names and numbers of the "dapr.io/enc/v1" stream format (docs/crypto.md), as the
 * reference runtime writes them: the key-wrap algorithms and data ciphers a manifest may name,
 * their aliases, and the manifest line itself. Any name or number outside these tables is
 * refused with a SchemeError saying which.
 */

export const SCHEME_NAME = 'dapr.io/enc/v1';
/** Plaintext bytes per segment; the last segment may be shorter, none is empty. */
export const SEGMENT_SIZE = 64 * 1024;
/** The AEAD tag after each segment's ciphertext. */
export const SEGMENT_OVERHEAD = 16;
export const NONCE_PREFIX_LENGTH = 7;
export const FILE_KEY_LENGTH = 32;
/** The header (three lines) must fit in one segment. */
export const MAX_HEADER_LENGTH = SEGMENT_SIZE;

/** What went wrong is the caller's input (names, keys, ciphertext), never ours: a 400. */
export class SchemeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemeError';
  }
}

/** Key-wrap algorithms by manifest number. */
const KEY_ALGORITHMS: Record<number, string> = { 1: 'A256KW', 2: 'A128CBC-NOPAD', 3: 'A192CBC-NOPAD', 4: 'A256CBC-NOPAD', 5: 'RSA-OAEP-256' };
const KEY_ALIASES: Record<string, string> = { AES: 'A256KW', RSA: 'RSA-OAEP-256' };
const CIPHERS: Record<number, string> = { 1: 'AES-GCM', 2: 'CHACHA20-POLY1305' };

export const KEY_WRAP_ALGORITHMS = Object.values(KEY_ALGORITHMS);
export const DATA_CIPHERS = Object.values(CIPHERS);

/** A key-wrap algorithm's name (any case; AES and RSA are aliases) → its canonical name and number. */
export function keyAlgorithm(name: string): { name: string; id: number } {
  const upper = name.toUpperCase();
  const canonical = KEY_ALIASES[upper] ?? upper;
  const id = Number(Object.keys(KEY_ALGORITHMS).find((k) => KEY_ALGORITHMS[Number(k)] === canonical));
  if (!id) throw new SchemeError(`key wrap algorithm "${clip(name)}" is not supported; supported: ${KEY_WRAP_ALGORITHMS.join(', ')} (aliases AES, RSA)`);
  return { name: canonical, id };
}

/** A data cipher's name (any case) → its canonical name and number; empty is AES-GCM. */
export function dataCipher(name: string | undefined): { name: string; id: number } {
  const upper = (name || 'AES-GCM').toUpperCase();
  const id = Number(Object.keys(CIPHERS).find((k) => CIPHERS[Number(k)] === upper));
  if (!id) throw new SchemeError(`data encryption cipher "${clip(name ?? '')}" is not supported; supported: ${DATA_CIPHERS.join(', ')}`);
  return { name: upper, id };
}

export interface Manifest {
  /** The key that decrypts, when the writer named it. */
  keyName?: string;
  keyAlgorithm: string;
  wrappedKey: Buffer;
  cipher: string;
  noncePrefix: Buffer;
}

/**
 * The manifest line as the reference writes it: compact JSON, members in the order k, kw, wfk,
 * cph, np, k left out when empty, byte strings in standard base64 with padding.
 */
export function encodeManifest(m: Manifest): Buffer {
  const json: Record<string, unknown> = {};
  if (m.keyName) json.k = m.keyName;
  json.kw = keyAlgorithm(m.keyAlgorithm).id;
  json.wfk = m.wrappedKey.toString('base64');
  json.cph = dataCipher(m.cipher).id;
  json.np = m.noncePrefix.toString('base64');
  return Buffer.from(JSON.stringify(json), 'utf8');
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Reads a manifest line; any problem is one message (the reference discloses no more either). */
export function decodeManifest(line: Buffer): Manifest {
  const invalid = () => new SchemeError('invalid header: invalid manifest');
  let json: unknown;
  try {
    json = JSON.parse(line.toString('utf8'));
  } catch {
    throw invalid();
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw invalid();
  const o = json as Record<string, unknown>;
  const { k, kw, wfk, cph, np } = o;
  if (k !== undefined && k !== null && typeof k !== 'string') throw invalid();
  if (typeof kw !== 'number' || !KEY_ALGORITHMS[kw] || typeof cph !== 'number' || !CIPHERS[cph]) throw invalid();
  if (typeof wfk !== 'string' || typeof np !== 'string' || !BASE64.test(wfk) || !BASE64.test(np)) throw invalid();
  const wrappedKey = Buffer.from(wfk, 'base64');
  const noncePrefix = Buffer.from(np, 'base64');
  if (wrappedKey.length === 0 || noncePrefix.length !== NONCE_PREFIX_LENGTH) throw invalid();
  return { ...(k ? { keyName: k } : {}), keyAlgorithm: KEY_ALGORITHMS[kw], wrappedKey, cipher: CIPHERS[cph], noncePrefix };
}

/** Standard base64 with padding, as the header's MAC line must be. */
export function isBase64(s: string): boolean {
  return BASE64.test(s);
}

export function clip(s: string, n = 80): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
