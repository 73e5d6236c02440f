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
import type { OtlpExport, TracingConfig, TracingSpec } from './config.ts';
import { ATTRIBUTE_KEY, isHeaderValue, parseHeaderList, parseKeyValues, type FieldFail, type OtlpProtocol } from './key-values.ts';

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
    if (!isHeaderValue(name)) refuse('OTEL_SERVICE_NAME', 'must be printable ASCII');
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

/** OTEL_EXPORTER_OTLP_HEADERS' list (key-values.ts); a bad entry stops the start naming `variable`. */
export function parseOtlpHeaders(text: string, variable: string, protocol: OtlpProtocol, fail: FieldFail = refuse): Record<string, string> {
  return parseHeaderList(text, variable, protocol, fail);
}
