/**
 * The Configuration resource's `spec.tracing`, as the reference runtime reads it:
 *
 *   tracing:
 *     samplingRate: "1"          # "0".."1"; "0" or absent: tracing off
 *     stdout: true               # also log each ended span (at info)
 *     otel: { endpointAddress: "collector:4317", isSecure: false, protocol: grpc }   # or http
 *       headers: "x-key=v,x-team=obs"   # or a list: [{ name: x-key, value: v }]
 *       timeout: 10000                  # ms (a number or digits), or "10s" / "500ms" / "1m"
 *     zipkin: { endpointAddress: "http://zipkin:9411/api/v2/spans" }
 *
 * Parsed at load (a bad field is refused with its name, like other resource mistakes) and read by
 * the tracing block at start, where the OTEL_EXPORTER_OTLP_* environment may add to it (env.ts).
 */

import { checkHeaderName, isHeaderName, isHeaderValue, parseHeaderList, type FieldFail, type OtlpProtocol } from './key-values.ts';

export type { OtlpProtocol } from './key-values.ts';

export interface OtlpExport {
  /** The exporter's URL: http(s)://host:port for gRPC, http(s)://host:port/v1/traces for HTTP. */
  url: string;
  protocol: OtlpProtocol;
  /** Sent with each export (OTEL_EXPORTER_OTLP_HEADERS); never logged, they may be secrets. */
  headers?: Record<string, string>;
  timeoutMillis?: number;
}

export interface TracingConfig {
  /** 0 < samplingRate <= 1 (a config with rate 0 is `off`). */
  samplingRate: number;
  stdout: boolean;
  otel?: OtlpExport;
  /** Zipkin v2 JSON over HTTP: the collector's full URL (…/api/v2/spans). */
  zipkin?: { url: string };
  /** Resource attributes from OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME (env.ts), over service.name = the app id. */
  resource?: Record<string, string>;
}

/** spec.tracing as written: `samplingRate` undefined when the Configuration gives none. */
export interface TracingSpec extends Omit<TracingConfig, 'samplingRate'> {
  samplingRate?: number;
}

/** What the parser reports a bad field with (the loader's `fail`, which throws). */
export type { FieldFail } from './key-values.ts';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A YAML boolean, or its string as the reference runtime's loose decoding takes it. */
function bool(v: unknown, field: string, fail: FieldFail): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === 'false') return v === 'true';
  return fail(field, `must be true or false, not ${JSON.stringify(v)}`);
}

/**
 * Parses `spec.tracing`; undefined when tracing is off (absent, or samplingRate "0" / absent).
 * Throws through `fail` naming the field (spec.tracing.samplingRate, spec.tracing.otel.protocol, ...).
 */
export function parseTracing(raw: unknown, fail: FieldFail): TracingConfig | undefined {
  const spec = readTracingSpec(raw, fail);
  if (!spec?.samplingRate) return undefined;
  return { ...spec, samplingRate: spec.samplingRate };
}

/** Reads `spec.tracing` as written (undefined when absent); throws through `fail` naming the field. */
export function readTracingSpec(raw: unknown, fail: FieldFail): TracingSpec | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) return fail('spec.tracing', 'must be a mapping');
  const rateRaw = raw.samplingRate;
  let samplingRate: number | undefined;
  if (rateRaw !== undefined && rateRaw !== null && rateRaw !== '') {
    const text = typeof rateRaw === 'number' ? String(rateRaw) : rateRaw;
    if (typeof text !== 'string' || !/^\s*(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?\s*$/i.test(text)) return fail('spec.tracing.samplingRate', `must be a number from "0" to "1" (a string), not ${JSON.stringify(rateRaw)}`);
    samplingRate = Number(text);
    if (!(samplingRate >= 0 && samplingRate <= 1)) return fail('spec.tracing.samplingRate', `must be from "0" to "1", not ${JSON.stringify(rateRaw)}`);
  }
  const stdout = bool(raw.stdout, 'spec.tracing.stdout', fail);
  let otel: TracingConfig['otel'];
  if (raw.otel !== undefined && raw.otel !== null) {
    if (!isObject(raw.otel)) return fail('spec.tracing.otel', 'must be a mapping');
    const o = raw.otel;
    const protocol = o.protocol === undefined || o.protocol === null || o.protocol === '' ? 'grpc' : o.protocol;
    if (protocol !== 'grpc' && protocol !== 'http') return fail('spec.tracing.otel.protocol', `must be grpc or http, not ${JSON.stringify(o.protocol)}`);
    if (typeof o.endpointAddress !== 'string' || o.endpointAddress.trim() === '') return fail('spec.tracing.otel.endpointAddress', 'is required (host:port of an OTLP receiver)');
    const secure = bool(o.isSecure, 'spec.tracing.otel.isSecure', fail);
    otel = { url: exporterUrl(o.endpointAddress.trim(), secure, protocol, fail), protocol };
    const headers = otelHeaders(o.headers, protocol, fail);
    if (headers) otel.headers = headers;
    const timeoutMillis = otelTimeout(o.timeout, fail);
    if (timeoutMillis) otel.timeoutMillis = timeoutMillis;
  }
  let zipkin: TracingConfig['zipkin'];
  if (raw.zipkin !== undefined && raw.zipkin !== null) {
    if (!isObject(raw.zipkin)) return fail('spec.tracing.zipkin', 'must be a mapping');
    zipkin = { url: zipkinUrl(raw.zipkin.endpointAddress, fail) };
  }
  return { samplingRate, stdout, otel, zipkin };
}

const blank = (v: unknown) => v === undefined || v === null || v === '';

/**
 * `otel.headers`: the OTEL_EXPORTER_OTLP_HEADERS string (name=value pairs joined by commas, values
 * percent-encoded: older reference releases), or a list of `{ name, value }` (newer ones). Values
 * are never repeated in a message (they can be tokens); a list entry is named by its position.
 */
export function otelHeaders(raw: unknown, protocol: OtlpProtocol, fail: FieldFail): Record<string, string> | undefined {
  const field = 'spec.tracing.otel.headers';
  if (blank(raw)) return undefined;
  if (typeof raw === 'string') return parseHeaderList(raw, field, protocol, fail);
  if (!Array.isArray(raw)) return fail(field, 'must be "name=value,…" or a list of { name, value }');
  // no prototype: a header named __proto__ is a header like another
  const out: Record<string, string> = Object.create(null);
  for (const [i, entry] of raw.entries()) {
    const at = `${field}[${i}]`;
    if (!isObject(entry)) return fail(at, 'must be a mapping with name and value');
    if (typeof entry.name !== 'string' || !isHeaderName(entry.name.trim())) return fail(`${at}.name`, 'must be a valid HTTP header name');
    const name = entry.name.trim().toLowerCase();
    if (entry.secretKeyRef !== undefined) return fail(`${at}.secretKeyRef`, 'is not supported: give the value (or OTEL_EXPORTER_OTLP_HEADERS from a Secret)');
    const value = typeof entry.value === 'number' || typeof entry.value === 'boolean' ? String(entry.value) : entry.value;
    if (typeof value !== 'string' || !isHeaderValue(value)) return fail(`${at}.value`, `(${name}) must be a string of printable ASCII`);
    checkHeaderName(name, protocol, at, fail);
    out[name] = value.trim();
  }
  return Object.keys(out).length ? out : undefined;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000 };

/** `otel.timeout`: milliseconds (a whole number, or its digits as a string), or a duration "500ms", "10s", "1m". */
export function otelTimeout(raw: unknown, fail: FieldFail): number | undefined {
  const field = 'spec.tracing.otel.timeout';
  if (blank(raw)) return undefined;
  const text = typeof raw === 'number' ? String(raw) : raw;
  const m = typeof text === 'string' ? /^\s*(\d+)(ms|s|m)?\s*$/.exec(text) : null;
  const ms = m ? Number(m[1]) * UNIT_MS[m[2] ?? 'ms'] : 0;
  if (!(ms > 0 && Number.isSafeInteger(ms))) return fail(field, `must be a whole number of milliseconds above 0 or a duration such as "10s", not ${JSON.stringify(raw)}`);
  return ms;
}

/** The reference hands the address to Zipkin's exporter as a whole URL (…/api/v2/spans). */
function zipkinUrl(address: unknown, fail: FieldFail): string {
  const field = 'spec.tracing.zipkin.endpointAddress';
  if (typeof address !== 'string' || address.trim() === '') return fail(field, 'is required (the URL Zipkin takes spans at, e.g. http://zipkin:9411/api/v2/spans)');
  let url: URL;
  try {
    url = new URL(address.trim());
  } catch {
    return fail(field, `must be an http(s) URL such as http://zipkin:9411/api/v2/spans, not ${JSON.stringify(address)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail(field, `must be an http(s) URL such as http://zipkin:9411/api/v2/spans, not ${JSON.stringify(address)}`);
  if (url.username || url.password) return fail(field, 'must not hold credentials');
  return url.href;
}

/**
 * host:port (the reference's form) or a URL: the scheme follows isSecure when absent, and the
 * HTTP exporter's path is /v1/traces unless the address names one.
 */
function exporterUrl(address: string, secure: boolean, protocol: OtlpProtocol, fail: FieldFail): string {
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(address);
  let url: URL;
  try {
    url = new URL(hasScheme ? address : `${secure ? 'https' : 'http'}://${address}`);
  } catch {
    return fail('spec.tracing.otel.endpointAddress', `must be host:port or an http(s) URL, not ${JSON.stringify(address)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail('spec.tracing.otel.endpointAddress', `must be host:port or an http(s) URL, not ${JSON.stringify(address)}`);
  if (url.username || url.password) return fail('spec.tracing.otel.endpointAddress', 'must not hold credentials');
  if (protocol === 'grpc') return `${url.protocol}//${url.host}`;
  const path = url.pathname === '/' ? '/v1/traces' : url.pathname;
  return `${url.protocol}//${url.host}${path}`;
}
