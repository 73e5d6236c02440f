/**
 * The "dapr.io/enc/v1" stream format (sidecar/src/crypto/stream.ts):
 *  - the reference's published vectors (dapr/kit's enc/v1 testdata, test/crypto/vectors/README.md)
 *    decrypt to the reference's plaintexts;
 *  - rt's output decrypts with an independent reader of the format written here (WebCrypto's
 *    AES-GCM / ChaCha20-Poly1305, @noble/hashes' HKDF and HMAC), for both ciphers;
 *  - a property over payload sizes around the segment boundaries round-trips and has the
 *    format's exact length;
 *  - an altered segment, a cut-off stream, an altered header and a wrong key each fail with a
 *    clear error, and no plaintext of or after the failing segment is handed on.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { hkdf } from '@noble/hashes/hkdf.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunked, collect } from './chunks.ts';
import { SchemeError, SEGMENT_SIZE } from '../../sidecar/src/crypto/scheme.ts';
import { decrypt, encrypt, type UnwrapKey, type WrapKey } from '../../sidecar/src/crypto/stream.ts';

const VECTORS = join(import.meta.dirname, 'vectors');

/** The reference's vectors' "wrapping": the file key as it is (their tests' fake wrap). */
const identityWrap: WrapKey = async (k) => Buffer.from(k);
const identityUnwrap: UnwrapKey = async (k) => Buffer.from(k);

/** The plaintexts of the reference's vectors, as its scheme_test.go builds them. */
const repeat = (pattern: number[], times: number) => Buffer.concat(Array.from({ length: times }, () => Buffer.from(pattern)));
const PLAINTEXTS: Record<string, Buffer> = {
  'empty-message': Buffer.alloc(0),
  'single-segment': Buffer.from('hello world'),
  'single-segment-no-key-name': Buffer.from('hello world'),
  'multi-segment': repeat([1, 2, 3, 4, 5, 6, 7, 8, 9, 0], 12 << 10),
  'one-full-segment': repeat([1, 2, 3, 4, 5, 6, 7, 8], 8 << 10),
  'two-full-segments': repeat([1, 2, 3, 4, 5, 6, 7, 8], 16 << 10),
  'large-file': repeat([1, 2, 3, 4, 5, 6, 7, 8, 9, 0], 30 << 10),
};

async function rtEncrypt(plain: Buffer, cipher = 'AES-GCM', extra: { omitDecryptionKeyName?: boolean; decryptionKeyName?: string } = {}): Promise<Buffer> {
  return collect(await encrypt(chunked(plain), { keyName: 'mykey', keyWrapAlgorithm: 'AES', dataEncryptionCipher: cipher, wrapKey: identityWrap, ...extra }));
}

/** An independent reader of the format, from its README (not rt's code). */
async function referenceDecrypt(doc: Buffer): Promise<{ manifest: Record<string, unknown>; plaintext: Buffer }> {
  const lines: Buffer[] = [];
  let at = 0;
  for (let i = 0; i < 3; i++) {
    const nl = doc.indexOf(10, at);
    lines.push(doc.subarray(at, nl));
    at = nl + 1;
  }
  expect(lines[0].toString()).toBe('dapr.io/enc/v1');
  const manifest = JSON.parse(lines[1].toString()) as { wfk: string; np: string; cph: number };
  const fileKey = Buffer.from(manifest.wfk, 'base64');
  const np = Buffer.from(manifest.np, 'base64');
  const macKey = hkdf(sha256, fileKey, new Uint8Array(0), Buffer.from('header'), 32);
  const mac = hmac(sha256, macKey, doc.subarray(0, lines[0].length + lines[1].length + 2));
  expect(Buffer.from(mac).toString('base64')).toBe(lines[2].toString());
  const payloadKey = hkdf(sha256, fileKey, np, Buffer.from('payload'), 32);
  const name = manifest.cph === 1 ? 'AES-GCM' : 'ChaCha20-Poly1305';
  const key = await webcrypto.subtle.importKey(manifest.cph === 1 ? 'raw' : ('raw-secret' as 'raw'), payloadKey, { name }, false, ['decrypt']);
  const body = doc.subarray(at);
  const out: Buffer[] = [];
  const seg = SEGMENT_SIZE + 16;
  for (let i = 0, n = 0; i < body.length; i += seg, n++) {
    const iv = Buffer.alloc(12);
    np.copy(iv);
    iv.writeUInt32BE(n, 7);
    iv[11] = i + seg >= body.length ? 1 : 0;
    out.push(Buffer.from(await webcrypto.subtle.decrypt({ name, iv }, key, body.subarray(i, i + seg))));
  }
  return { manifest, plaintext: Buffer.concat(out) };
}

describe("the reference's published vectors", () => {
  for (const [name, plain] of Object.entries(PLAINTEXTS)) {
    it(`${name}.enc decrypts to the reference's plaintext`, async () => {
      const doc = readFileSync(join(VECTORS, `${name}.enc`));
      const keyName = name.includes('no-key-name') ? 'mykey' : undefined;
      const out = await collect(await decrypt(chunked(doc, 1000), { keyName, unwrapKey: identityUnwrap }));
      expect(out.equals(plain)).toBe(true);
    });
  }

  it('a vector without a key name needs one', async () => {
    const doc = readFileSync(join(VECTORS, 'single-segment-no-key-name.enc'));
    await expect(decrypt(chunked(doc), { unwrapKey: identityUnwrap })).rejects.toThrow(/does not contain a key name, and no key name was provided/);
  });

  it('the header rt writes has the reference\'s manifest form (member order, no "k" when omitted)', async () => {
    const named = await rtEncrypt(Buffer.from('x'), 'AES-GCM', { decryptionKeyName: 'dec-key' });
    expect(named.toString('latin1').split('\n')[1]).toMatch(/^\{"k":"dec-key","kw":1,"wfk":"[A-Za-z0-9+/=]{44}","cph":1,"np":"[A-Za-z0-9+/=]{12}"\}$/);
    const omitted = await rtEncrypt(Buffer.from('x'), 'CHACHA20-POLY1305', { omitDecryptionKeyName: true, decryptionKeyName: 'ignored' });
    expect(omitted.toString('latin1').split('\n')[1]).toMatch(/^\{"kw":1,"wfk":"[^"]+","cph":2,"np":"[^"]+"\}$/);
  });
});

describe("rt's output, read by an independent implementation of the format", () => {
  for (const cipher of ['AES-GCM', 'CHACHA20-POLY1305']) {
    it(`${cipher}: every vector's plaintext`, async () => {
      for (const plain of Object.values(PLAINTEXTS)) {
        const doc = await rtEncrypt(plain, cipher);
        const { manifest, plaintext } = await referenceDecrypt(doc);
        expect(manifest.cph).toBe(cipher === 'AES-GCM' ? 1 : 2);
        expect(plaintext.equals(plain)).toBe(true);
      }
    });
  }

  it('a property: sizes around segment boundaries round-trip, with the exact length, through both ciphers and any chunking', async () => {
    const near = (n: number) => fc.integer({ min: Math.max(0, n - 3), max: n + 3 });
    const size = fc.oneof(fc.constantFrom(0, 1, 65535, 65536, 65537, 131071, 131072, 131073), near(SEGMENT_SIZE), near(2 * SEGMENT_SIZE), near(3 * SEGMENT_SIZE), fc.integer({ min: 0, max: 4 * SEGMENT_SIZE }));
    await fc.assert(
      fc.asyncProperty(size, fc.constantFrom('AES-GCM', 'CHACHA20-POLY1305'), fc.integer({ min: 1, max: 100_000 }), async (n, cipher, chunk) => {
        const plain = randomBytes(n);
        const doc = collect(await encrypt(chunked(plain, chunk), { keyName: 'k', keyWrapAlgorithm: 'A256KW', dataEncryptionCipher: cipher, wrapKey: identityWrap }));
        const enc = await doc;
        const header = enc.indexOf('\n', enc.indexOf('\n', enc.indexOf('\n') + 1) + 1) + 1;
        expect(enc.length - header).toBe(n + 16 * Math.ceil(n / SEGMENT_SIZE));
        const back = await collect(await decrypt(chunked(enc, chunk), { unwrapKey: identityUnwrap }));
        expect(back.equals(plain)).toBe(true);
      }),
      { numRuns: 40 },
    );
  });
});

describe('failures: a clear error, and nothing past the failure point', () => {
  const plain = randomBytes(3 * SEGMENT_SIZE + 100);
  let doc: Buffer;
  const headerEnd = (d: Buffer) => d.indexOf('\n', d.indexOf('\n', d.indexOf('\n') + 1) + 1) + 1;

  /** Decrypts, returning what was handed on before the error, and the error. */
  async function partial(d: Buffer, unwrapKey = identityUnwrap): Promise<{ got: Buffer; err: unknown }> {
    const got: Buffer[] = [];
    try {
      for await (const c of await decrypt(chunked(d, 4096), { unwrapKey })) got.push(c);
      return { got: Buffer.concat(got), err: undefined };
    } catch (err) {
      return { got: Buffer.concat(got), err };
    }
  }

  it('setup', async () => {
    doc = await rtEncrypt(plain);
  });

  it('an altered byte in segment 2: segments 0 and 1 only, then "failed to decrypt segment 2"', async () => {
    const bad = Buffer.from(doc);
    bad[headerEnd(doc) + 2 * (SEGMENT_SIZE + 16) + 5] ^= 1;
    const { got, err } = await partial(bad);
    expect(err).toBeInstanceOf(SchemeError);
    expect((err as Error).message).toMatch(/failed to decrypt segment 2/);
    expect(got.equals(plain.subarray(0, 2 * SEGMENT_SIZE))).toBe(true);
  });

  it('cut off mid-segment, or right at a segment boundary: the cut segment fails', async () => {
    for (const cut of [headerEnd(doc) + SEGMENT_SIZE + 16 + 1000, headerEnd(doc) + 2 * (SEGMENT_SIZE + 16)]) {
      const { got, err } = await partial(doc.subarray(0, cut));
      expect((err as Error).message).toMatch(/failed to decrypt segment \d/);
      expect(got.length).toBeLessThanOrEqual(2 * SEGMENT_SIZE);
      expect(got.equals(plain.subarray(0, got.length))).toBe(true);
    }
  });

  it('segments swapped: fails at the first', async () => {
    const h = headerEnd(doc);
    const s = SEGMENT_SIZE + 16;
    const swapped = Buffer.concat([doc.subarray(0, h), doc.subarray(h + s, h + 2 * s), doc.subarray(h, h + s), doc.subarray(h + 2 * s)]);
    const { got, err } = await partial(swapped);
    expect((err as Error).message).toMatch(/failed to decrypt segment 0/);
    expect(got.length).toBe(0);
  });

  it('an altered header or a wrong key: the signature fails before any output', async () => {
    const bad = Buffer.from(doc.toString('latin1').replace('"kw":1', '"kw":5'), 'latin1');
    await expect(decrypt(chunked(bad), { unwrapKey: identityUnwrap })).rejects.toThrow(/failed to validate the document's signature/);
    await expect(decrypt(chunked(doc), { unwrapKey: async () => randomBytes(32) })).rejects.toThrow(/failed to validate the document's signature/);
    let told: unknown;
    const missing = decrypt(chunked(doc), {
      unwrapKey: async () => {
        throw new Error('no such key');
      },
      onUnwrapError: (e) => (told = e),
    });
    await expect(missing).rejects.toThrow(/signature/);
    expect((told as Error).message).toBe('no such key');
  });

  it('not the format: a clear error', async () => {
    await expect(decrypt(chunked(Buffer.from('hello\nworld\n')), { unwrapKey: identityUnwrap })).rejects.toThrow(/unsupported scheme/);
    await expect(decrypt(chunked(Buffer.from('dapr.io/enc/v1\n{"kw":1}')), { unwrapKey: identityUnwrap })).rejects.toThrow(/manifest not found|message authentication code not found/);
    await expect(decrypt(chunked(Buffer.from('dapr.io/enc/v1\n{"kw":9}\nAAAA\n')), { unwrapKey: identityUnwrap })).rejects.toThrow(/invalid manifest/);
    await expect(decrypt(chunked(Buffer.alloc(70_000, 0x61)), { unwrapKey: identityUnwrap })).rejects.toThrow(/unsupported scheme|longer than a segment/);
  });

  it('options: an unknown algorithm or cipher, ECDH-ES, a missing key name', async () => {
    const opts = { keyName: 'k', keyWrapAlgorithm: 'A256KW', wrapKey: identityWrap };
    await expect(encrypt(chunked(plain), { ...opts, keyWrapAlgorithm: 'ECDH-ES+A256KW' })).rejects.toThrow(/key wrap algorithm "ECDH-ES\+A256KW" is not supported; supported: A256KW/);
    await expect(encrypt(chunked(plain), { ...opts, dataEncryptionCipher: 'AES-CBC' })).rejects.toThrow(/cipher "AES-CBC" is not supported/);
    await expect(encrypt(chunked(plain), { ...opts, keyName: '' })).rejects.toThrow(/keyName is required/);
    // any case, and the aliases
    await expect(encrypt(chunked(plain), { ...opts, keyWrapAlgorithm: 'rsa', dataEncryptionCipher: 'chacha20-poly1305' })).resolves.toBeDefined();
  });
});
