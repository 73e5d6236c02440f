/**
 * `rt injector`: the mutating admission webhook that adds the sidecar to pods annotated
 * `rt.io/enabled: "true"`. Components come from an informer cache (kubeconfig or in-cluster).
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { createLogger, isLogLevel, logAsJsonFromEnv } from '../../shared/logger.ts';
import { flagSpec, parseFlags, runServiceCommand, wholeNumberFlag } from '../../shared/service-command.ts';
import { ComponentInformer, groupServed, MergedComponents, StaticComponents, type ComponentLister } from './components.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import { loadInCluster, loadKubeconfig } from '../../shared/kube/config.ts';
import type { InjectorSettings } from './mutate.ts';
import { workloadIdProblem } from '../../shared/spiffe.ts';
import { startInjectorServer, type InjectorServer } from './server.ts';

export const INJECTOR_HELP = `usage: rt injector --tls-cert-file F --tls-key-file F [options]

Serves POST /mutate (AdmissionReview v1 for Pod CREATE) and GET /healthz over HTTPS.

options:
  --port N                      HTTPS port (default 4443; 0 = any free port)
  --listen-address ADDR         bind address (default 0.0.0.0)
  --tls-cert-file F             serving certificate chain (PEM); reloaded when the file changes
  --tls-key-file F              its key (PEM)
  --kubeconfig F                cluster access for the Components cache (default: in-cluster,
                                or none outside a cluster: then no Component containers are found)
  --sidecar-image IMG           image of the injected rt-sidecar (default rt:latest)
  --control-plane-address A     the operator's address given to sidecars
  --scheduler-address A[,B]     the scheduler's address(es) given to sidecars (jobs, workflow timers)
                                (default rt-operator.rt-system.svc.cluster.local:6500)
  --placement-address A[,B]     the actor placement service's address(es) given to sidecars
  --operator-ca-file F          the operator's CA (PEM): sidecars read it from RT_OPERATOR_CA_FILE
  --native-sidecar true|false   default of rt.io/native-sidecar (default true: Kubernetes 1.29+)
  --mtls true|false             workload identity and mutual TLS for every sidecar (default false); a
                                pod's rt.io/mtls cannot change it
  --trust-domain TD             SPIFFE trust domain given to sidecars (default cluster.local)
  --identity-issuer-address A   where sidecars ask for their certificate (default: --control-plane-address)
  --pod-certificates auto|true|false
                                with --mtls: the kubelet gets each sidecar its certificate through a
                                podCertificate volume (PodCertificateRequest, signer rt.io/workload);
                                auto (default): where the cluster serves that API
  --trust-anchors-file F        the workload trust bundle (PEM roots; required with --mtls true): sidecars
                                read it from RT_TRUST_ANCHORS_FILE, and RT_SCHEDULER_TLS_CA_FILE points
                                at it (the scheduler's serving certificate comes from the same CA)
  --log-level LEVEL             debug, info, warn, error (default info)
environment: RT_INJECTOR_PORT, RT_INJECTOR_TLS_CERT_FILE, RT_INJECTOR_TLS_KEY_FILE, RT_SIDECAR_IMAGE,
  RT_CONTROL_PLANE_ADDRESS, RT_OPERATOR_CA_FILE, RT_NATIVE_SIDECAR, RT_MTLS_ENABLED, RT_TRUST_DOMAIN,
  RT_IDENTITY_ISSUER_ADDRESS, RT_TRUST_ANCHORS_FILE, KUBECONFIG, RT_LOG_LEVEL`;

export class InjectorUsageError extends Error {}

export interface InjectorProcessOptions {
  port: number;
  listenAddress: string;
  certFile: string;
  keyFile: string;
  kubeconfig?: string;
  settings: InjectorSettings;
  logLevel: string;
  /** With identity: whether the kubelet gets sidecars their certificates (PodCertificateRequest); auto = where the cluster serves the API. */
  podCertificates?: 'auto' | 'true' | 'false';
}

export function parseInjectorArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): InjectorProcessOptions | 'help' {
  const v = parseFlags(
    argv,
    flagSpec(['port', 'listen-address', 'tls-cert-file', 'tls-key-file', 'kubeconfig', 'sidecar-image', 'control-plane-address', 'scheduler-address', 'placement-address', 'operator-ca-file', 'native-sidecar', 'mtls', 'trust-domain', 'identity-issuer-address', 'trust-anchors-file', 'pod-certificates', 'log-level']),
    InjectorUsageError,
  );
  if (v === 'help') return 'help';
  const s = (flag: string, envName: string) => (v[flag] as string | undefined) ?? (env[envName] || undefined);
  const port = wholeNumberFlag('port', s('port', 'RT_INJECTOR_PORT'), 4443, 0, 65535, InjectorUsageError);
  const certFile = s('tls-cert-file', 'RT_INJECTOR_TLS_CERT_FILE');
  const keyFile = s('tls-key-file', 'RT_INJECTOR_TLS_KEY_FILE');
  if (!certFile || !keyFile) throw new InjectorUsageError('--tls-cert-file and --tls-key-file are required: the API server calls webhooks over HTTPS only');
  const native = s('native-sidecar', 'RT_NATIVE_SIDECAR') ?? 'true';
  if (native !== 'true' && native !== 'false') throw new InjectorUsageError(`--native-sidecar must be true or false, got "${native}"`);
  const logLevel = s('log-level', 'RT_LOG_LEVEL') ?? 'info';
  if (!isLogLevel(logLevel)) throw new InjectorUsageError(`--log-level must be one of debug, info, warn, error, got "${logLevel}"`);
  const caFile = s('operator-ca-file', 'RT_OPERATOR_CA_FILE');
  const operatorCaPem = caFile ? readPem('operator-ca-file', caFile) : undefined;
  const mtls = s('mtls', 'RT_MTLS_ENABLED') ?? 'false';
  if (mtls !== 'true' && mtls !== 'false') throw new InjectorUsageError(`--mtls must be true or false, got "${mtls}"`);
  const controlPlaneAddress = s('control-plane-address', 'RT_CONTROL_PLANE_ADDRESS') ?? 'rt-operator.rt-system.svc.cluster.local:6500';
  let identity: InjectorSettings['identity'];
  if (mtls === 'true') {
    const anchorsFile = s('trust-anchors-file', 'RT_TRUST_ANCHORS_FILE');
    if (!anchorsFile) throw new InjectorUsageError('--mtls true needs --trust-anchors-file (the roots sidecars check peers against)');
    const trustAnchorsPem = readPem('trust-anchors-file', anchorsFile);
    if (!trustAnchorsPem.includes('-----BEGIN CERTIFICATE-----')) throw new InjectorUsageError(`--trust-anchors-file ${anchorsFile} holds no PEM certificate`);
    const trustDomain = s('trust-domain', 'RT_TRUST_DOMAIN') ?? 'cluster.local';
    const problem = workloadIdProblem({ trustDomain, namespace: 'default', appId: 'app' });
    if (problem) throw new InjectorUsageError(`--trust-domain: ${problem}`);
    identity = { trustDomain, issuerAddress: s('identity-issuer-address', 'RT_IDENTITY_ISSUER_ADDRESS') ?? controlPlaneAddress, trustAnchorsPem };
  }
  const podCertificates = s('pod-certificates', 'RT_POD_CERTIFICATES') ?? 'auto';
  if (!['auto', 'true', 'false'].includes(podCertificates)) throw new InjectorUsageError(`--pod-certificates must be auto, true or false, got "${podCertificates}"`);
  return {
    port,
    listenAddress: s('listen-address', 'RT_INJECTOR_LISTEN_ADDRESS') ?? '0.0.0.0',
    certFile,
    keyFile,
    kubeconfig: s('kubeconfig', 'KUBECONFIG'),
    logLevel,
    podCertificates: podCertificates as InjectorProcessOptions['podCertificates'],
    settings: {
      sidecarImage: s('sidecar-image', 'RT_SIDECAR_IMAGE') ?? 'rt:latest',
      controlPlaneAddress,
      schedulerAddress: s('scheduler-address', 'RT_SCHEDULER_ADDRESS'),
      placementAddress: s('placement-address', 'RT_PLACEMENT_ADDRESS'),
      nativeSidecar: native === 'true',
      operatorCaPem,
      identity,
    },
  };
}

function readPem(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new InjectorUsageError(`--${flag} ${file}: ${(e as Error).message}`);
  }
}

/** Whether the API server serves certificates.k8s.io/v1beta1 podcertificaterequests (beta in 1.35, off by default). */
async function podCertificatesServed(client: KubeClient): Promise<boolean> {
  const list = await client.get<{ resources?: { name?: string }[] }>('/apis/certificates.k8s.io/v1beta1');
  return (list.resources ?? []).some((r) => r.name === 'podcertificaterequests');
}

export interface RunningInjector {
  server: InjectorServer;
  components: ComponentLister;
  close(): Promise<void>;
}

/** Starts the Components cache (when there is cluster access) and the HTTPS server. */
export async function startInjector(o: InjectorProcessOptions, log: Logger = createLogger({ level: o.logLevel, json: logAsJsonFromEnv() ?? Boolean(process.env.KUBERNETES_SERVICE_HOST), base: { scope: 'rt.injector' } })): Promise<RunningInjector> {
  const informers: ComponentInformer[] = [];
  let components: ComponentLister;
  let client: KubeClient | undefined;
  if (o.kubeconfig || process.env.KUBERNETES_SERVICE_HOST) {
    client = new KubeClient(o.kubeconfig ? loadKubeconfig(o.kubeconfig) : loadInCluster(), { userAgent: 'rt-injector' });
    informers.push(new ComponentInformer(client, log, 'rt.io'));
    // dapr.io Components, as the operator serves them, where their CRD is installed
    if (await groupServed(client, 'dapr.io').catch(() => false)) informers.push(new ComponentInformer(client, log, 'dapr.io'));
    components = new MergedComponents(informers);
    const identity = o.settings.identity;
    if (identity && o.podCertificates !== 'false') {
      identity.podCertificates = o.podCertificates === 'true' || (await podCertificatesServed(client).catch(() => false));
      log.info({ podCertificates: identity.podCertificates }, identity.podCertificates ? 'sidecars get their certificates from the kubelet (PodCertificateRequest, signer rt.io/workload)' : 'the cluster does not serve PodCertificateRequests: sidecars ask the issuer for their certificates');
    }
    // not awaited: /healthz answers 503 until the first lists arrived, and the webhook call of
    // a pod asking for component containers fails until then (its failurePolicy decides)
    for (const i of informers) void i.start();
  } else {
    log.warn('no --kubeconfig and not in a cluster: Components are not listed, so rt.io/inject-pluggable-components finds none');
    components = new StaticComponents();
  }
  let server: InjectorServer;
  try {
    server = await startInjectorServer({ port: o.port, listenAddress: o.listenAddress, certFile: o.certFile, keyFile: o.keyFile, settings: o.settings, components, log });
  } catch (e) {
    await Promise.all(informers.map((i) => i.stop()));
    client?.close();
    throw e;
  }
  log.info({ port: server.port, sidecarImage: o.settings.sidecarImage, nativeSidecar: o.settings.nativeSidecar, mtls: !!o.settings.identity, trustDomain: o.settings.identity?.trustDomain }, `rt injector ready: HTTPS on ${o.listenAddress}:${server.port}`);
  return {
    server,
    components,
    close: async () => {
      await server.close();
      await Promise.all(informers.map((i) => i.stop()));
      client?.close();
    },
  };
}

export function injectorCommand(argv: string[]): Promise<number> {
  return runServiceCommand({ name: 'injector', help: INJECTOR_HELP, parse: (a) => parseInjectorArgs(a), usageError: InjectorUsageError, start: (o) => startInjector(o) }, argv);
}
