/**
 * The `rt-sidecar` container: `rt sidecar --mode kubernetes` with flags from the annotations,
 * its identity (downward API + projected service-account token), ports, probes and resources.
 */
import type { V1Probe, V1ResourceRequirements } from '@kubernetes/client-node';
import type { SidecarConfig } from './annotations.ts';
import { SIDECAR_NAME, type Container, type EnvVar } from './pod.ts';

/** Where the sidecar reads its projected service-account token (audience rt.io/operator). */
export const TOKEN_DIR = '/var/run/secrets/rt.io';
export const TOKEN_FILE = `${TOKEN_DIR}/token`;
/** The operator's CA, projected from the pod's `rt.io/operator-ca` annotation into the same volume. */
export const CA_FILE = `${TOKEN_DIR}/ca.crt`;
export const CA_ANNOTATION = 'rt.io/operator-ca';
export const TOKEN_AUDIENCE = 'rt.io/operator';
/** The workload trust bundle (identity roots), projected from the pod's `rt.io/trust-anchors` annotation. */
export const TRUST_ANCHORS_FILE = `${TOKEN_DIR}/trust-anchors.pem`;
export const TRUST_ANCHORS_ANNOTATION = 'rt.io/trust-anchors';
export const TOKEN_VOLUME = 'rt-identity-token';
/** The kubelet's credential bundle (key, then chain) in the same volume, where PodCertificateRequests are served. */
export const POD_CERTIFICATE_PATH = 'workload-credentials.pem';
export const POD_CERTIFICATE_FILE = `${TOKEN_DIR}/${POD_CERTIFICATE_PATH}`;
/** The signer name the operator signs PodCertificateRequests for. */
export const WORKLOAD_SIGNER = 'rt.io/workload';
export const SOCKETS_VOLUME = 'rt-components-sockets';
export const HEALTH_PATH = '/v1.0/healthz';

export interface SidecarSettings {
  config: SidecarConfig;
  appId: string;
  image: string;
  controlPlaneAddress: string;
  /** The scheduler's address(es), comma-separated; none: the sidecar runs without jobs. */
  schedulerAddress?: string;
  /** The actor placement service's address(es), comma-separated; none: actors are served locally only. */
  placementAddress?: string;
  /** The pod carries the operator's CA: the sidecar reads it from CA_FILE. */
  operatorCa: boolean;
  /** Workload identity and mutual TLS (the pod carries the trust anchors: TRUST_ANCHORS_FILE). */
  identity?: { trustDomain: string; issuerAddress: string; /** the kubelet's credential bundle, when it gets the certificate */ podCertificate?: string };
  native: boolean;
  /** Socket folder and the sockets to wait for, when the pod has pluggable components. */
  sockets?: { folder: string; names: string[] };
}

export function sidecarContainer(s: SidecarSettings): Container {
  const c = s.config;
  const args = ['sidecar', '--mode', 'kubernetes', '--app-id', s.appId, '--control-plane-address', s.controlPlaneAddress];
  if (s.schedulerAddress) args.push('--scheduler-host-address', s.schedulerAddress);
  if (s.placementAddress) args.push('--placement-host-address', s.placementAddress);
  args.push('--http-port', String(c.httpPort), '--grpc-port', String(c.grpcPort));
  if (c.enableMetrics) args.push('--metrics-port', String(c.metricsPort));
  else args.push('--disable-metrics');
  if (c.appPort !== undefined) args.push('--app-port', String(c.appPort));
  if (c.appProtocol) args.push('--app-protocol', c.appProtocol);
  if (c.appMaxConcurrency !== undefined) args.push('--app-max-concurrency', String(c.appMaxConcurrency));
  if (c.config) args.push('--config', c.config);
  if (c.logLevel) args.push('--log-level', c.logLevel);
  if (c.appHealthCheck) args.push('--enable-app-health-check');
  if (c.appHealthCheckPath) args.push('--app-health-check-path', c.appHealthCheckPath);
  if (c.appHealthProbeInterval) args.push('--app-health-probe-interval', c.appHealthProbeInterval);
  if (c.appHealthProbeTimeout) args.push('--app-health-probe-timeout', c.appHealthProbeTimeout);
  if (c.appHealthThreshold !== undefined) args.push('--app-health-threshold', String(c.appHealthThreshold));
  // in both modes the runtime waits for its components' sockets itself: they get no startup
  // probe of ours (it would need a shell in their image), so the kubelet does not wait for them
  if (s.sockets && s.sockets.names.length) args.push('--wait-for-sockets', s.sockets.names.join(','));

  const env: EnvVar[] = [
    { name: 'NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    // the address other sidecars reach this one's internal port at, as placement hands it out
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    { name: 'RT_CONTROL_PLANE_ADDRESS', value: s.controlPlaneAddress },
    { name: 'RT_OPERATOR_TOKEN_FILE', value: TOKEN_FILE },
  ];
  if (s.operatorCa) env.push({ name: 'RT_OPERATOR_CA_FILE', value: CA_FILE });
  const locked = identityEnv(s);
  env.push(...locked);
  if (c.apiTokenSecret) env.push(secretEnv('RT_API_TOKEN', c.apiTokenSecret));
  if (c.appTokenSecret) env.push(secretEnv('RT_APP_API_TOKEN', c.appTokenSecret));
  if (s.sockets) env.push({ name: 'RT_COMPONENTS_SOCKETS_FOLDER', value: s.sockets.folder });
  // the user's env annotation wins over ours for the same name
  // except the identity settings: mutual TLS is the platform's, not the pod's, to turn off
  const user = new Map(c.env.filter((e) => !(s.identity && IDENTITY_ENV.includes(e.name)) && !locked.some((l) => l.name === e.name)).map((e) => [e.name, e]));
  const allEnv = [...env.filter((e) => !user.has(e.name)), ...user.values()];

  const volumeMounts = [{ name: TOKEN_VOLUME, mountPath: TOKEN_DIR, readOnly: true }];
  if (s.sockets) volumeMounts.push({ name: SOCKETS_VOLUME, mountPath: s.sockets.folder, readOnly: false });

  const ports = [
    { name: 'rt-http', containerPort: c.httpPort, protocol: 'TCP' },
    { name: 'rt-grpc', containerPort: c.grpcPort, protocol: 'TCP' },
  ];
  if (c.enableMetrics) ports.push({ name: 'rt-metrics', containerPort: c.metricsPort, protocol: 'TCP' });

  const container: Container = {
    name: SIDECAR_NAME,
    image: s.image,
    args,
    env: allEnv,
    ports,
    volumeMounts,
    // why it stopped: the sidecar writes it to /dev/termination-log, else the log's last lines
    // count; the operator turns it into an Event on the pod (SidecarFailed)
    terminationMessagePolicy: 'FallbackToLogsOnError',
    readinessProbe: probe(c.httpPort, c.readinessDelay, c.readinessTimeout, c.readinessPeriod, c.readinessThreshold),
    livenessProbe: probe(c.httpPort, c.livenessDelay, c.livenessTimeout, c.livenessPeriod, c.livenessThreshold),
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
  const resources = resourcesOf(c);
  if (resources) container.resources = resources;
  if (s.native) {
    container.restartPolicy = 'Always';
    // the app containers start once this passes: the runtime is listening with its components loaded
    container.startupProbe = { httpGet: { path: HEALTH_PATH, port: c.httpPort }, periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 300 };
  }
  return container;
}

/**
 * The identity env of a sidecar when mutual TLS is on: it asks the issuer for its certificate with
 * its token, checks peers (other sidecars, the scheduler, whose serving certificate the same CA
 * signed) against the trust anchors.
 */
function identityEnv(s: SidecarSettings): EnvVar[] {
  if (!s.identity) return [];
  const env: EnvVar[] = [
    { name: 'RT_MTLS_ENABLED', value: 'true' },
    { name: 'RT_TRUST_DOMAIN', value: s.identity.trustDomain },
    { name: 'RT_IDENTITY_ISSUER_ADDRESS', value: s.identity.issuerAddress },
    { name: 'RT_TRUST_ANCHORS_FILE', value: TRUST_ANCHORS_FILE },
    ...(s.identity.podCertificate ? [{ name: 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE', value: s.identity.podCertificate }] : []),
  ];
  if (s.schedulerAddress) env.push({ name: 'RT_SCHEDULER_TLS_CA_FILE', value: TRUST_ANCHORS_FILE });
  if (s.placementAddress) env.push({ name: 'RT_PLACEMENT_TLS_CA_FILE', value: TRUST_ANCHORS_FILE });
  return env;
}

/** The env names the pod's rt.io/env annotation cannot override when mutual TLS is on. */
export const IDENTITY_ENV = ['RT_MTLS_ENABLED', 'RT_TRUST_DOMAIN', 'RT_IDENTITY_ISSUER_ADDRESS', 'RT_TRUST_ANCHORS_FILE', 'RT_SCHEDULER_TLS_CA_FILE', 'RT_PLACEMENT_TLS_CA_FILE', 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE'];

/** Env a container gets to reach the sidecar (app containers), as both RT_* and DAPR_* names. */
export function appEnv(c: SidecarConfig): EnvVar[] {
  const env: EnvVar[] = [];
  const both = (suffix: string, v: Omit<EnvVar, 'name'>) => env.push({ name: `RT_${suffix}`, ...v }, { name: `DAPR_${suffix}`, ...v });
  both('HTTP_PORT', { value: String(c.httpPort) });
  both('GRPC_PORT', { value: String(c.grpcPort) });
  if (c.apiTokenSecret) both('API_TOKEN', { valueFrom: secretEnv('', c.apiTokenSecret).valueFrom });
  if (c.appTokenSecret) {
    const from = secretEnv('', c.appTokenSecret).valueFrom;
    env.push({ name: 'RT_APP_API_TOKEN', valueFrom: from }, { name: 'APP_API_TOKEN', valueFrom: from });
  }
  return env;
}

function secretEnv(name: string, secret: string): EnvVar {
  return { name, valueFrom: { secretKeyRef: { name: secret, key: 'token' } } };
}

function probe(port: number, delay: number, timeout: number, period: number, threshold: number): V1Probe {
  return { httpGet: { path: HEALTH_PATH, port }, initialDelaySeconds: delay, timeoutSeconds: timeout, periodSeconds: period, failureThreshold: threshold };
}

function resourcesOf(c: SidecarConfig): V1ResourceRequirements | undefined {
  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  if (c.cpuRequest) requests.cpu = c.cpuRequest;
  if (c.memoryRequest) requests.memory = c.memoryRequest;
  if (c.cpuLimit) limits.cpu = c.cpuLimit;
  if (c.memoryLimit) limits.memory = c.memoryLimit;
  if (!Object.keys(requests).length && !Object.keys(limits).length) return undefined;
  return { ...(Object.keys(requests).length ? { requests } : {}), ...(Object.keys(limits).length ? { limits } : {}) };
}
