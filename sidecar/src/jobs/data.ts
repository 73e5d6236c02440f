/**
 * How the HTTP side sees a job's data. Data written over HTTP is JSON text and is shown and
 * delivered as such. Data scheduled over gRPC is an Any kept byte for byte (JobSpec.dataAny,
 * ../grpc/runtime/any.ts); HTTP has no Any, so:
 *
 *   Any                                  GET /v1.0-alpha1/jobs/<name> `data`   POST /job/<name> body (HTTP app)
 *   Value / Struct / ListValue           the JSON value                        that JSON
 *   Bool/Int32/…/Double wrappers         the number or boolean                 that JSON (123, true)
 *   StringValue                          the string                            the text, unquoted
 *   BytesValue                           the bytes' JSON if they are JSON      the bytes
 *   empty type_url                       the bytes' JSON if they are JSON      the bytes as sent
 *   anything else, or bytes that are     {"@type": type_url,                   the value bytes as sent
 *   not a message of their type           "value": "<base64 of the bytes>"}
 *
 * The bodies follow the reference runtime, which sends the JSON of a Value and the Any's value
 * bytes otherwise (so the SDKs' jobs examples, JSON bytes with an empty type_url, reach an HTTP
 * app as that JSON). Where it would send a well-known type's protobuf encoding (a Struct, a
 * number wrapper) an HTTP app could not read, rt sends its JSON; StringValue and BytesValue
 * give their text and bytes, which is what the reference runtime's own tests expect. The GET
 * view shows JSON where the data is JSON and otherwise the protojson shape of an Any, with
 * the value bytes as base64 (the reference runtime's protojson fails on an Any it cannot
 * resolve; rt shows it rather than failing the GET).
 */
import type { JobDataAny, JobSpec } from '../../../scheduler/src/index.ts';
import { decodeWellKnown } from '../grpc/runtime/well-known.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The JSON value of bytes that are UTF-8 JSON text; undefined otherwise. */
function jsonOf(bytes: Buffer): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(utf8.decode(bytes)) as unknown };
  } catch {
    return undefined;
  }
}

/** The `data` member of the HTTP API's job view; undefined = the job has none. */
export function dataView(spec: Pick<JobSpec, 'dataJson' | 'dataAny'>): unknown {
  if (spec.dataAny) return anyView(spec.dataAny);
  return spec.dataJson === undefined ? undefined : JSON.parse(spec.dataJson);
}

function anyView(d: JobDataAny): unknown {
  const bytes = Buffer.from(d.value, 'base64');
  const known = decodeWellKnown(d.typeUrl, bytes);
  if (known?.kind === 'json' || known?.kind === 'string') return known.value;
  const json = known?.kind === 'bytes' ? jsonOf(known.value) : d.typeUrl === '' ? jsonOf(bytes) : undefined;
  if (json) return json.value;
  return { '@type': d.typeUrl, value: d.value };
}

/** The body of POST /job/<name> to an HTTP app (empty when the job has no data). */
export function dataBody(t: Pick<JobSpec, 'dataJson' | 'dataAny'>): string | Buffer {
  if (t.dataAny) return anyBody(t.dataAny);
  return t.dataJson ?? '';
}

function anyBody(d: JobDataAny): string | Buffer {
  const bytes = Buffer.from(d.value, 'base64');
  const known = decodeWellKnown(d.typeUrl, bytes);
  if (!known) return bytes;
  if (known.kind === 'json') return JSON.stringify(known.value);
  return known.value;
}
