/**
 * Sidecar flags shared by `rt run` and `rt sidecar`, parsed with node:util parseArgs.
 * Every flag also has an env form (RT_<FLAG>) for containers.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_OPTIONS, type StartOptions } from '../sidecar/src/sidecar.ts';
import { parseDuration } from '../shared/duration.ts';
import { isLogLevel, logAsJsonFromEnv } from '../shared/logger.ts';
import { REFERENCE_FLAGS, REFERENCE_FLAG_SPECS, REFERENCE_HELP, normaliseReferenceArgs, parseByteSize } from './reference-flags.ts';

export const SIDECAR_FLAGS = {
  'app-id': { type: 'string' },
  'app-port': { type: 'string' },
  'app-protocol': { type: 'string' },
  'app-channel-address': { type: 'string' },
  'app-max-concurrency': { type: 'string' },
  'enable-app-health-check': { type: 'boolean' },
  'app-health-check-path': { type: 'string' },
  'app-health-probe-interval': { type: 'string' },
  'app-health-probe-timeout': { type: 'string' },
  'app-health-threshold': { type: 'string' },
  'http-port': { type: 'string' },
  'grpc-port': { type: 'string' },
  'internal-grpc-port': { type: 'string' },
  'metrics-port': { type: 'string' },
  'disable-metrics': { type: 'boolean' },
  'listen-address': { type: 'string' },
  'resources-path': { type: 'string', multiple: true },
  config: { type: 'string' },
  'log-level': { type: 'string' },
  'log-as-json': { type: 'boolean' },
  'max-body-size': { type: 'string' },
  namespace: { type: 'string' },
  'scheduler-host-address': { type: 'string' },
  'placement-host-address': { type: 'string' },
  'data-dir': { type: 'string' },
  'components-sockets-folder': { type: 'string' },
  'wait-for-sockets': { type: 'string' },
  mode: { type: 'string' },
  'control-plane-address': { type: 'string' },
  'enable-mtls': { type: 'boolean' },
  'trust-domain': { type: 'string' },
  'identity-issuer-address': { type: 'string' },
  'trust-anchors-file': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Our flags and the reference sidecar's, which parseArgs must all know. */
const ALL_FLAGS = { ...SIDECAR_FLAGS, ...REFERENCE_FLAGS };

export const SIDECAR_HELP = `sidecar options:
  --app-id ID                       application id (required)
  --app-port N                      port the app listens on (0 = no app)
  --app-protocol http               protocol of the app channel
  --app-channel-address HOST        host of the app (default 127.0.0.1)
  --app-max-concurrency N           most concurrent calls to the app (-1 = unlimited)
  --enable-app-health-check         probe the app's health path
  --app-health-check-path PATH      default /healthz
  --app-health-probe-interval DUR   default 5s
  --app-health-probe-timeout DUR    default 500ms
  --app-health-threshold N          failed probes before unhealthy (default 3)
  --http-port N                     HTTP API port (default 3500)
  --grpc-port N                     gRPC API port (default 50001)
  --internal-grpc-port N            sidecar-to-sidecar invocation port (default 50002 in kubernetes
                                    mode, a free port standalone: the local registry finds it)
  --listen-address ADDR             bind address (default 127.0.0.1)
  --metrics-port N                  Prometheus metrics on GET /metrics (default 9090)
  --disable-metrics                 no metrics port
  --resources-path DIR              resource YAML folder or file; repeatable
  --config FILE                     a Configuration resource
  --log-level LEVEL                 debug, info, warn, error (default info)
  --log-as-json                     JSON log lines (default in --mode kubernetes; env RT_LOG_AS_JSON)
  --max-body-size SIZE              largest HTTP request body, e.g. 16Mi, 4MB or bytes (default 16Mi)
  --mode MODE                       standalone (default) or kubernetes
  --control-plane-address HOST:PORT kubernetes mode: the operator that serves this app's resources
                                    (token RT_OPERATOR_TOKEN_FILE, CA RT_OPERATOR_CA_FILE)
  --enable-mtls                     workload identity and mutual TLS between rt processes (env
                                    RT_MTLS_ENABLED=true): the internal port is TLS only, callers are
                                    who their certificates say (docs/identity.md)
  --trust-domain DOMAIN             SPIFFE trust domain of the identity (default cluster.local)
  --identity-issuer-address H:P     the issuer of workload certificates (the operator's CA service,
                                    TLS checked with RT_OPERATOR_CA_FILE, token RT_OPERATOR_TOKEN_FILE;
                                    reference flag --sentry-address). Standalone without it: a local
                                    CA under RT_HOME (<rt home>/identity)
  --trust-anchors-file FILE         PEM roots trusted before the issuer's first answer
  --scheduler-host-address A[,B]    scheduler gRPC addresses
  --placement-host-address A[,B]    actor placement service gRPC addresses (rt placement)
  --data-dir DIR                    embedded persistence folder (default ~/.rt/data, or under RT_HOME)
  --components-sockets-folder DIR   pluggable components' sockets (default /tmp/rt-components-sockets)
  --wait-for-sockets A[,B]          wait (up to 60 s) for these sockets before discovering components
environment: RT_<FLAG> for each flag (RT_APP_ID, RT_HTTP_PORT, …), RT_API_TOKEN (API token), RT_APP_API_TOKEN

${REFERENCE_HELP}`;

export class UsageError extends Error {}

type Values = Record<string, string | boolean | string[] | undefined>;

export interface ParsedSidecarArgs {
  options: StartOptions;
  positionals: string[];
  help: boolean;
  /** Reference-sidecar flags accepted without effect, each with why (the CLI prints them). */
  warnings: string[];
}

export function parseSidecarArgs(argv: string[], allowPositionals: boolean): ParsedSidecarArgs {
  let parsed;
  try {
    parsed = parseArgs({ args: normaliseReferenceArgs(argv, ALL_FLAGS), options: ALL_FLAGS, allowPositionals, allowNegative: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const v = parsed.values as Values;
  if (v.help) return { options: { appId: '' }, positionals: [], help: true, warnings: [] };
  const warnings = applyReferenceFlags(v);
  const env = process.env;
  const str = (flag: string, envName: string): string | undefined => (v[flag] as string | undefined) ?? env[envName];
  const int = (flag: string, envName: string, min: number, max: number): number | undefined => {
    const s = str(flag, envName);
    if (s === undefined) return undefined;
    const n = Number(s);
    if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max}, got "${s}"`);
    return n;
  };
  // a bare number is the reference sidecar's unit for that flag (seconds or milliseconds)
  const dur = (flag: string, envName: string, bareUnitMs = 1): number | undefined => {
    const s = str(flag, envName);
    if (s === undefined) return undefined;
    const d = /^\d+$/.test(s.trim()) ? Number(s) * bareUnitMs : parseDuration(s);
    if (d === undefined || d <= 0) throw new UsageError(`--${flag} must be a duration such as 5s or 500ms, got "${s}"`);
    return d;
  };
  const appId = str('app-id', 'RT_APP_ID');
  if (!appId) throw new UsageError('--app-id is required');
  const protocol = str('app-protocol', 'RT_APP_PROTOCOL') ?? 'http';
  if (protocol !== 'http' && protocol !== 'grpc') throw new UsageError(`--app-protocol must be http or grpc, got "${protocol}"`);
  const resources = (v['resources-path'] as string[] | undefined) ?? (env.RT_RESOURCES_PATH ? env.RT_RESOURCES_PATH.split(',') : []);
  const scheduler = str('scheduler-host-address', 'RT_SCHEDULER_HOST_ADDRESS');
  const placement = str('placement-host-address', 'RT_PLACEMENT_HOST_ADDRESS');
  const mode = str('mode', 'RT_MODE') ?? 'standalone';
  if (mode !== 'standalone' && mode !== 'kubernetes') throw new UsageError(`--mode must be standalone or kubernetes, got "${mode}"`);
  const options: StartOptions = {
    appId,
    appPort: int('app-port', 'RT_APP_PORT', 0, 65535),
    appProtocol: protocol,
    appChannelAddress: str('app-channel-address', 'RT_APP_CHANNEL_ADDRESS'),
    appMaxConcurrency: int('app-max-concurrency', 'RT_APP_MAX_CONCURRENCY', -1, 1_000_000),
    appHealthCheck: (v['enable-app-health-check'] as boolean | undefined) ?? (env.RT_ENABLE_APP_HEALTH_CHECK === 'true' ? true : undefined),
    appHealthCheckPath: str('app-health-check-path', 'RT_APP_HEALTH_CHECK_PATH'),
    appHealthProbeIntervalMs: dur('app-health-probe-interval', 'RT_APP_HEALTH_PROBE_INTERVAL', 1000),
    appHealthProbeTimeoutMs: dur('app-health-probe-timeout', 'RT_APP_HEALTH_PROBE_TIMEOUT'),
    appHealthThreshold: int('app-health-threshold', 'RT_APP_HEALTH_THRESHOLD', 1, 1000),
    httpPort: int('http-port', 'RT_HTTP_PORT', 0, 65535),
    grpcPort: int('grpc-port', 'RT_GRPC_PORT', 0, 65535),
    internalGrpcPort: int('internal-grpc-port', 'RT_INTERNAL_GRPC_PORT', 0, 65535),
    metricsPort: int('metrics-port', 'RT_METRICS_PORT', 0, 65535),
    enableMetrics: v['disable-metrics'] === true || env.RT_ENABLE_METRICS === 'false' ? false : undefined,
    listenAddress: str('listen-address', 'RT_LISTEN_ADDRESS') ?? (mode === 'kubernetes' ? '0.0.0.0' : undefined),
    resourcesPaths: resources,
    configFile: str('config', 'RT_CONFIG'),
    logLevel: logLevel(str('log-level', 'RT_LOG_LEVEL')),
    logAsJson: (v['log-as-json'] as boolean | undefined) ?? logAsJsonFromEnv(env),
    maxRequestBodyBytes: bodySize(str('max-body-size', 'RT_MAX_BODY_SIZE')),
    namespace: str('namespace', 'NAMESPACE') ?? DEFAULT_OPTIONS.namespace,
    schedulerAddresses: scheduler ? scheduler.split(',').map((s) => s.trim()).filter(Boolean) : undefined,
    placementAddresses: placement ? placement.split(',').map((s) => s.trim()).filter(Boolean) : undefined,
    dataDir: str('data-dir', 'RT_DATA_DIR'),
    componentsSocketsFolder: str('components-sockets-folder', 'RT_COMPONENTS_SOCKETS_FOLDER'),
    waitForSockets: str('wait-for-sockets', 'RT_WAIT_FOR_SOCKETS')?.split(',').map((x) => x.trim()).filter(Boolean),
    mode,
    controlPlaneAddress: str('control-plane-address', 'RT_CONTROL_PLANE_ADDRESS'),
    mtls: mtlsOptions(v, str, mode),
    apiToken: env.RT_API_TOKEN || env.DAPR_API_TOKEN || undefined,
    appApiToken: env.RT_APP_API_TOKEN || env.APP_API_TOKEN || undefined,
  };
  return { options, positionals: parsed.positionals, help: false, warnings };
}

/** --enable-mtls (RT_MTLS_ENABLED=true) and its settings; undefined when off. */
function mtlsOptions(v: Values, str: (flag: string, envName: string) => string | undefined, mode: string): StartOptions['mtls'] {
  const env = process.env;
  const on = (v['enable-mtls'] as boolean | undefined) ?? ['true', '1'].includes((env.RT_MTLS_ENABLED ?? '').toLowerCase());
  if (!on) return undefined;
  const issuerAddress = str('identity-issuer-address', 'RT_IDENTITY_ISSUER_ADDRESS');
  // the kubelet's credential bundle (a podCertificate volume) needs no issuer
  if (mode === 'kubernetes' && !issuerAddress && !env.RT_IDENTITY_CREDENTIAL_BUNDLE_FILE) throw new UsageError('--enable-mtls in kubernetes mode needs --identity-issuer-address (env RT_IDENTITY_ISSUER_ADDRESS)');
  return {
    trustDomain: str('trust-domain', 'RT_TRUST_DOMAIN'),
    issuerAddress,
    trustAnchorsFile: str('trust-anchors-file', 'RT_TRUST_ANCHORS_FILE'),
    tokenFile: env.RT_OPERATOR_TOKEN_FILE || undefined,
    issuerCaFile: env.RT_OPERATOR_CA_FILE || undefined,
  };
}

function logLevel(level: string | undefined): string | undefined {
  if (level !== undefined && !isLogLevel(level)) throw new UsageError(`--log-level must be one of debug, info, warn, error, got "${level}"`);
  return level;
}

function bodySize(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = parseByteSize(text);
  if (n === undefined || n < 1) throw new UsageError(`--max-body-size must be a size such as 16Mi, 4MB or a number of bytes, got "${text}"`);
  return n;
}

/** Moves the reference sidecar's flags onto ours; the ones rt has no use for become warnings. */
function applyReferenceFlags(v: Values): string[] {
  const warnings: string[] = [];
  for (const [flag, spec] of Object.entries(REFERENCE_FLAG_SPECS)) {
    const value = v[flag];
    if (value === undefined) continue;
    delete v[flag];
    if ('ignored' in spec) {
      warnings.push(`--${flag} is accepted for the reference sidecar's command line, but has no effect: ${spec.ignored}`);
      continue;
    }
    const converted = spec.convert ? spec.convert(value as string, warnings) : value;
    if (converted === undefined) throw new UsageError(`--${flag} must be ${spec.expect ?? 'a value'}, got "${String(value)}"`);
    if (spec.target === 'resources-path') {
      v[spec.target] = [...((v[spec.target] as string[] | undefined) ?? []), ...(converted as string[])];
    } else if (v[spec.target] === undefined) {
      v[spec.target] = converted;
    }
  }
  return warnings;
}
