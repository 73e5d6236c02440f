/**
 * Service invocation of an app that speaks gRPC (--app-protocol grpc): a `/v1.0/invoke/<app>/
 * method/<path>` call (or gRPC InvokeService) reaches the app as AppCallback.OnInvoke, as the
 * ecosystem's SDK servers expect: `method` is the path without its leading slash, the body is the
 * Any's value, the HTTP verb and query string ride in `http_extension`. The answer's Any value
 * is the body and its `content_type` the content type, with 200. Whatever status the app answers
 * with travels with the answer (`grpcStatus`): a gRPC caller gets it unchanged (code, message,
 * details), an HTTP caller the code's HTTP status with the status as JSON (grpc-status.ts), as
 * the reference runtime does. An app that cannot be reached is a failed invocation (the caller
 * sees 500 ERR_DIRECT_INVOKE). OnInvoke is unary, so the body is read whole, up to the gRPC
 * message limit (64 MiB; beyond, 413 ERR_REQUEST_TOO_LARGE).
 */
import { Readable } from 'node:stream';
import { grpcCode, type GrpcApp } from '../app/grpc-app.ts';
import { httpStatusOfCode, statusJson, type AppGrpcStatus } from './grpc-status.ts';
import type { InvokeAnswer } from './call.ts';
import type { Header, RequestHead } from './proto.ts';
import { DATA_TYPE_URL } from './headers.ts';

const VERBS: Record<string, number> = { GET: 1, HEAD: 2, POST: 3, PUT: 4, DELETE: 5, CONNECT: 6, OPTIONS: 7, TRACE: 8, PATCH: 9 };
const MAX_BODY = 64 * 1024 * 1024;
const UNAVAILABLE = 14;
const STATUS_DETAILS = 'grpc-status-details-bin';
/** Headers that are no gRPC metadata: the message's own framing, or reserved names. */
const NOT_METADATA = new Set(['content-type', 'content-length', 'content-encoding', 'accept-encoding', 'te', 'host', 'connection', 'user-agent', DATA_TYPE_URL]);

interface AnyOut {
  '@type'?: string;
  type_url?: string;
  value?: unknown;
}

export async function invokeGrpcApp(app: GrpcApp, head: RequestHead, body: Readable | undefined, extra: Record<string, string>): Promise<InvokeAnswer> {
  const data = body ? await readAll(body) : Buffer.alloc(0);
  if (data === TOO_LARGE) {
    const message = `the request body is over ${MAX_BODY} bytes, the most an app's OnInvoke takes in one gRPC message (gRPC proxying streams larger calls)`;
    return jsonAnswer(413, 'ERR_REQUEST_TOO_LARGE', message);
  }
  const contentType = head.headers.find((h) => h.name === 'content-type')?.value ?? '';
  const metadata: Record<string, string> = {};
  for (const { name, value } of head.headers) if (!NOT_METADATA.has(name) && !name.startsWith('grpc-') && /^[a-z0-9_.-]+$/.test(name)) metadata[name] = value;
  Object.assign(metadata, extra);
  const req = {
    method: head.path.replace(/^\//, ''),
    // a gRPC caller's Any keeps its type (a protobuf message the app unpacks)
    data: { type_url: head.headers.find((h) => h.name === DATA_TYPE_URL)?.value ?? '', value: data },
    content_type: contentType,
    http_extension: { verb: VERBS[head.method.toUpperCase()] ?? 0, querystring: head.query.replace(/^\?/, '') },
  };
  let res: { data?: AnyOut | null; content_type?: string };
  try {
    res = (await app.call('callback', 'OnInvoke', req, metadata)) as typeof res;
  } catch (e) {
    const code = grpcCode(e);
    // no gRPC status at all, or grpc-js's UNAVAILABLE for an app it could not reach: no answer
    if (code === undefined || (code === UNAVAILABLE && !(await app.connected()))) throw e;
    const err = e as { details?: unknown; metadata?: { get(key: string): unknown[] } };
    const details = err.metadata?.get(STATUS_DETAILS)[0];
    const status: AppGrpcStatus = { code, message: typeof err.details === 'string' ? err.details : '', details: Buffer.isBuffer(details) ? details : undefined };
    return { status: httpStatusOfCode(code), headers: [{ name: 'content-type', value: 'application/json' }], body: Readable.from([statusJson(status)]), grpcStatus: status };
  }
  const out = anyBytes(res.data);
  const headers: Header[] = [];
  if (res.content_type) headers.push({ name: 'content-type', value: res.content_type });
  // the answer's Any as the app packed it: its type goes back with the bytes
  if (res.data?.type_url && !res.data['@type']) headers.push({ name: DATA_TYPE_URL, value: res.data.type_url });
  return { status: 200, headers, body: Readable.from(out.length ? [out] : []), grpcStatus: { code: 0, message: '' } };
}

/** The bytes of the answer's Any: its value, or, for a well-known type unpacked by the loader, that value as text. */
function anyBytes(a: AnyOut | null | undefined): Buffer {
  if (!a) return Buffer.alloc(0);
  if (Buffer.isBuffer(a.value) || a.value instanceof Uint8Array) return Buffer.from(a.value);
  if (a['@type']) {
    const { '@type': _type, ...fields } = a;
    return Buffer.from(typeof fields.value === 'string' ? fields.value : JSON.stringify('value' in fields ? fields.value : fields));
  }
  return Buffer.alloc(0);
}

function jsonAnswer(status: number, errorCode: string, message: string): InvokeAnswer {
  return { status, headers: [{ name: 'content-type', value: 'application/json' }], body: Readable.from([Buffer.from(JSON.stringify({ errorCode, message }))]) };
}

const TOO_LARGE = Symbol('too large');

/**
 * The whole body, or TOO_LARGE. An oversized body is still read to its end (and dropped), as
 * Node's HTTP server does with a body nobody read: a connection left mid-body between the
 * sidecars would stall the calls queued behind it.
 */
async function readAll(body: Readable): Promise<Buffer | typeof TOO_LARGE> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size <= MAX_BODY) chunks.push(chunk as Buffer);
    else chunks.length = 0;
  }
  return size > MAX_BODY ? TOO_LARGE : Buffer.concat(chunks);
}
