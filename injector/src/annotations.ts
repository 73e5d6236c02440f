/**
 * The pod annotations the injector reads: one typed table (key, parser, default) and one parser.
 * `rt.io/<key>` is read first, then `dapr.io/<key>` as an alias. A value that does not parse is
 * an error naming the annotation, never a silent default.
 */
import { parseDuration } from '../../shared/duration.ts';

export const PREFIX = 'rt.io/';
export const ALIAS_PREFIX = 'dapr.io/';

type Parse<V> = (raw: string) => V;

interface Spec<V, D> {
  /** Keys without prefix; the first is the documented name, the others are accepted too. */
  keys: readonly string[];
  parse: Parse<V>;
  fallback: D;
  doc: string;
}

const opt = <V>(keys: string[], parse: Parse<V>, doc: string): Spec<V, undefined> => ({ keys, parse, fallback: undefined, doc });
const def = <V>(keys: string[], parse: Parse<V>, fallback: V, doc: string): Spec<V, V> => ({ keys, parse, fallback, doc });

class BadValue extends Error {}

// ---- value parsers (each throws BadValue with what was expected) ----

const TRUE = new Set(['true', '1', 'yes', 'on', 'y']);
const FALSE = new Set(['false', '0', 'no', 'off', 'n']);
export const bool: Parse<boolean> = (s) => {
  const v = s.trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new BadValue('expected "true" or "false"');
};

const str: Parse<string> = (s) => {
  const v = s.trim();
  if (v === '') throw new BadValue('expected a non-empty value');
  return v;
};

const int =
  (min: number, max: number): Parse<number> =>
  (s) => {
    const v = s.trim();
    if (!/^-?\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new BadValue(`expected a whole number from ${min} to ${max}`);
    return Number(v);
  };

const port = int(1, 65535);
const seconds = int(0, 86_400);
const positive = int(1, 1_000_000);

const oneOf =
  <T extends string>(...values: T[]): Parse<T> =>
  (s) => {
    const v = s.trim().toLowerCase() as T;
    if (!values.includes(v)) throw new BadValue(`expected one of ${values.join(', ')}`);
    return v;
  };

/** A Kubernetes resource quantity such as 100m, 0.5, 128Mi, 1e3. */
const QUANTITY = /^[+]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$/;
const quantity: Parse<string> = (s) => {
  const v = s.trim();
  if (!QUANTITY.test(v)) throw new BadValue('expected a Kubernetes quantity such as 100m, 0.5, 128Mi or 1Gi');
  return v;
};

/** A Go duration above zero (5s, 500ms, 1m30s), read as the sidecar's flag reads it (cli/options.ts). */
const duration: Parse<string> = (s) => {
  const v = s.trim();
  const ms = parseDuration(v);
  if (ms === undefined || ms <= 0) throw new BadValue('expected a duration such as 5s or 500ms');
  return v;
};

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Comma-separated container names. */
const names: Parse<string[]> = (s) => {
  const out = s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const bad = out.find((n) => !DNS_LABEL.test(n));
  if (bad !== undefined) throw new BadValue(`"${bad}" is not a container name (lower-case letters, digits and "-")`);
  return [...new Set(out)];
};

const absPath: Parse<string> = (s) => {
  const v = s.trim();
  if (!v.startsWith('/') || v.includes('..') || v.includes(',') || v.length > 200) throw new BadValue('expected an absolute folder path without ".."');
  return v.replace(/\/+$/, '') || '/';
};

const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
/** `KEY=value,KEY2=value2` (a value may contain "="; whitespace around items is trimmed). */
const envList: Parse<{ name: string; value: string }[]> = (s) => {
  const out: { name: string; value: string }[] = [];
  for (const item of s.split(',')) {
    const t = item.trim();
    if (t === '') continue;
    const eq = t.indexOf('=');
    const name = eq < 0 ? t : t.slice(0, eq).trim();
    if (eq < 0 || !ENV_NAME.test(name)) throw new BadValue(`"${t}" is not NAME=value`);
    out.push({ name, value: t.slice(eq + 1).trim() });
  }
  return out;
};

const appId: Parse<string> = (s) => {
  const v = s.trim();
  if (!/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,62}[A-Za-z0-9])?$/.test(v)) throw new BadValue('expected letters, digits, "-", "_" or "." (at most 64)');
  return v;
};

/** secret name (DNS subdomain). */
const secretName: Parse<string> = (s) => {
  const v = s.trim();
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(v)) throw new BadValue('expected a Secret name');
  return v;
};

// ---- the table ----

export const ANNOTATIONS = {
  enabled: def(['enabled'], bool, false, 'inject the sidecar into this pod ("true")'),
  appId: opt(['app-id'], appId, "application id (default: the pod's generate-name prefix, or its name)"),
  appPort: opt(['app-port'], port, 'port the app listens on (none: the sidecar does not call the app)'),
  appProtocol: opt(['app-protocol'], oneOf('http', 'grpc'), 'protocol of the app channel'),
  appMaxConcurrency: opt(['app-max-concurrency'], int(-1, 1_000_000), 'most concurrent calls to the app'),
  config: opt(['config'], str, 'name of the Configuration resource'),
  logLevel: opt(['log-level'], oneOf('debug', 'info', 'warn', 'error'), 'sidecar log level'),
  apiTokenSecret: opt(['api-token-secret'], secretName, 'Secret (key "token") holding the API token: RT_API_TOKEN in the sidecar and the app'),
  appTokenSecret: opt(['app-token-secret'], secretName, 'Secret (key "token") the sidecar sends to the app: RT_APP_API_TOKEN'),
  enableMetrics: def(['enable-metrics'], bool, true, 'serve Prometheus metrics'),
  metricsPort: def(['sidecar-metrics-port', 'metrics-port'], port, 9090, 'sidecar metrics port'),
  httpPort: def(['sidecar-http-port'], port, 3500, 'sidecar HTTP API port'),
  grpcPort: def(['sidecar-grpc-port'], port, 50001, 'sidecar gRPC API port'),
  appHealthCheck: opt(['enable-app-health-check'], bool, 'probe the app health path'),
  appHealthCheckPath: opt(['app-health-check-path'], str, 'app health path'),
  appHealthProbeInterval: opt(['app-health-probe-interval'], duration, 'interval between app health probes'),
  appHealthProbeTimeout: opt(['app-health-probe-timeout'], duration, 'timeout of one app health probe'),
  appHealthThreshold: opt(['app-health-threshold'], positive, 'failed probes before the app is unhealthy'),
  cpuRequest: opt(['sidecar-cpu-request'], quantity, 'sidecar CPU request'),
  cpuLimit: opt(['sidecar-cpu-limit'], quantity, 'sidecar CPU limit'),
  memoryRequest: opt(['sidecar-memory-request'], quantity, 'sidecar memory request'),
  memoryLimit: opt(['sidecar-memory-limit'], quantity, 'sidecar memory limit'),
  livenessDelay: def(['sidecar-liveness-probe-delay-seconds'], seconds, 3, 'liveness probe initial delay'),
  livenessTimeout: def(['sidecar-liveness-probe-timeout-seconds'], positive, 3, 'liveness probe timeout'),
  livenessPeriod: def(['sidecar-liveness-probe-period-seconds'], positive, 6, 'liveness probe period'),
  livenessThreshold: def(['sidecar-liveness-probe-threshold'], positive, 3, 'liveness probe failure threshold'),
  readinessDelay: def(['sidecar-readiness-probe-delay-seconds'], seconds, 3, 'readiness probe initial delay'),
  readinessTimeout: def(['sidecar-readiness-probe-timeout-seconds'], positive, 3, 'readiness probe timeout'),
  readinessPeriod: def(['sidecar-readiness-probe-period-seconds'], positive, 6, 'readiness probe period'),
  readinessThreshold: def(['sidecar-readiness-probe-threshold'], positive, 3, 'readiness probe failure threshold'),
  env: def(['env'], envList, [], 'extra sidecar env: NAME=value,NAME2=value2'),
  sidecarImage: opt(['sidecar-image'], str, 'sidecar image (default: the injector\'s --sidecar-image)'),
  injectPluggableComponents: def(['inject-pluggable-components'], bool, false, 'add the containers of the Components scoped to this app that carry rt.io/component-container'),
  pluggableComponents: def(['pluggable-components'], names, [], 'existing containers that are pluggable components: a,b'),
  socketsFolder: def(['pluggable-components-sockets-folder'], absPath, '/tmp/rt-components-sockets', 'socket folder shared by the sidecar and the component containers'),
  nativeSidecar: opt(['native-sidecar'], bool, 'run the sidecar and the components as native sidecars (default: the injector\'s --native-sidecar)'),
  mtls: opt(['mtls'], bool, 'read only to warn: mutual TLS is the platform\'s choice (the injector\'s --mtls), a pod can neither turn it off nor on'),
  podCertificate: opt(['pod-certificate'], bool, 'false: the sidecar asks the issuer for its certificate even where the kubelet could get it (PodCertificateRequest); both paths give the same identity'),
} as const;

type Table = typeof ANNOTATIONS;
export type SidecarConfig = { [K in keyof Table]: Table[K] extends Spec<infer V, infer D> ? V | D : never };

export interface ParsedAnnotations {
  config: SidecarConfig;
  /** One message per annotation that does not parse; empty when all do. */
  errors: string[];
  warnings: string[];
}

/** Reads every annotation of the table from a pod's annotations. */
export function parseAnnotations(annotations: Record<string, string>): ParsedAnnotations {
  const errors: string[] = [];
  const warnings: string[] = [];
  const config: Record<string, unknown> = {};
  for (const [field, spec] of Object.entries(ANNOTATIONS) as [keyof Table, Spec<unknown, unknown>][]) {
    const found = lookup(annotations, spec.keys);
    if (found === undefined) {
      config[field] = spec.fallback;
      continue;
    }
    if (found.shadowed) warnings.push(`${found.shadowed} is ignored: ${found.key} is set too`);
    try {
      config[field] = spec.parse(found.value);
    } catch (e) {
      if (!(e instanceof BadValue)) throw e;
      errors.push(`annotation ${found.key}: ${JSON.stringify(truncate(found.value))} is not valid (${e.message})`);
      config[field] = spec.fallback;
    }
  }
  return { config: config as SidecarConfig, errors, warnings };
}

/** Whether the pod asks for injection (a bad value counts as an error, reported by parseAnnotations). */
export function injectionRequested(annotations: Record<string, string>): boolean {
  const found = lookup(annotations, ANNOTATIONS.enabled.keys);
  if (found === undefined) return false;
  try {
    return bool(found.value);
  } catch {
    return true; // a value that is neither true nor false gets a denial that says so
  }
}

/** Every full annotation name the injector reads (for docs and tests). */
export function annotationNames(): string[] {
  return Object.values(ANNOTATIONS).flatMap((s) => s.keys.map((k) => PREFIX + k));
}

function lookup(annotations: Record<string, string>, keys: readonly string[]): { key: string; value: string; shadowed?: string } | undefined {
  for (const prefix of [PREFIX, ALIAS_PREFIX]) {
    for (const k of keys) {
      const key = prefix + k;
      const value = annotations[key];
      if (typeof value !== 'string') continue;
      const alias = prefix === PREFIX ? ALIAS_PREFIX + k : undefined;
      const shadowed = alias !== undefined && typeof annotations[alias] === 'string' && annotations[alias] !== value ? alias : undefined;
      return { key, value, shadowed };
    }
  }
  return undefined;
}

function truncate(s: string): string {
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}
