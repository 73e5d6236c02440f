/**
 * Reading and parsing the JSON body of `POST /v1.0/bindings/<name>` with few copies.
 *
 * Bindings carry whole files in `data` (base64), so a 100 MB file is a 133 MB body. Fastify's
 * JSON parser would hold the received chunks, their concatenation, a decoded string of the
 * whole body and the parsed `data` string at once. Here the body is received into one Buffer
 * (sized from Content-Length when given), and a large plain string member (no escapes, the
 * case of base64) is decoded straight from that Buffer: one more copy, nothing else. Anything
 * unusual falls back to JSON.parse, so the result is always exactly what JSON.parse returns.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { ApiError, malformed } from '../http/errors.ts';
import { jsonTooDeep, tooDeep } from '../http/body.ts';

/** String members at least this long (bytes) are taken from the buffer without JSON.parse. */
export const RAW_STRING_MIN = 1024;
/** Bodies below this size go straight to JSON.parse. */
export const FAST_PATH_MIN = 64 * 1024;

/** Receives the whole body into one Buffer; 413 past `limit`. */
export function readBody(req: IncomingMessage | Readable, headers: IncomingMessage['headers'], limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new ApiError(413, 'ERR_REQUEST_TOO_LARGE', `the request body is larger than the limit of ${limit} bytes`);
    const declared = headers['content-length'] === undefined ? Number.NaN : Number(headers['content-length']);
    if (declared > limit) {
      req.resume();
      reject(tooLarge());
      return;
    }
    const exact = Number.isSafeInteger(declared) && declared >= 0 ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    const finish = (err?: unknown) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      if (err) {
        req.resume();
        reject(err);
        return;
      }
      if (exact) {
        if (received !== exact.length) reject(malformed(`the body has ${received} bytes but Content-Length says ${exact.length}`));
        else resolve(exact);
      } else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received));
    };
    const onData = (chunk: Buffer | string) => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (received + b.length > limit) return finish(tooLarge());
      if (exact) {
        if (received + b.length > exact.length) return finish(malformed(`the body is longer than its Content-Length (${exact.length})`));
        b.copy(exact, received);
      } else chunks.push(b);
      received += b.length;
    };
    req.on('data', onData);
    req.once('end', () => finish());
    req.once('error', (e) => finish(malformed(`the request body could not be read: ${e.message}`)));
    req.once('close', () => finish(malformed('the client closed the connection before the body was complete')));
  });
}

/** Parses a JSON body; a syntax error is a 400 with the parser's message. */
export function parseJsonBody(buf: Buffer): unknown {
  if (jsonTooDeep(buf)) throw tooDeep();
  const start = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0; // UTF-8 BOM
  if (buf.length - start >= FAST_PATH_MIN) {
    const fast = fastObject(buf, start, RAW_STRING_MIN);
    if (fast !== undefined) return fast;
  }
  try {
    return JSON.parse(buf.toString('utf8', start));
  } catch (e) {
    throw malformed(`the body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * A top-level JSON object parsed member by member, long plain strings decoded from the buffer
 * directly; undefined whenever the input is anything else (the caller then uses JSON.parse).
 * Exported with its threshold for the property test that compares it with JSON.parse.
 */
export function fastObject(b: Buffer, start: number, rawMin: number): Record<string, unknown> | undefined {
  try {
    let i = skipWs(b, start);
    if (b[i] !== 0x7b) return undefined;
    const out: Record<string, unknown> = {};
    i = skipWs(b, i + 1);
    if (b[i] === 0x7d) return skipWs(b, i + 1) === b.length ? out : undefined;
    for (;;) {
      if (b[i] !== 0x22) return undefined;
      const keyEnd = stringEnd(b, i);
      if (keyEnd < 0) return undefined;
      const key = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
      i = skipWs(b, keyEnd);
      if (b[i] !== 0x3a) return undefined;
      i = skipWs(b, i + 1);
      let end: number;
      let value: unknown;
      if (b[i] === 0x22) {
        end = stringEnd(b, i);
        if (end < 0) return undefined;
        value = end - i - 2 >= rawMin && plainString(b, i + 1, end - 1) ? b.toString('utf8', i + 1, end - 1) : JSON.parse(b.toString('utf8', i, end));
      } else {
        end = valueEnd(b, i);
        if (end < 0) return undefined;
        value = JSON.parse(b.toString('utf8', i, end));
      }
      // defineProperty keeps "__proto__" an ordinary own member, as JSON.parse does
      Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      i = skipWs(b, end);
      if (b[i] === 0x2c) {
        i = skipWs(b, i + 1);
        continue;
      }
      if (b[i] === 0x7d) return skipWs(b, i + 1) === b.length ? out : undefined;
      return undefined;
    }
  } catch {
    return undefined;
  }
}

export function skipWs(b: Buffer, i: number): number {
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  return i;
}

/** Index after the closing quote of the string starting at `i`, or -1. */
export function stringEnd(b: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = b.indexOf(0x22, from);
    if (q < 0) return -1;
    let k = q - 1;
    while (b[k] === 0x5c) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    from = q + 1; // an escaped quote
  }
}

/** End of a non-string value (number, literal, object, array) starting at `i`, or -1. */
export function valueEnd(b: Buffer, i: number): number {
  let depth = 0;
  let j = i;
  while (j < b.length) {
    const c = b[j];
    if (c === 0x22) {
      j = stringEnd(b, j);
      if (j < 0) return -1;
      if (depth === 0) return j;
      continue;
    }
    if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      if (depth === 0) return j;
      if (--depth === 0) return j + 1;
    } else if (depth === 0 && (c === 0x2c || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) return j;
    j++;
  }
  return depth === 0 ? j : -1;
}

/**
 * True when bytes [s, e) hold no backslash and no control character (< 0x20), so their UTF-8
 * decoding is exactly what JSON.parse would give. Scans four bytes per step.
 */
function plainString(b: Buffer, s: number, e: number): boolean {
  if (b.subarray(s, e).indexOf(0x5c) >= 0) return false;
  let i = s;
  while (i < e && (b.byteOffset + i) % 4 !== 0) if (b[i++] < 0x20) return false;
  const words = Math.floor((e - i) / 4);
  if (words > 0) {
    const u32 = new Uint32Array(b.buffer, b.byteOffset + i, words);
    for (let w = 0; w < words; w++) {
      const x = u32[w];
      // a byte below 0x20 makes (x - 0x20202020) & ~x set that byte's top bit
      if (((x - 0x20202020) & ~x & 0x80808080) !== 0) return false;
    }
    i += words * 4;
  }
  while (i < e) if (b[i++] < 0x20) return false;
  return true;
}
