/**
 * Reading a binding body `{"operation":…,"data":"<long string>","metadata":{…}}` as it arrives,
 * so that a binding can stream `data` (a file as base64) to its destination with backpressure
 * instead of holding the body, the string and the decoded bytes at once.
 *
 * The head (members before `data`) is collected and parsed member by member with JSON.parse.
 * When `data` is a string, its content is handed out chunk by chunk (escapes decoded); the
 * members after it (the tail) are parsed once the body has ended. Whenever the body is shaped
 * otherwise (no string `data`, not an object, a head longer than HEAD_MAX), the caller gets the
 * raw bytes and parses the whole body as before, so those bodies behave exactly as they did.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { ApiError, malformed } from '../http/errors.ts';
import { jsonTooDeep, tooDeep } from '../http/body.ts';
import { skipWs, stringEnd, valueEnd } from './body.ts';

/** Members before `data` longer than this: not worth streaming, read the body whole. */
export const HEAD_MAX = 1024 * 1024;

/** The request body as a pull source of chunks, with the size limit and Content-Length checked. */
export class BodySource {
  private readonly req: IncomingMessage | Readable;
  private readonly limit: number;
  private readonly it: AsyncIterator<Buffer | string>;
  private readonly declared: number;
  private received = 0;

  constructor(req: IncomingMessage | Readable, headers: IncomingMessage['headers'], limit: number) {
    this.req = req;
    this.limit = limit;
    const cl = headers['content-length'];
    this.declared = cl === undefined ? Number.NaN : Number(cl);
    // not destroyed when we stop early: the socket must stay up for our error answer
    this.it = req.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer | string>;
  }

  /** The next chunk, or undefined at the end of the body. */
  async next(): Promise<Buffer | undefined> {
    if (this.declared > this.limit) throw this.tooLarge();
    let r: IteratorResult<Buffer | string>;
    try {
      r = await this.it.next();
    } catch (e) {
      throw malformed(`the request body could not be read: ${(e as Error).message}`);
    }
    if (r.done) {
      if (Number.isSafeInteger(this.declared) && this.received !== this.declared) {
        throw malformed(`the body has ${this.received} bytes but Content-Length says ${this.declared}`);
      }
      return undefined;
    }
    const b = typeof r.value === 'string' ? Buffer.from(r.value) : r.value;
    this.received += b.length;
    if (this.received > this.limit) throw this.tooLarge();
    return b;
  }

  /** Everything still to come, appended to `first`. */
  async rest(first: Buffer[]): Promise<Buffer> {
    const chunks = [...first];
    for (let c = await this.next(); c; c = await this.next()) chunks.push(c);
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  }

  /** Stops reading: what the client still sends is discarded. */
  async discard(): Promise<void> {
    // the iterator's listeners go first: a stream with a 'readable' listener does not flow
    await this.it.return?.()?.catch(() => undefined);
    this.req.resume();
  }

  private tooLarge(): ApiError {
    return new ApiError(413, 'ERR_REQUEST_TOO_LARGE', `the request body is larger than the limit of ${this.limit} bytes`);
  }
}

export type Head =
  /** The whole body, to be parsed as a whole (data absent or not a string, or not an object). */
  | { kind: 'whole'; body: Buffer }
  /** Members before a string `data`; `data` streams from `reader`. */
  | { kind: 'data'; members: Record<string, unknown>; raw: Buffer; reader: DataReader };

/** Reads until the content of a string `data` member starts, or the body ends. */
export async function readHead(src: BodySource): Promise<Head> {
  let buf: Buffer = Buffer.alloc(0);
  for (;;) {
    const chunk = await src.next();
    if (!chunk) return { kind: 'whole', body: buf };
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const scan = scanHead(buf);
    if (scan === 'no' || (scan === 'more' && buf.length > HEAD_MAX)) return { kind: 'whole', body: await src.rest([buf]) };
    if (scan !== 'more') return { kind: 'data', members: scan.members, raw: buf, reader: new DataReader(src, buf.subarray(scan.at)) };
  }
}

type Scan = 'more' | 'no' | { members: Record<string, unknown>; at: number };

/** Where the content of a string `data` starts in `b`, with the members before it. */
export function scanHead(b: Buffer): Scan {
  const start = b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? 3 : 0; // UTF-8 BOM
  let i = skipWs(b, start);
  if (i >= b.length) return 'more';
  if (b[i] !== 0x7b) return 'no';
  const members: Record<string, unknown> = {};
  try {
    for (;;) {
      i = skipWs(b, i + 1);
      if (i >= b.length) return 'more';
      if (b[i] !== 0x22) return 'no'; // "}" (an object without data) or not JSON: parsed whole
      const keyEnd = stringEnd(b, i);
      if (keyEnd < 0) return 'more';
      const key = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
      i = skipWs(b, keyEnd);
      if (i >= b.length) return 'more';
      if (b[i] !== 0x3a) return 'no';
      i = skipWs(b, i + 1);
      if (i >= b.length) return 'more';
      if (key === 'data') return b[i] === 0x22 ? { members, at: i + 1 } : 'no';
      const end = b[i] === 0x22 ? stringEnd(b, i) : valueEnd(b, i);
      if (end < 0 || end >= b.length) return 'more';
      const text = b.toString('utf8', i, end);
      if (jsonTooDeep(text)) return 'no';
      // defineProperty keeps "__proto__" an ordinary own member, as JSON.parse does
      Object.defineProperty(members, key, { value: JSON.parse(text), enumerable: true, writable: true, configurable: true });
      i = skipWs(b, end);
      if (i >= b.length) return 'more';
      if (b[i] !== 0x2c) return 'no';
    }
  } catch {
    return 'no'; // a syntax error: the whole-body parse reports it
  }
}

const SIMPLE_ESCAPES: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 0x08, 0x66: 0x0c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09 };

/**
 * The content of the `data` string, chunk by chunk, then the members after it. Chunks without
 * escapes are slices of the received buffers (no copy). A `\u` escape of a surrogate half is
 * written as U+FFFD: binding data strings are base64, where any such character is an error anyway.
 */
export class DataReader {
  private readonly src: BodySource;
  private first: Buffer | undefined;
  private tail: Buffer[] | undefined;
  private consumed = false;

  constructor(src: BodySource, first: Buffer) {
    this.src = src;
    this.first = first;
  }

  async *chunks(): AsyncGenerator<Buffer> {
    if (this.consumed) throw new Error('the data string was read already');
    this.consumed = true;
    let pending: Buffer | undefined; // an escape cut by a chunk boundary
    for (;;) {
      let cur = this.first ?? (await this.src.next());
      this.first = undefined;
      if (!cur) throw malformed('the body is not valid JSON: it ends inside the "data" string');
      if (pending) {
        cur = Buffer.concat([pending, cur]);
        pending = undefined;
      }
      const q = cur.indexOf(0x22);
      const bs = cur.indexOf(0x5c);
      if (bs < 0 || (q >= 0 && bs > q)) {
        // the common case: no escape in this piece of the string
        const piece = q < 0 ? cur : cur.subarray(0, q);
        if (q >= 0) this.tail = [cur.subarray(q + 1)];
        if (piece.length) yield piece;
        if (q >= 0) return;
        continue;
      }
      const out = Buffer.allocUnsafe(cur.length);
      let n = 0;
      let i = 0;
      for (;;) {
        const e = cur.indexOf(0x5c, i);
        const qq = cur.indexOf(0x22, i);
        if (qq >= 0 && (e < 0 || qq < e)) {
          n += cur.copy(out, n, i, qq);
          this.tail = [cur.subarray(qq + 1)];
          if (n) yield out.subarray(0, n);
          return;
        }
        if (e < 0) {
          n += cur.copy(out, n, i);
          break;
        }
        n += cur.copy(out, n, i, e);
        const kind = cur[e + 1];
        if (kind === undefined || (kind === 0x75 && e + 6 > cur.length)) {
          pending = cur.subarray(e);
          break;
        }
        if (kind === 0x75) {
          const hex = cur.toString('latin1', e + 2, e + 6);
          if (!/^[0-9A-Fa-f]{4}$/.test(hex)) throw malformed(`the body is not valid JSON: bad escape "\\u${hex}" in "data"`);
          n += out.write(String.fromCharCode(parseInt(hex, 16)), n, 'utf8');
          i = e + 6;
        } else {
          const c = SIMPLE_ESCAPES[kind];
          if (c === undefined) throw malformed(`the body is not valid JSON: bad escape "\\${String.fromCharCode(kind)}" in "data"`);
          out[n++] = c;
          i = e + 2;
        }
      }
      if (n) yield out.subarray(0, n);
    }
  }

  /**
   * The members after `data`, once the body has ended and is valid JSON. `data` and
   * `operation` may not come again (the streamed ones would otherwise be overridden).
   */
  async rest(): Promise<Record<string, unknown>> {
    if (!this.tail) {
      if (this.consumed) throw new Error('rest() before the data string was read to its end');
      for await (const _ of this.chunks()); // the binding did not want the data: skip it
    }
    if (!this.tail) throw new Error('the data string has no end');
    const tail = await this.src.rest(this.tail);
    const text = `{"data":0${tail.toString('utf8')}`;
    if (jsonTooDeep(text)) throw tooDeep();
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch (e) {
      throw malformed(`the body is not valid JSON: ${(e as Error).message}`);
    }
    const keys = topLevelKeys(tail);
    for (const k of ['data', 'operation']) {
      if (keys.includes(k)) throw malformed(`"${k}" appears twice in the body; name it once`);
    }
    delete parsed.data;
    return parsed;
  }
}

/** Keys of the members in a valid tail (`, "k": v ... }`). */
function topLevelKeys(b: Buffer): string[] {
  const keys: string[] = [];
  let i = skipWs(b, 0);
  while (b[i] === 0x2c) {
    i = skipWs(b, i + 1);
    const keyEnd = stringEnd(b, i);
    keys.push(JSON.parse(b.toString('utf8', i, keyEnd)) as string);
    i = skipWs(b, skipWs(b, keyEnd) + 1);
    i = skipWs(b, b[i] === 0x22 ? stringEnd(b, i) : valueEnd(b, i));
  }
  return keys;
}
