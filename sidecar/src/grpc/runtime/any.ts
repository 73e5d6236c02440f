/**
 * Job data: the gRPC API carries a google.protobuf.Any, the jobs block stores JSON text (what
 * the HTTP API takes and what the app receives on a trigger). The mapping, both ways:
 *
 *   Any in (ScheduleJobAlpha1)                        stored JSON
 *   google.protobuf.Value / Struct / ListValue        the JSON value it describes
 *   google.protobuf.StringValue                       a JSON string
 *   google.protobuf.{Bool,Int32,…,Double}Value        the JSON boolean / number
 *   google.protobuf.BytesValue, or empty type_url     the bytes' JSON if they are JSON text, else the
 *                                                     UTF-8 text as a JSON string (not UTF-8: rejected)
 *   any other type_url                                {"@type": type_url, "value": "<base64 bytes>"}
 *
 *   stored JSON out (GetJobAlpha1, ListJobsAlpha1)    Any
 *   {"@type": url, "value": base64} exactly           that Any again (type_url, bytes)
 *   a JSON string                                     google.protobuf.StringValue
 *   anything else                                     google.protobuf.Value
 */
import { invalidArgument } from './errors.ts';

const TYPE_PREFIX = 'type.googleapis.com/google.protobuf.';
export const STRING_VALUE = `${TYPE_PREFIX}StringValue`;
export const BYTES_VALUE = `${TYPE_PREFIX}BytesValue`;
export const VALUE = `${TYPE_PREFIX}Value`;

/** Any as proto-loader hands it over with `json: true`: known types unpacked under '@type'. */
export type AnyMsg = { '@type'?: string; type_url?: string; value?: unknown; [field: string]: unknown };

/** google.protobuf.Value as protobufjs objects (camelCase members, `kind` names the one set). */
export interface ValueMsg {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: { fields?: Record<string, ValueMsg> } | null;
  listValue?: { values?: ValueMsg[] } | null;
  kind?: string;
}

const WRAPPERS = new Set(['BoolValue', 'Int32Value', 'UInt32Value', 'Int64Value', 'UInt64Value', 'FloatValue', 'DoubleValue'].map((t) => TYPE_PREFIX + t));
const utf8 = new TextDecoder('utf-8', { fatal: true });

export function valueToJson(v: ValueMsg | null | undefined): unknown {
  if (!v) return null;
  if (v.structValue) return structToJson(v.structValue);
  if (v.listValue) return (v.listValue.values ?? []).map(valueToJson);
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.boolValue !== undefined && v.boolValue !== null) return v.boolValue;
  if (v.numberValue !== undefined && v.numberValue !== null) {
    // JSON has no NaN or Infinity
    if (!Number.isFinite(v.numberValue)) throw invalidArgument('RT_SCHEDULER_DATA_INVALID', 'job data: a number_value must be finite');
    return v.numberValue;
  }
  return null;
}

function structToJson(s: { fields?: Record<string, ValueMsg> }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) Object.defineProperty(out, k, { value: valueToJson(v), enumerable: true, writable: true, configurable: true });
  return out;
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

function bytesToJson(b: Buffer): string {
  let text: string;
  try {
    text = utf8.decode(b);
  } catch {
    throw invalidArgument('RT_SCHEDULER_DATA_INVALID', 'job data bytes are not UTF-8 text: rt keeps job data as JSON; send JSON or text, or an Any of your own type_url');
  }
  try {
    JSON.parse(text);
    return text;
  } catch {
    return JSON.stringify(text);
  }
}

/** The JSON text to store for an Any; undefined = no data. */
export function anyToJson(a: AnyMsg | null | undefined): string | undefined {
  if (!a) return undefined;
  const type = a['@type'];
  if (typeof type === 'string') {
    if (type === STRING_VALUE) return JSON.stringify(typeof a.value === 'string' ? a.value : '');
    if (type === BYTES_VALUE) return bytesToJson(Buffer.from((a.value as Uint8Array | undefined) ?? []));
    if (type === VALUE) return JSON.stringify(valueToJson(a as ValueMsg));
    if (type === `${TYPE_PREFIX}Struct`) return JSON.stringify(structToJson(a as { fields?: Record<string, ValueMsg> }));
    if (type === `${TYPE_PREFIX}ListValue`) return JSON.stringify(((a.values as ValueMsg[] | undefined) ?? []).map(valueToJson));
    if (WRAPPERS.has(type)) {
      const v = a.value ?? (type.endsWith('BoolValue') ? false : 0);
      if (typeof v === 'number' && !Number.isFinite(v)) throw invalidArgument('RT_SCHEDULER_DATA_INVALID', 'job data: the number must be finite');
      return JSON.stringify(typeof v === 'string' ? Number(v) : v);
    }
    throw invalidArgument('RT_SCHEDULER_DATA_INVALID', `job data of type ${type.slice(0, 100)} cannot be stored`);
  }
  const url = typeof a.type_url === 'string' ? a.type_url : '';
  const bytes = Buffer.from((a.value as Uint8Array | undefined) ?? []);
  if (url === '') return bytes.length === 0 ? undefined : bytesToJson(bytes);
  return JSON.stringify({ '@type': url, value: bytes.toString('base64') });
}

/** The Any to answer with for stored JSON text. */
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
  // only what anyToJson writes: canonical base64 (other JSON of this shape stays a Value)
  return Buffer.from(o.value, 'base64').toString('base64') === o.value;
}
