/**
 * Reads the google.protobuf well-known types an Any may hold (Value, Struct, ListValue and the
 * wrappers) for those who need the value rather than the bytes: the HTTP jobs API's view of a
 * job scheduled over gRPC and the body an HTTP app gets on its trigger (../../jobs/data.ts).
 * Only the exact `type.googleapis.com/google.protobuf.<Name>` URLs are read, so what counts as
 * well-known never depends on which types happen to be loaded. The types load with the first
 * such Any (protobufjs's bundled descriptors, no file read).
 */
import type * as protobuf from 'protobufjs';
import { protobufjs } from '../../../../shared/proto-libs.ts';
import type { ValueMsg } from './any.ts';

const PREFIX = 'type.googleapis.com/google.protobuf.';
const JSON_TYPES = new Set(['Value', 'Struct', 'ListValue', 'BoolValue', 'Int32Value', 'UInt32Value', 'Int64Value', 'UInt64Value', 'FloatValue', 'DoubleValue']);

/** What a well-known Any holds: a JSON value, a StringValue's text, or a BytesValue's bytes. */
export type WellKnown = { kind: 'json'; value: unknown } | { kind: 'string'; value: string } | { kind: 'bytes'; value: Buffer };

let root: protobuf.Root | undefined;
function type(name: string): protobuf.Type {
  if (!root) {
    const pb = protobufjs();
    root = new pb.Root();
    for (const file of ['google/protobuf/struct.proto', 'google/protobuf/wrappers.proto']) root.addJSON(pb.common.get(file)!.nested!);
    root.resolveAll();
  }
  return root.lookupType(`google.protobuf.${name}`);
}

/**
 * The value of an Any of a well-known type; undefined when the type_url names no type read
 * here or the bytes are not a message of that type (then the caller treats them as opaque).
 */
export function decodeWellKnown(typeUrl: string, bytes: Uint8Array): WellKnown | undefined {
  if (!typeUrl.startsWith(PREFIX)) return undefined;
  const name = typeUrl.slice(PREFIX.length);
  if (name !== 'StringValue' && name !== 'BytesValue' && !JSON_TYPES.has(name)) return undefined;
  try {
    const t = type(name);
    const o = t.toObject(t.decode(bytes), { longs: String, defaults: true, oneofs: true }) as Record<string, unknown>;
    if (name === 'StringValue') return { kind: 'string', value: o.value as string };
    if (name === 'BytesValue') {
      const b = o.value as Uint8Array;
      return { kind: 'bytes', value: Buffer.from(b.buffer, b.byteOffset, b.byteLength) };
    }
    if (name === 'Value') return { kind: 'json', value: valueToJson(o as ValueMsg) };
    if (name === 'Struct') return { kind: 'json', value: structToJson(o as { fields?: Record<string, ValueMsg> }) };
    if (name === 'ListValue') return { kind: 'json', value: ((o.values as ValueMsg[] | undefined) ?? []).map(valueToJson) };
    return { kind: 'json', value: wrapped(o.value) };
  } catch {
    // not a message of that type, or nested deeper than the stack: opaque bytes
    return undefined;
  }
}

/** A wrapper's value: 64-bit integers (strings here) as numbers while exact, else as the decimal string, as protojson writes them. */
function wrapped(v: unknown): unknown {
  if (typeof v === 'string') return Number.isSafeInteger(Number(v)) ? Number(v) : v;
  return finite(v);
}

/** JSON has no NaN or Infinity: written as protojson writes a double, "NaN", "Infinity", "-Infinity". */
function finite(v: unknown): unknown {
  return typeof v === 'number' && !Number.isFinite(v) ? String(v) : v;
}

export function valueToJson(v: ValueMsg | null | undefined): unknown {
  if (!v) return null;
  switch (v.kind) {
    case 'structValue':
      return structToJson(v.structValue ?? {});
    case 'listValue':
      return (v.listValue?.values ?? []).map(valueToJson);
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'numberValue':
      return finite(v.numberValue);
    default:
      return null;
  }
}

function structToJson(s: { fields?: Record<string, ValueMsg> }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // defineProperty: a "__proto__" key is data here, and plain assignment would drop it
  for (const [k, v] of Object.entries(s.fields ?? {})) Object.defineProperty(out, k, { value: valueToJson(v), enumerable: true, writable: true, configurable: true });
  return out;
}
