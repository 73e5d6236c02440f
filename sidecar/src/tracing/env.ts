/**
 * The OTEL_EXPORTER_OTLP_* environment, read as the reference runtime reads it
 * (docs/observability.md, "The OTEL_* environment"):
 * - The Configuration wins: with `spec.tracing.otel.endpointAddress` set, the endpoint, protocol
 *   and insecure variables are not read.
 * - Otherwise OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is) or OTEL_EXPORTER_OTLP_ENDPOINT (a base
 *   URL, /v1/traces added for HTTP) turns OTLP export on, and tracing with it at samplingRate 1
 *   when the Configuration names no rate ("0" keeps it off).
 * - Headers (…_TRACES_HEADERS, else …_HEADERS) and the timeout go with every OTLP export.
 * A variable rt uses and cannot read stops the start with its name; header values and endpoints
 * are never repeated in a message or a log line (they can hold secrets).
 */
import type { FieldFail, OtlpExport, OtlpProtocol, TracingConfig, TracingSpec } from './config.ts';

type Env = Record<string, string | undefined>;

const PREFIX = 'OTEL_EXPORTER_OTLP_';

/** A variable's name and its value, the signal-specific one (…_TRACES_X) first; blank is unset. */
function pick(env: Env, what: string, tracesToo = true): { name: string; value: string } | undefined {
  for (const name of tracesToo ? [`${PREFIX}TRACES_${what}`, `${PREFIX}${what}`] : [`${PREFIX}${what}`]) {
    const value = env[name]?.trim();
    if (value) return { name, value };
  }
  return undefined;
}

function refuse(name: string, message: string): never {
  throw new Error(`${name} ${message}`);
}

/** The tracing the sidecar runs with: the Configuration's, with what the environment adds. */
export function withOtelEnv(spec: TracingSpec | undefined, env: Env): TracingConfig | undefined {
  // "0" keeps tracing off: nothing of the environment is read, however it is set
  if (spec?.samplingRate === 0) return undefined;
  let otel = spec?.otel;
  let samplingRate = spec?.samplingRate;
  if (!otel) {
    const endpoint = pick(env, 'ENDPOINT');
    if (endpoint) {
      otel = envEndpoint(endpoint, envProtocol(env), envInsecure(env));
      samplingRate ??= 1;
    }
  }
  if (!samplingRate) return undefined;
  // the Configuration's headers and timeout win over the environment's (as programmatic settings do in OpenTelemetry)
  if (otel) otel = { ...envExtras(env, otel.protocol), ...otel };
  const resource = envResource(env);
  return { samplingRate, stdout: spec?.stdout ?? false, otel, zipkin: spec?.zipkin, ...(resource ? { resource } : {}) };
}

/**
 * OTEL_RESOURCE_ATTRIBUTES (key=value pairs, values percent-encoded) added to the spans' resource,
 * and OTEL_SERVICE_NAME over its service.name (the OpenTelemetry SDK rules); the default
 * service.name, the app id, is the SDK's (sdk.ts).
 */
function envResource(env: Env): Record<string, string> | undefined {
  const attrs = env.OTEL_RESOURCE_ATTRIBUTES?.trim();
  const out = attrs ? parseKeyValues(attrs, { variable: 'OTEL_RESOURCE_ATTRIBUTES', what: 'an attribute key', lowercase: false, key: ATTRIBUTE_KEY, fail: refuse }) : {};
  const name = env.OTEL_SERVICE_NAME?.trim();
  if (name) {
    if (!VALUE.test(name)) refuse('OTEL_SERVICE_NAME', 'must be printable ASCII');
    out['service.name'] = name;
  }
  return Object.keys(out).length ? out : undefined;
}

/** grpc (the default, as the reference's), http/protobuf, or http/json (sent as protobuf, as the reference does). */
function envProtocol(env: Env): OtlpProtocol {
  const p = pick(env, 'PROTOCOL');
  if (!p || p.value === 'grpc') return 'grpc';
  if (p.value === 'http/protobuf' || p.value === 'http/json') return 'http';
  return refuse(p.name, `must be grpc, http/protobuf or http/json, not ${JSON.stringify(p.value)}`);
}

/** OTEL_EXPORTER_OTLP_INSECURE: true or false (any case); true sends in plaintext. */
function envInsecure(env: Env): boolean {
  const v = pick(env, 'INSECURE', false);
  if (!v) return false;
  const lower = v.value.toLowerCase();
  if (lower === 'true' || lower === 'false') return lower === 'true';
  return refuse(v.name, `must be true or false, not ${JSON.stringify(v.value)}`);
}

/**
 * host:port or an http(s) URL. Without a scheme the export is TLS unless INSECURE is true (the
 * reference's default); http:// is plaintext and https:// TLS, INSECURE=true making either plaintext.
 */
function envEndpoint(endpoint: { name: string; value: string }, protocol: OtlpProtocol, insecure: boolean): OtlpExport {
  const { name, value } = endpoint;
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value);
  let url: URL | undefined;
  try {
    url = new URL(hasScheme ? value : `https://${value}`);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) return refuse(name, 'must be host:port or an http(s) URL (its value is not repeated here)');
  if (url.username || url.password) return refuse(name, 'must not hold credentials: send them with OTEL_EXPORTER_OTLP_HEADERS');
  const scheme = insecure ? 'http:' : url.protocol;
  if (protocol === 'grpc') return { url: `${scheme}//${url.host}`, protocol };
  // the signal's own endpoint is the whole URL; the shared one is a base the signal's path goes under
  const base = url.pathname.replace(/\/+$/, '');
  const path = name.includes('_TRACES_') ? base || '/v1/traces' : `${base}/v1/traces`;
  return { url: `${scheme}//${url.host}${path}`, protocol };
}

function envExtras(env: Env, protocol: OtlpProtocol): Pick<OtlpExport, 'headers' | 'timeoutMillis'> {
  const out: Pick<OtlpExport, 'headers' | 'timeoutMillis'> = {};
  const headers = pick(env, 'HEADERS');
  if (headers) out.headers = parseOtlpHeaders(headers.value, headers.name, protocol);
  const timeout = pick(env, 'TIMEOUT');
  if (timeout) {
    if (!/^\d+$/.test(timeout.value) || Number(timeout.value) <= 0) refuse(timeout.name, `must be a whole number of milliseconds above 0, not ${JSON.stringify(timeout.value)}`);
    out.timeoutMillis = Number(timeout.value);
  }
  return out;
}

/** A resource attribute key: printable ASCII without separators (the W3C Baggage key the spec uses). */
const ATTRIBUTE_KEY = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** An HTTP header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What a header value may hold once decoded: printable ASCII (gRPC metadata takes no more). */
const VALUE = /^[\x20-\x7e]*$/;

/**
 * OTEL_EXPORTER_OTLP_HEADERS: `name=value` pairs joined by commas, values percent-encoded (the
 * OpenTelemetry format; the reference decodes them the same way). Names are lowercased; a blank
 * entry is skipped; a repeated name keeps the last value. Errors name the entry by its position,
 * never its text, since a value can be a token.
 */
export function parseOtlpHeaders(text: string, variable: string, protocol: OtlpProtocol, fail: FieldFail = refuse): Record<string, string> {
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

interface KeyValueRules {
  variable: string;
  /** What a bad key is called in the message. */
  what: string;
  lowercase: boolean;
  key: RegExp;
  fail: FieldFail;
}

/** `key=value` pairs joined by commas, values percent-encoded: the OpenTelemetry environment's list format. */
function parseKeyValues(text: string, r: KeyValueRules): Record<string, string> {
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
