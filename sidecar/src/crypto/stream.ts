/**
 * Encrypting and decrypting "dapr.io/enc/v1" streams segment by segment: at most one segment
 * (64 KiB, plus its tag and one byte to know whether it is the last) is held at a time, and a
 * decrypted segment is handed on only once its tag has verified, so no unverified plaintext
 * ever leaves. Both start with what can fail before any output (options, key wrapping, the
 * header and its MAC) and resolve to the output as an async generator; a failure later ends
 * the generator with a SchemeError naming the segment.
 *
 * As in the reference, a ciphertext cut right after its header decrypts to nothing: the
 * header does not record the length. A cut anywhere after the first segment fails.
 */
import { FileKey } from './file-key.ts';
import { FILE_KEY_LENGTH, MAX_HEADER_LENGTH, SCHEME_NAME, SEGMENT_OVERHEAD, SEGMENT_SIZE, SchemeError, dataCipher, decodeManifest, encodeManifest, isBase64, keyAlgorithm } from './scheme.ts';

/** Wraps the file key with the named key (a component's wrapKey). */
export type WrapKey = (fileKey: Buffer, algorithm: string, keyName: string) => Promise<Buffer>;
/** Unwraps a wrapped file key with the named key (a component's unwrapKey). */
export type UnwrapKey = (wrappedKey: Buffer, algorithm: string, keyName: string) => Promise<Buffer>;

export interface EncryptOptions {
  /** The key that wraps the file key. */
  keyName: string;
  keyWrapAlgorithm: string;
  /** AES-GCM (default) or CHACHA20-POLY1305. */
  dataEncryptionCipher?: string;
  /** Leave the decryption key's name out of the header. */
  omitDecryptionKeyName?: boolean;
  /** The name written in the header for decryption (default: keyName). */
  decryptionKeyName?: string;
  wrapKey: WrapKey;
}

export interface DecryptOptions {
  /** Overrides the key name in the header (required when the header has none). */
  keyName?: string;
  unwrapKey: UnwrapKey;
  /** Told why unwrapping failed; the caller only learns that the header did not verify. */
  onUnwrapError?: (e: unknown) => void;
}

type Source = AsyncIterable<Uint8Array>;

/** Checks the options and wraps a new file key; resolves to the ciphertext: header, then segments. */
export async function encrypt(source: Source, opts: EncryptOptions): Promise<AsyncGenerator<Buffer>> {
  if (!opts.keyName) throw new SchemeError('option keyName is required');
  if (!opts.keyWrapAlgorithm) throw new SchemeError('option keyWrapAlgorithm is required');
  const algorithm = keyAlgorithm(opts.keyWrapAlgorithm).name;
  const cipher = dataCipher(opts.dataEncryptionCipher).name;
  const fk = FileKey.generate(cipher);
  const wrappedKey = await opts.wrapKey(fk.fileKey, algorithm, opts.keyName);
  const keyName = opts.omitDecryptionKeyName ? undefined : opts.decryptionKeyName || opts.keyName;
  const header = fk.header(encodeManifest({ keyName, keyAlgorithm: algorithm, wrappedKey, cipher, noncePrefix: fk.noncePrefix }));
  if (header.length > MAX_HEADER_LENGTH) throw new SchemeError('header is too long');
  return (async function* () {
    yield header;
    for await (const s of segments(source, SEGMENT_SIZE)) yield fk.seal(s.data, s.counter, s.last);
  })();
}

/** Reads and verifies the header; resolves to the plaintext, segment by verified segment. */
export async function decrypt(source: Source, opts: DecryptOptions): Promise<AsyncGenerator<Buffer>> {
  const it = source[Symbol.asyncIterator]();
  let fk: FileKey;
  let rest: Buffer;
  try {
    let manifestLine: Buffer;
    let macLine: Buffer;
    ({ manifestLine, macLine, rest } = await readHeader(it));
    const manifest = decodeManifest(manifestLine);
    const keyName = opts.keyName || manifest.keyName;
    if (!keyName) throw new SchemeError("the document's manifest does not contain a key name, and no key name was provided");
    let fileKey: Buffer | undefined;
    try {
      fileKey = await opts.unwrapKey(manifest.wrappedKey, manifest.keyAlgorithm, keyName);
    } catch (e) {
      // as the reference: go on with a zero key, so a missing key and a wrong one look alike
      opts.onUnwrapError?.(e);
    }
    if (fileKey?.length !== FILE_KEY_LENGTH) fileKey = Buffer.alloc(FILE_KEY_LENGTH);
    fk = new FileKey(fileKey, manifest.noncePrefix, manifest.cipher);
    const mac = macLine.toString('latin1');
    if (!isBase64(mac) || !fk.verify(manifestLine, Buffer.from(mac, 'base64'))) {
      throw new SchemeError("failed to validate the document's signature: the key is not the one the document was encrypted for, or the header was altered");
    }
  } catch (e) {
    await it.return?.();
    throw e;
  }
  const remaining: Source = {
    [Symbol.asyncIterator]: () => it,
  };
  return (async function* () {
    for await (const s of segments(remaining, SEGMENT_SIZE + SEGMENT_OVERHEAD, rest)) yield fk.open(s.data, s.counter, s.last);
  })();
}

/** The header's manifest and MAC lines and the bytes read past it. */
async function readHeader(it: AsyncIterator<Uint8Array>): Promise<{ manifestLine: Buffer; macLine: Buffer; rest: Buffer }> {
  let head = Buffer.alloc(0);
  const lines: Buffer[] = [];
  let start = 0;
  for (;;) {
    let nl: number;
    while (lines.length < 3 && (nl = head.indexOf(0x0a, start)) >= 0) {
      if (nl === start) throw new SchemeError('invalid header: an empty line');
      if (nl > MAX_HEADER_LENGTH) throw new SchemeError('invalid header: longer than a segment');
      lines.push(head.subarray(start, nl));
      if (lines.length === 1 && lines[0].toString('latin1') !== SCHEME_NAME) throw new SchemeError(`invalid header: unsupported scheme (the data does not start with "${SCHEME_NAME}")`);
      start = nl + 1;
    }
    if (lines.length === 3) return { manifestLine: lines[1], macLine: lines[2], rest: head.subarray(start) };
    if (head.length > MAX_HEADER_LENGTH) throw new SchemeError('invalid header: longer than a segment');
    const r = await it.next();
    if (r.done) {
      const what = lines.length === 0 ? 'scheme name' : lines.length === 1 ? 'manifest' : 'message authentication code';
      throw new SchemeError(`invalid header: ${what} not found (the data ends before the header does)`);
    }
    head = Buffer.concat([head, r.value]);
  }
}

export interface Segment {
  data: Buffer;
  counter: number;
  last: boolean;
}

const MAX_COUNTER = 0xffff_ffff;

/**
 * Cuts the source into segments of `size` bytes; the last one is shorter or equal, and known to
 * be last because nothing follows it (one byte more is read before a segment is handed on).
 * An empty source gives no segment.
 */
export async function* segments(source: Source, size: number, first?: Buffer): AsyncGenerator<Segment> {
  let pending: Buffer[] = first?.length ? [first] : [];
  let length = first?.length ?? 0;
  let counter = 0;
  const take = (): Buffer => {
    const all = pending.length === 1 ? pending[0] : Buffer.concat(pending, length);
    const out = all.subarray(0, size);
    const left = all.subarray(size);
    pending = left.length ? [left] : [];
    length = left.length;
    return out;
  };
  const full = function* (): Generator<Segment> {
    while (length > size) {
      if (counter === MAX_COUNTER) throw new SchemeError('the stream is too large for the format (2^32 segments)');
      yield { data: take(), counter: counter++, last: false };
    }
  };
  yield* full();
  for await (const chunk of source) {
    if (chunk.length === 0) continue;
    pending.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    length += chunk.length;
    yield* full();
  }
  if (length > 0) yield { data: take(), counter, last: true };
}
