/** `rt operator`: the operator as a process of its own (a Deployment on a cluster). */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Logger } from 'pino';
import { reviewConversion } from './conversion.ts';
import { createLogger, isLogLevel } from '../../shared/logger.ts';
import { flagSpec, parseFlags, runServiceCommand, wholeNumberFlag } from '../../shared/service-command.ts';
import { DEFAULT_GRPC_PORT, Operator } from './operator.ts';
import { parseIdentityFlags, type IdentityFlags, type IdentitySettings } from './issuer.ts';

/** The API server sends at most a few objects per review; a larger body is refused. */
const MAX_REVIEW_BYTES = 8 * 1024 * 1024;

export const OPERATOR_HELP = `usage: rt operator [options]

Reconciles rt.io Components (status condition Ready) and serves sidecars their Components,
Configurations, Subscriptions and HTTPEndpoints over gRPC.

options:
  --kubeconfig FILE               kubeconfig to use (default: the in-cluster service account)
  --grpc-port N                   gRPC port for sidecars (default 6500)
  --listen-address ADDR           bind address (default 0.0.0.0)
  --tls-cert-file PATH            serve gRPC over TLS with this PEM certificate chain (env RT_OPERATOR_TLS_CERT_FILE)
  --tls-key-file PATH             and this PEM key (env RT_OPERATOR_TLS_KEY_FILE); sidecars verify it
                                  with the CA in their env RT_OPERATOR_CA_FILE
  --metrics-port N                Prometheus metrics on GET /metrics (default 0 = off)
  --conversion-port N             HTTPS POST /convert: the Subscription CRD's conversion webhook between
                                  v1alpha1 (route) and v2alpha1 (routes), with the --tls-* certificate
                                  (env RT_OPERATOR_CONVERSION_PORT; default 0 = off)
  --health-port N                 HTTP GET /readyz (200 once the caches are filled and sidecars are
                                  served, 503 before and while stopping) and GET /healthz (200 while the
                                  process answers) for the kubelet's probes (default 0 = off)
  --trust-domain TD               SPIFFE trust domain of workload certificates (env RT_TRUST_DOMAIN;
                                  default cluster.local)
  --identity-ca-cert-file PATH    the identity CA (PEM certificate and key, EC or RSA): with both, the
  --identity-ca-key-file PATH     operator signs workload certificates (dapr.proto.sentry.v1.CA on the
                                  gRPC port) for sidecars that prove their pod with their token
                                  (env RT_IDENTITY_CA_CERT_FILE, RT_IDENTITY_CA_KEY_FILE); re-read
                                  when they change
  --identity-trust-bundle-file P  the roots sidecars trust (one, or two during a root rotation; default
                                  the CA certificate; env RT_IDENTITY_TRUST_BUNDLE_FILE); WatchResources
                                  also takes a workload certificate from them instead of a token
  --workload-cert-ttl DURATION    life of a workload certificate (default 24h; 1m to 8760h; env
                                  RT_WORKLOAD_CERT_TTL)
  --leader-election-namespace NS  namespace of the Lease "rt-operator" that elects the one replica that
                                  writes (env POD_NAMESPACE; default "default"); every replica serves sidecars
  --watchdog-delete-uninjected    delete controller-owned pods annotated rt.io/enabled that have no
                                  rt-sidecar container, so they come back injected (rate-limited)
  --log-level LEVEL               debug, info, warn, error (default info)
  --log-as-json                   JSON log lines (env RT_LOG_AS_JSON)`;

export class OperatorUsageError extends Error {}

export interface OperatorProcessOptions {
  kubeconfig?: string;
  grpcPort: number;
  listenAddress: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** 0 = off, for each of the three. */
  metricsPort: number;
  healthPort: number;
  conversionPort: number;
  leaderElectionNamespace?: string;
  watchdogDeleteUninjected: boolean;
  identity: IdentitySettings;
  logLevel: string;
  logAsJson?: boolean;
}

export function parseOperatorArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): OperatorProcessOptions | 'help' {
  const v = parseFlags(
    argv,
    flagSpec(['kubeconfig', 'grpc-port', 'listen-address', 'tls-cert-file', 'tls-key-file', 'metrics-port', 'health-port', 'conversion-port', 'leader-election-namespace', 'trust-domain', 'identity-ca-cert-file', 'identity-ca-key-file', 'identity-trust-bundle-file', 'workload-cert-ttl', 'log-level'], ['watchdog-delete-uninjected', 'log-as-json']),
    OperatorUsageError,
  );
  if (v === 'help') return 'help';
  const s = (flag: string, envName?: string) => (v[flag] as string | undefined) ?? (envName ? env[envName] : undefined);
  const port = (flag: string, envName: string, def: number) => wholeNumberFlag(flag, s(flag, envName), def, 0, 65535, OperatorUsageError);
  let identity: IdentitySettings;
  try {
    identity = parseIdentityFlags(v as IdentityFlags, env);
  } catch (e) {
    throw new OperatorUsageError((e as Error).message);
  }
  const logLevel = s('log-level', 'RT_LOG_LEVEL') ?? 'info';
  if (!isLogLevel(logLevel)) throw new OperatorUsageError(`--log-level must be debug, info, warn or error, got "${logLevel}"`);
  const o: OperatorProcessOptions = {
    kubeconfig: s('kubeconfig', 'KUBECONFIG'),
    grpcPort: port('grpc-port', 'RT_OPERATOR_GRPC_PORT', DEFAULT_GRPC_PORT),
    listenAddress: s('listen-address', 'RT_OPERATOR_LISTEN_ADDRESS') ?? '0.0.0.0',
    tlsCertFile: s('tls-cert-file', 'RT_OPERATOR_TLS_CERT_FILE'),
    tlsKeyFile: s('tls-key-file', 'RT_OPERATOR_TLS_KEY_FILE'),
    metricsPort: port('metrics-port', 'RT_OPERATOR_METRICS_PORT', 0),
    healthPort: port('health-port', 'RT_OPERATOR_HEALTH_PORT', 0),
    conversionPort: port('conversion-port', 'RT_OPERATOR_CONVERSION_PORT', 0),
    leaderElectionNamespace: s('leader-election-namespace'),
    watchdogDeleteUninjected: (v['watchdog-delete-uninjected'] as boolean | undefined) ?? env.RT_OPERATOR_WATCHDOG_DELETE_UNINJECTED === 'true',
    identity,
    logLevel,
    logAsJson: v['log-as-json'] as boolean | undefined,
  };
  if (!!o.tlsCertFile !== !!o.tlsKeyFile) throw new OperatorUsageError('--tls-cert-file and --tls-key-file go together');
  if (o.conversionPort > 0 && !o.tlsCertFile) throw new OperatorUsageError('--conversion-port needs --tls-cert-file and --tls-key-file (the API server calls webhooks over HTTPS)');
  if (identity.clientTrustBundleFile && !o.tlsCertFile) throw new OperatorUsageError('workload identity (--identity-*) needs --tls-cert-file and --tls-key-file: tokens and client certificates travel over TLS only');
  return o;
}

/** The operator with its health, conversion and metrics ports; prints the line tests and the chart's probes look for. */
export async function startOperatorProcess(o: OperatorProcessOptions): Promise<{ operator: Operator; close(): Promise<void> }> {
  const log = createLogger({ level: o.logLevel, json: o.logAsJson, base: { scope: 'rt-operator' } });
  const operator = new Operator({
    kubeconfig: o.kubeconfig,
    grpcPort: o.grpcPort,
    listenAddress: o.listenAddress,
    tlsCertFile: o.tlsCertFile,
    tlsKeyFile: o.tlsKeyFile,
    leaderElectionNamespace: o.leaderElectionNamespace,
    watchdogDeleteUninjected: o.watchdogDeleteUninjected,
    issuer: o.identity.issuer,
    clientTrustBundleFile: o.identity.clientTrustBundleFile,
    trustDomain: o.identity.trustDomain,
    log,
  });
  let health: Server | undefined;
  let conversion: HttpsServer | undefined;
  let metrics: Server | undefined;
  try {
    // up before the caches fill: the readiness probe then reads 503, not a refused connection
    if (o.healthPort > 0) health = await serveHealth(o.healthPort, o.listenAddress, operator);
    // conversion does not wait for the caches: it needs none, and the API server needs it for every v1alpha1 write
    if (o.conversionPort > 0) conversion = await serveConversion(o.conversionPort, o.listenAddress, o.tlsCertFile!, o.tlsKeyFile!, log);
    const bound = await operator.start();
    console.log(`rt operator listening on ${bound}`);
    if (o.metricsPort > 0) metrics = await serveMetrics(o.metricsPort, operator);
  } catch (e) {
    health?.close();
    conversion?.close();
    await operator.close();
    throw e;
  }
  return {
    operator,
    close: async () => {
      metrics?.close();
      const closing = operator.close();
      health?.close();
      conversion?.close();
      await closing;
    },
  };
}

export function operatorCommand(argv: string[]): Promise<number> {
  return runServiceCommand({ name: 'operator', help: OPERATOR_HELP, parse: (a) => parseOperatorArgs(a), usageError: OperatorUsageError, start: startOperatorProcess }, argv);
}

/** The Subscription CRD's conversion webhook (conversion.ts) over HTTPS. */
async function serveConversion(port: number, host: string, certFile: string, keyFile: string, log: Logger): Promise<HttpsServer> {
  const server = createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if ((req.url ?? '').split('?')[0] !== '/convert') return send(404, { errorCode: 'ERR_NOT_FOUND', message: 'the conversion webhook answers POST /convert' });
    if (req.method !== 'POST') return send(405, { errorCode: 'ERR_METHOD_NOT_ALLOWED', message: 'use POST /convert with a ConversionReview' });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_REVIEW_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      if (size > MAX_REVIEW_BYTES) return send(413, { errorCode: 'ERR_MALFORMED_REQUEST', message: `a ConversionReview larger than ${MAX_REVIEW_BYTES} bytes` });
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return send(400, { errorCode: 'ERR_MALFORMED_REQUEST', message: 'the body is not JSON' });
      }
      const review = reviewConversion(body);
      if (review.response.result && (review.response.result as { status: string }).status !== 'Success') log.warn((review.response.result as { message: string }).message);
      send(200, review);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/** The kubelet's probes: /readyz follows the operator's readiness, /healthz that the process answers. */
async function serveHealth(port: number, host: string, operator: Operator): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { errorCode: 'ERR_METHOD_NOT_ALLOWED', message: `use GET ${path}` });
    if (path === '/healthz') return send(200, { status: 'ok' });
    if (path === '/readyz') return operator.ready ? send(200, { status: 'ok' }) : send(503, { errorCode: 'ERR_NOT_READY', message: 'the operator is filling its caches, or stopping' });
    send(404, { errorCode: 'ERR_NOT_FOUND', message: `no route ${path}; GET /readyz or /healthz` });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

async function serveMetrics(port: number, operator: Operator): Promise<Server> {
  const prom = await import('prom-client');
  const registry = new prom.Registry();
  prom.collectDefaultMetrics({ register: registry, prefix: 'rt_operator_' });
  new prom.Gauge({ name: 'rt_operator_components_reconciled_total', help: 'Component reconciliations since start', registers: [registry], collect() {
    this.set(operator.reconciled);
  } });
  if (operator.issuer) {
    const issuer = operator.issuer;
    new prom.Counter({ name: 'rt_operator_identity_certificates_issued_total', help: 'Workload certificates signed since start', registers: [registry], collect() {
      this.reset();
      this.inc(issuer.issued);
    } });
    new prom.Counter({ name: 'rt_operator_identity_certificates_refused_total', help: 'Certificate requests refused since start, by gRPC status', labelNames: ['code'], registers: [registry], collect() {
      this.reset();
      for (const [code, n] of issuer.refused) this.inc({ code }, n);
    } });
  }
  new prom.Gauge({ name: 'rt_operator_leader', help: '1 while this replica holds the leader Lease (it alone writes)', registers: [registry], collect() {
    this.set(operator.leader ? 1 : 0);
  } });
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404).end();
    void registry.metrics().then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text));
  });
  await new Promise<void>((r) => server.listen(port, r));
  return server;
}
