/**
 * The OpenTelemetry list format (`key=value` pairs joined by commas, values percent-encoded) and the
 * header name and value rules, shared by the Configuration's reader (config.ts) and the OTEL_*
 * environment's (env.ts); on its own so that neither imports the other.
 */

export type OtlpProtocol = 'grpc' | 'http';
/** Refuses a field (or variable) with a message; never returns. */
export type FieldFail = (field: string, message: string) => never;

/** An HTTP header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A resource attribute key: printable ASCII without separators (the W3C Baggage key the spec uses, a token too). */
export const ATTRIBUTE_KEY = TOKEN;
/** What a header value may hold once decoded: printable ASCII (gRPC metadata takes no more). */
const VALUE = /^[\x20-\x7e]*$/;

/**
 * OTLP headers as a list (OTEL_EXPORTER_OTLP_HEADERS, the Configuration's string form): `name=value` pairs joined by commas, values percent-encoded (the
 * OpenTelemetry format; the reference decodes them the same way). Names are lowercased; a blank
 * entry is skipped; a repeated name keeps the last value. Errors name the entry by its position,
 * never its text, since a value can be a token.
 */
export function parseHeaderList(text: string, variable: string, protocol: OtlpProtocol, fail: FieldFail): Record<string, string> {
  const out = parseKeyValues(text, { variable, what: 'the header name', lowercase: true, key: TOKEN, fail });
  for (const key of Object.keys(out)) checkHeaderName(key, protocol, variable, fail);
  return out;
}

/** gRPC sends a -bin name's value as bytes, which a text value cannot be. */
export function checkHeaderName(key: string, protocol: OtlpProtocol, field: string, fail: FieldFail): void {
  if (protocol === 'grpc' && key.endsWith('-bin')) fail(field, `${key}: a name ending in -bin is binary gRPC metadata, which OTLP headers cannot carry`);
}

/** A header value once decoded must be printable ASCII (gRPC metadata takes no more; no CR/LF). */
export const isHeaderValue = (v: string): boolean => VALUE.test(v);
export const isHeaderName = (v: string): boolean => TOKEN.test(v);

export interface KeyValueRules {
  variable: string;
  /** What a bad key is called in the message. */
  what: string;
  lowercase: boolean;
  key: RegExp;
  fail: FieldFail;
}

/** `key=value` pairs joined by commas, values percent-encoded: the OpenTelemetry environment's list format. */
export function parseKeyValues(text: string, r: KeyValueRules): Record<string, string> {
  // no prototype: a name like __proto__ is kept as a name
  const out: Record<string, string> = Object.create(null);
  const entries = text.split(',');
  for (const [i, entry] of entries.entries()) {
    if (entry.trim() === '') continue;
    const at = `entry ${i + 1} of ${entries.length}`;
    const eq = entry.indexOf('=');
    if (eq < 0) return r.fail(r.variable, `must be name=value pairs joined by commas: ${at} has no "="`);
    const raw = entry.slice(0, eq).trim();
    const key = r.lowercase ? raw.toLowerCase() : raw;
    if (!r.key.test(key)) return r.fail(r.variable, `${at}: ${r.what} is empty or not valid`);
    let value: string;
    try {
      value = decodeURIComponent(entry.slice(eq + 1)).trim();
    } catch {
      return r.fail(r.variable, `${at} (${key}): the value is not valid percent-encoding`);
    }
    if (!VALUE.test(value)) return r.fail(r.variable, `${at} (${key}): the value holds a character other than printable ASCII (percent-encoding decodes to it)`);
    out[key] = value;
  }
  return out;
}
