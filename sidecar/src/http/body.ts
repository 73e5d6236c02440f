/**
 * What every request body goes through before a handler sees it: Content-Encoding decoded
 * (gzip, deflate, br) or refused with 415, JSON refused with 400 when nested deeper than
 * MAX_JSON_DEPTH, and a bound on the time a body may take to arrive.
 *
 * Deep nesting is refused at parse time because what handles a value later (JSON.stringify,
 * the Struct mapping of gRPC, the query engine) recurses: 5,000 levels overflowed the stack
 * and answered 500.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Transform, type Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, malformed } from './errors.ts';

/** Deepest nesting of arrays and objects accepted in a JSON body (and so in any value stored). */
export const MAX_JSON_DEPTH = 512;

/**
 * Longest time a request may take to arrive, headers and body. A client that declares a body
 * and never sends it gets 408 and its connection closed instead of holding it forever.
 */
export const REQUEST_TIMEOUT_MS = 60_000;

// arrows, not the functions themselves: the build loads node:zlib at its first use (images/bundle.ts)
const DECODERS: Record<string, () => Transform> = {
  gzip: () => createGunzip(),
  'x-gzip': () => createGunzip(),
  deflate: () => createInflate(),
  br: () => createBrotliDecompress(),
};

/** Whether `text` holds arrays/objects nested deeper than `max` (strings skipped, escapes honoured). */
export function jsonTooDeep(text: string | Buffer, max = MAX_JSON_DEPTH): boolean {
  // each level needs at least one opening bracket: a short text cannot nest too deep
  if (text.length <= max) return false;
  const str = typeof text === 'string';
  const at = str ? (i: number) => text.charCodeAt(i) : (i: number) => (text as Buffer)[i];
  const quote = str ? (from: number) => text.indexOf('"', from) : (from: number) => (text as Buffer).indexOf(0x22, from);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = at(i);
    if (c === 0x22) {
      // jump to the closing quote: one not preceded by an odd run of backslashes
      let j = i;
      for (;;) {
        j = quote(j + 1);
        if (j < 0) return false; // unterminated: the parser reports it
        let bs = 0;
        while (at(j - 1 - bs) === 0x5c) bs++;
        if (bs % 2 === 0) break;
      }
      i = j;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

export function tooDeep(): ApiError {
  return malformed(`the JSON body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; the limit is ${MAX_JSON_DEPTH}`);
}

/** JSON text → value; a syntax error or too deep a nesting is a 400 naming `what`. */
export function parseJsonText(text: string, what = 'request body'): unknown {
  if (jsonTooDeep(text)) throw tooDeep();
  try {
    return JSON.parse(text);
  } catch (e) {
    throw malformed(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The server's application/json parser: fastify's own (prototype-poisoning checks included),
 * with the depth limit in front.
 */
export function useDepthLimitedJson(app: FastifyInstance): void {
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (jsonTooDeep(body as string)) {
      done(tooDeep(), undefined);
      return;
    }
    defaultJson(req, body as string, done);
  });
}

/**
 * A preParsing hook: a body sent with Content-Encoding gzip/deflate/br reaches the parsers
 * decoded (the body limit counts decoded bytes, so a small bomb is still a 413); any other
 * encoding is a 415, never read as if it were plain.
 */
export async function decodeContentEncoding(req: FastifyRequest, _reply: unknown, payload: Readable): Promise<Readable> {
  const encoding = contentEncoding(req.headers);
  // routes that forward the body as sent (service invocation) take it still encoded
  if (encoding === undefined || (req.routeOptions.config as { encodedBody?: boolean } | undefined)?.encodedBody) return payload;
  const make = DECODERS[encoding];
  if (!make) {
    throw new ApiError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `Content-Encoding "${encoding.slice(0, 40)}" is not supported: send the body plain, or encoded with gzip, deflate or br`);
  }
  // the declared length is that of the encoded bytes: the parsers must read to the end instead
  delete req.raw.headers['content-length'];
  req.raw.headers['transfer-encoding'] = 'chunked';
  delete req.raw.headers['content-encoding'];
  const decoder = make();
  payload.on('error', (e) => decoder.destroy(e));
  decoder.on('error', (e) => Object.assign(e, { statusCode: 400, message: `the ${encoding} body could not be decoded: ${e.message}` }));
  return payload.pipe(decoder);
}

/** The single coding of a body, lower-cased; undefined for none or identity. */
function contentEncoding(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['content-encoding'];
  if (v === undefined) return undefined;
  const e = v.trim().toLowerCase();
  return e === '' || e === 'identity' ? undefined : e;
}
