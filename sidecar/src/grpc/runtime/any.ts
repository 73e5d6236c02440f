/**
 * Job data on the gRPC API: a google.protobuf.Any. A job scheduled over gRPC keeps its Any
 * byte for byte (JobSpec.dataAny: type_url, even empty, and the value bytes), so GetJob,
 * ListJobs and the gRPC app's OnJobEvent give back exactly what was scheduled, as the reference
 * runtime does. The SDKs' jobs examples send JSON bytes with an empty type_url: turning those
 * into JSON and back (what rt once did) handed the app a google.protobuf.Value instead.
 *
 * Jobs written as JSON (the HTTP API, or gRPC jobs stored by earlier rt versions) are answered
 * as an Any made from their JSON:
 *
 *   stored JSON                                        Any
 *   {"@type": url, "value": base64} exactly            that Any again (type_url, bytes): how
 *                                                      earlier rt versions stored an own type
 *   a JSON string                                      google.protobuf.StringValue
 *   anything else                                      google.protobuf.Value
 *
 * How the HTTP API and an HTTP app see an Any: ../../jobs/data.ts.
 */
import type { JobDataAny, JobSpec } from '../../../../scheduler/src/index.ts';

const TYPE_PREFIX = 'type.googleapis.com/google.protobuf.';
export const STRING_VALUE = `${TYPE_PREFIX}StringValue`;
export const VALUE = `${TYPE_PREFIX}Value`;

/**
 * Any as the runtime service's messages carry it: {type_url, value} as decoded (the service
 * loads with `json: false`, so no Any is unpacked and none is re-encoded), or {'@type', ...fields}
 * to be packed on the way out (protobufjs encodes the named type into value).
 */
export type AnyMsg = { '@type'?: string; type_url?: string; value?: unknown; [field: string]: unknown };

/** google.protobuf.Value as protobufjs objects (camelCase members). */
export interface ValueMsg {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: { fields?: Record<string, ValueMsg> } | null;
  listValue?: { values?: ValueMsg[] } | null;
  kind?: string;
}

/** The data to store for a scheduled Any; undefined = no data (absent, or an Any with neither type_url nor bytes). */
export function anyIn(a: AnyMsg | null | undefined): JobDataAny | undefined {
  if (!a) return undefined;
  const typeUrl = typeof a.type_url === 'string' ? a.type_url : '';
  const v = a.value;
  const bytes = v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : Buffer.alloc(0);
  if (typeUrl === '' && bytes.length === 0) return undefined;
  return { typeUrl, value: bytes.toString('base64') };
}

/** The Any to answer with (GetJob, ListJobs, OnJobEvent) for a job's data; null = none. */
export function anyOut(data: Pick<JobSpec, 'dataJson' | 'dataAny'>): AnyMsg | null {
  if (data.dataAny) return { type_url: data.dataAny.typeUrl, value: Buffer.from(data.dataAny.value, 'base64') };
  return jsonToAny(data.dataJson);
}

export function jsonToValue(j: unknown): ValueMsg {
  if (j === null || j === undefined) return { nullValue: 0 };
  if (typeof j === 'string') return { stringValue: j };
  if (typeof j === 'number') return { numberValue: j };
  if (typeof j === 'boolean') return { boolValue: j };
  if (Array.isArray(j)) return { listValue: { values: j.map(jsonToValue) } };
  const fields: Record<string, ValueMsg> = {};
  // defineProperty: a "__proto__" key is data here, and plain assignment would drop it
  for (const [k, v] of Object.entries(j as Record<string, unknown>)) Object.defineProperty(fields, k, { value: jsonToValue(v), enumerable: true, writable: true, configurable: true });
  return { structValue: { fields } };
}

/** The Any to answer with for data stored as JSON text. */
export function jsonToAny(json: string | undefined): AnyMsg | null {
  if (json === undefined) return null;
  const v: unknown = JSON.parse(json);
  if (isWrappedAny(v)) return { type_url: v['@type'], value: Buffer.from(v.value, 'base64') };
  if (typeof v === 'string') return { '@type': STRING_VALUE, value: v };
  return { '@type': VALUE, ...jsonToValue(v) };
}

function isWrappedAny(v: unknown): v is { '@type': string; value: string } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  const o = v as Record<string, unknown>;
  if (keys.length !== 2 || typeof o['@type'] !== 'string' || !o['@type'].includes('/') || typeof o.value !== 'string') return false;
  // only what earlier versions wrote: canonical base64 (other JSON of this shape stays a Value)
  return Buffer.from(o.value, 'base64').toString('base64') === o.value;
}
