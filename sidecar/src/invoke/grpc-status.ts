/**
 * The answer of an app that speaks gRPC, on its way back to whoever invoked it, as the reference
 * runtime passes it on:
 *  - a gRPC caller (InvokeService) gets the app's status unchanged: code, message and details
 *    (`grpc-status-details-bin`), across sidecars too (`AppGrpcStatus` rides the hop);
 *  - an HTTP caller gets the code's HTTP status (`httpStatusOfCode`: the gRPC gateway table) and
 *    the status as JSON, `{"code", "message", "details"}` (`statusJson`).
 * The other way, an HTTP app's non-2xx answer to a gRPC caller is an error whose code follows the
 * HTTP status by the reference runtime's table (`codeOfHttpStatus`).
 */
import { join } from 'node:path';
import type * as protobuf from 'protobufjs';
import { protobufjs } from '../../../shared/proto-libs.ts';

/** The status an app's OnInvoke answered with (OK included). */
export interface AppGrpcStatus {
  code: number;
  message: string;
  /** `grpc-status-details-bin` as the app sent it: a google.rpc.Status with the details. */
  details?: Buffer;
}

// OK 200, CANCELLED 408, UNKNOWN 500, INVALID_ARGUMENT 400, DEADLINE_EXCEEDED 504, NOT_FOUND 404,
// ALREADY_EXISTS 409, PERMISSION_DENIED 403, RESOURCE_EXHAUSTED 429, FAILED_PRECONDITION 400,
// ABORTED 409, OUT_OF_RANGE 400, UNIMPLEMENTED 501, INTERNAL 500, UNAVAILABLE 503, DATA_LOSS 500,
// UNAUTHENTICATED 401
const HTTP_OF_CODE = [200, 408, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401];

/** gRPC code → the HTTP status an HTTP caller sees (500 for a code outside the 17). */
export function httpStatusOfCode(code: number): number {
  return HTTP_OF_CODE[code] ?? 500;
}

/** HTTP status → gRPC code; any status not named here is UNKNOWN (the reference runtime's table: 400 is INTERNAL, 500 UNKNOWN). */
const CODE_OF_HTTP: Record<number, number> = { 400: 13, 401: 16, 403: 7, 404: 5, 408: 1, 409: 6, 429: 8, 500: 2, 501: 12, 503: 14, 504: 4 };

/** The gRPC code of an HTTP app's answer: OK for 2xx. */
export function codeOfHttpStatus(status: number): number {
  return status >= 200 && status < 300 ? 0 : (CODE_OF_HTTP[status] ?? 2);
}

/** The body an HTTP caller gets for an app's gRPC error: the status as JSON (fields left out when empty, as protobuf's JSON does). */
export function statusJson(s: AppGrpcStatus): Buffer {
  const out: { code?: number; message?: string; details?: unknown[] } = {};
  if (s.code) out.code = s.code;
  if (s.message) out.message = s.message;
  const details = s.details ? detailsJson(s.details) : [];
  if (details.length) out.details = details;
  return Buffer.from(JSON.stringify(out));
}

let root: protobuf.Root | undefined;
function types(): protobuf.Root {
  // field names in lowerCamelCase, as protobuf's JSON has them
  root ??= protobufjs().loadSync(join(import.meta.dirname, 'proto', 'error-details.proto'));
  return root;
}

/**
 * The details of a google.rpc.Status as JSON: the standard google.rpc types with their fields and
 * `@type`; any other type (the app's own, unknown here) as `{"@type", "value": <base64>}`.
 */
function detailsJson(bytes: Buffer): unknown[] {
  let anys: { type_url: string; value: Uint8Array }[];
  try {
    anys = (types().lookupType('google.rpc.Status').decode(bytes) as unknown as { details: { type_url: string; value: Uint8Array }[] }).details;
  } catch {
    return []; // not a google.rpc.Status: nothing to show
  }
  return anys.map(({ type_url, value }) => {
    const name = type_url.slice(type_url.lastIndexOf('/') + 1);
    const type = name.startsWith('google.rpc.') ? lookup(name) : undefined;
    if (type) {
      try {
        const fields = type.toObject(type.decode(value), { longs: String, json: true }) as Record<string, unknown>;
        if (name === 'google.rpc.RetryInfo' && fields.retryDelay) fields.retryDelay = durationJson(fields.retryDelay as { seconds?: string; nanos?: number });
        return { '@type': type_url, ...fields };
      } catch {
        // bytes that are not that type: shown raw below
      }
    }
    return { '@type': type_url, value: Buffer.from(value).toString('base64') };
  });
}

function lookup(name: string): protobuf.Type | undefined {
  try {
    return types().lookupType(name);
  } catch {
    return undefined;
  }
}

/** A google.protobuf.Duration as protobuf's JSON writes it: "1.500s". */
function durationJson(d: { seconds?: string; nanos?: number }): string {
  const seconds = BigInt(d.seconds ?? 0);
  const nanos = d.nanos ?? 0;
  const frac = nanos ? `.${String(Math.abs(nanos)).padStart(9, '0')}`.replace(/(000)+$/, '') : '';
  return `${seconds === 0n && nanos < 0 ? '-' : ''}${seconds}${frac}s`;
}
