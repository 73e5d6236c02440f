/**
 * The per-message file key of "dapr.io/enc/v1" and what is derived from it (HKDF-SHA-256): the
 * header's MAC key (info "header", no salt) and the payload key (info "payload", the nonce
 * prefix as salt). Each segment is sealed with the payload key and the nonce
 * prefix ‖ counter (u32 big-endian) ‖ last-segment flag, so segments cannot be reordered,
 * dropped or cut off at a boundary without the tag failing.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual, type CipherGCMTypes } from 'node:crypto';
import { FILE_KEY_LENGTH, NONCE_PREFIX_LENGTH, SCHEME_NAME, SEGMENT_OVERHEAD, SchemeError } from './scheme.ts';

const ALGORITHMS: Record<string, CipherGCMTypes | 'chacha20-poly1305'> = { 'AES-GCM': 'aes-256-gcm', 'CHACHA20-POLY1305': 'chacha20-poly1305' };

export class FileKey {
  readonly fileKey: Buffer;
  readonly noncePrefix: Buffer;
  private readonly headerKey: Buffer;
  private readonly payloadKey: Buffer;
  private readonly algorithm: CipherGCMTypes | 'chacha20-poly1305';

  constructor(fileKey: Buffer, noncePrefix: Buffer, cipher: string) {
    const algorithm = ALGORITHMS[cipher];
    if (!algorithm) throw new SchemeError(`cipher ${cipher} is not supported`);
    this.algorithm = algorithm;
    this.fileKey = fileKey;
    this.noncePrefix = noncePrefix;
    this.headerKey = Buffer.from(hkdfSync('sha256', fileKey, Buffer.alloc(0), 'header', 32));
    this.payloadKey = Buffer.from(hkdfSync('sha256', fileKey, noncePrefix, 'payload', 32));
  }

  /** A fresh random file key and nonce prefix. */
  static generate(cipher: string): FileKey {
    return new FileKey(randomBytes(FILE_KEY_LENGTH), randomBytes(NONCE_PREFIX_LENGTH), cipher);
  }

  /** The header's MAC over its first two lines, each with its newline. */
  mac(manifest: Buffer): Buffer {
    return createHmac('sha256', this.headerKey).update(`${SCHEME_NAME}\n`).update(manifest).update('\n').digest();
  }

  /** The three header lines: scheme, manifest, base64 MAC. */
  header(manifest: Buffer): Buffer {
    return Buffer.concat([Buffer.from(`${SCHEME_NAME}\n`), manifest, Buffer.from(`\n${this.mac(manifest).toString('base64')}\n`)]);
  }

  verify(manifest: Buffer, mac: Buffer): boolean {
    const expected = this.mac(manifest);
    return mac.length === expected.length && timingSafeEqual(mac, expected);
  }

  private nonce(counter: number, last: boolean): Buffer {
    const n = Buffer.alloc(12);
    this.noncePrefix.copy(n, 0);
    n.writeUInt32BE(counter, NONCE_PREFIX_LENGTH);
    n[11] = last ? 1 : 0;
    return n;
  }

  seal(plaintext: Buffer, counter: number, last: boolean): Buffer {
    const c = createCipheriv(this.algorithm as CipherGCMTypes, this.payloadKey, this.nonce(counter, last), { authTagLength: SEGMENT_OVERHEAD });
    return Buffer.concat([c.update(plaintext), c.final(), c.getAuthTag()]);
  }

  /** The segment's plaintext; a SchemeError when its tag does not verify (altered, reordered, cut off, wrong key). */
  open(sealed: Buffer, counter: number, last: boolean): Buffer {
    if (sealed.length <= SEGMENT_OVERHEAD) throw new SchemeError(`failed to decrypt segment ${counter}: it is too short`);
    const d = createDecipheriv(this.algorithm as CipherGCMTypes, this.payloadKey, this.nonce(counter, last), { authTagLength: SEGMENT_OVERHEAD });
    d.setAuthTag(sealed.subarray(sealed.length - SEGMENT_OVERHEAD));
    const out = d.update(sealed.subarray(0, sealed.length - SEGMENT_OVERHEAD));
    try {
      d.final();
    } catch {
      throw new SchemeError(`failed to decrypt segment ${counter}: the ciphertext was altered or cut off, or the key is not the one it was encrypted with`);
    }
    return out;
  }
}
