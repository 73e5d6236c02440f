/**
 * `rt placement`: the actor placement service. One replica by default; with `--etcd-endpoints`
 * several, of which the one elected through an etcd lease serves (placement/src/leader.ts).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import type { TlsSource } from '../../shared/grpc-server-credentials.ts';
import { parseDuration } from '../../shared/duration.ts';
import { createLogger, isLogLevel, logAsJsonFromEnv } from '../../shared/logger.ts';
import { parseFlags, runServiceCommand, wholeNumberFlag } from '../../shared/service-command.ts';
import { DEFAULT_REPLICATION_FACTOR } from './hashing.ts';
import { startPlacementServer, type PlacementServer } from './grpc/server.ts';
import { startLeadership, type Leadership } from './leader.ts';
import { DEFAULT_HEARTBEAT_TIMEOUT_MS, PlacementService } from './service.ts';

export const PLACEMENT_HELP = `usage: rt placement [options]

Runs the actor placement service: sidecars connect with --placement-host-address HOST:PORT[,HOST:PORT]
and get the table of which host serves which actors.

options:
  --port N                  gRPC port (default 50005; 0 = any free port)
  --listen-address ADDR     bind address (default 127.0.0.1; 0.0.0.0 in a pod)
  --health-port N           HTTP GET /healthz (live) and /readyz (leading) for probes (default 0 = off)
  --heartbeat-timeout D     a host silent this long is removed and its actors move (default 3s)
  --replication-factor N    virtual nodes per host on each actor type's ring (default 100; same on every replica)
  --etcd-endpoints A[,B]    several replicas: the one elected through an etcd lease serves
  --etcd-prefix P           key prefix in etcd (default /rt/placement)
  --etcd-ca-file PATH       TLS toward etcd: the CA of etcd's certificate (env RT_PLACEMENT_ETCD_CA_FILE)
  --etcd-cert-file PATH     client certificate and key when etcd requires them
  --etcd-key-file PATH      (env RT_PLACEMENT_ETCD_CERT_FILE, RT_PLACEMENT_ETCD_KEY_FILE)
  --lease-ttl SECONDS       how long a dead leader holds the lead (default 5)
  --advertise-address A     host:port followers name as the leader (default <hostname>:<port>)
  --identity-trust-bundle-file PATH
                            mutual TLS (needs --tls-*): every host must present a workload
                            certificate from these roots, and reports as its certificate's app
  --tls-cert-file PATH      serve gRPC over TLS with this PEM certificate chain (env RT_PLACEMENT_TLS_CERT_FILE)
  --tls-key-file PATH       and this PEM key (env RT_PLACEMENT_TLS_KEY_FILE)
  --log-level LEVEL         debug, info, warn, error (default info)
  --log-as-json             JSON log lines (default in a pod; env RT_LOG_AS_JSON)
environment: RT_PLACEMENT_PORT, RT_PLACEMENT_LISTEN_ADDRESS, RT_PLACEMENT_HEALTH_PORT, RT_PLACEMENT_ETCD_ENDPOINTS, RT_LOG_LEVEL`;

export interface PlacementProcessOptions {
  port: number;
  listenAddress: string;
  healthPort: number;
  heartbeatTimeoutMs: number;
  replicationFactor: number;
  etcdEndpoints: string[];
  etcdPrefix: string;
  leaseTtlSec: number;
  /** TLS toward etcd (--etcd-ca-file, and --etcd-cert-file/--etcd-key-file for client auth). */
  etcdTls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
  /** What followers name as the leader; default <hostname>:<port>. */
  advertiseAddress?: string;
  logLevel: string;
  logAsJson?: boolean;
  tls?: TlsSource;
  /** Mutual TLS: `tls` carries the trust bundle as its CA. */
  requireClientCertificate?: boolean;
}

export class PlacementUsageError extends Error {}

export function parsePlacementArgs(argv: string[]): PlacementProcessOptions | 'help' {
  const v = parseFlags(
    argv,
    {
      port: { type: 'string' },
      'listen-address': { type: 'string' },
      'health-port': { type: 'string' },
      'heartbeat-timeout': { type: 'string' },
      'replication-factor': { type: 'string' },
      'etcd-endpoints': { type: 'string' },
      'etcd-prefix': { type: 'string' },
      'etcd-ca-file': { type: 'string' },
      'etcd-cert-file': { type: 'string' },
      'etcd-key-file': { type: 'string' },
      'lease-ttl': { type: 'string' },
      'advertise-address': { type: 'string' },
      'identity-trust-bundle-file': { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-key-file': { type: 'string' },
      'log-level': { type: 'string' },
      'log-as-json': { type: 'boolean' },
    },
    PlacementUsageError,
  );
  if (v === 'help') return 'help';
  const env = process.env;
  const s = (name: string, envName?: string) => (v[name] as string | undefined) ?? (envName ? env[envName] || undefined : undefined);
  const int = (name: string, text: string | undefined, def: number, min: number, max: number) => wholeNumberFlag(name, text, def, min, max, PlacementUsageError);
  const hb = s('heartbeat-timeout');
  const heartbeatTimeoutMs = hb === undefined ? DEFAULT_HEARTBEAT_TIMEOUT_MS : parseDuration(hb);
  if (heartbeatTimeoutMs === undefined || heartbeatTimeoutMs < 200 || heartbeatTimeoutMs > 600_000) {
    throw new PlacementUsageError(`--heartbeat-timeout must be a duration from 200ms to 10m (e.g. 3s), got "${hb}"`);
  }
  const level = s('log-level', 'RT_LOG_LEVEL') ?? 'info';
  if (!isLogLevel(level)) throw new PlacementUsageError(`--log-level must be one of debug, info, warn, error, got "${level}"`);
  const etcd = s('etcd-endpoints', 'RT_PLACEMENT_ETCD_ENDPOINTS');
  const certFile = s('tls-cert-file', 'RT_PLACEMENT_TLS_CERT_FILE');
  const keyFile = s('tls-key-file', 'RT_PLACEMENT_TLS_KEY_FILE');
  const bundle = s('identity-trust-bundle-file', 'RT_IDENTITY_TRUST_BUNDLE_FILE');
  if (!certFile !== !keyFile) throw new PlacementUsageError('TLS needs both --tls-cert-file and --tls-key-file');
  if (bundle && !certFile) throw new PlacementUsageError('--identity-trust-bundle-file (mutual TLS) needs --tls-cert-file and --tls-key-file');
  const read = (flag: string, file: string | undefined): Buffer | undefined => {
    if (!file) return undefined;
    try {
      return readFileSync(file);
    } catch (e) {
      throw new PlacementUsageError(`--${flag} ${file}: ${(e as Error).message}`);
    }
  };
  for (const [flag, file] of [['tls-cert-file', certFile], ['tls-key-file', keyFile], ['identity-trust-bundle-file', bundle]] as const) read(flag, file);
  const [etcdCa, etcdCert, etcdKey] = (['etcd-ca-file', 'etcd-cert-file', 'etcd-key-file'] as const).map((f) => read(f, s(f, `RT_PLACEMENT_${f.toUpperCase().replaceAll('-', '_')}`)));
  if ((etcdCert || etcdKey) && !etcdCa) throw new PlacementUsageError("--etcd-cert-file/--etcd-key-file need --etcd-ca-file (the CA of etcd's certificate)");
  if (!etcdCert !== !etcdKey) throw new PlacementUsageError('an etcd client certificate needs both --etcd-cert-file and --etcd-key-file');
  return {
    port: int('port', s('port', 'RT_PLACEMENT_PORT'), 50005, 0, 65535),
    listenAddress: s('listen-address', 'RT_PLACEMENT_LISTEN_ADDRESS') ?? '127.0.0.1',
    healthPort: int('health-port', s('health-port', 'RT_PLACEMENT_HEALTH_PORT'), 0, 0, 65535),
    heartbeatTimeoutMs,
    replicationFactor: int('replication-factor', s('replication-factor'), DEFAULT_REPLICATION_FACTOR, 1, 1000),
    etcdEndpoints: etcd ? etcd.split(',').map((e) => e.trim()).filter(Boolean) : [],
    etcdPrefix: s('etcd-prefix') ?? '/rt/placement',
    leaseTtlSec: int('lease-ttl', s('lease-ttl'), 5, 2, 3600),
    etcdTls: etcdCa && { ca: etcdCa, cert: etcdCert, key: etcdKey },
    advertiseAddress: s('advertise-address'),
    logLevel: level,
    logAsJson: (v['log-as-json'] as boolean | undefined) ?? logAsJsonFromEnv(env) ?? Boolean(env.KUBERNETES_SERVICE_HOST),
    tls: certFile && keyFile ? { certFile, keyFile, caFile: bundle } : undefined,
    requireClientCertificate: Boolean(bundle),
  };
}

export interface RunningPlacement {
  service: PlacementService;
  server: PlacementServer;
  close(): Promise<void>;
}

/** Service, gRPC server, leadership and health port; used by `rt placement` and tests. */
export async function startPlacementProcess(o: PlacementProcessOptions, log = createLogger({ level: o.logLevel, json: o.logAsJson, base: { scope: 'rt.placement' } })): Promise<RunningPlacement> {
  const ha = o.etcdEndpoints.length > 0;
  // a new leader waits a heartbeat timeout before its first table: by then a previous leader that
  // lost its lease has stopped serving, and the hosts it had have reported here
  const service = new PlacementService({ log, heartbeatTimeoutMs: o.heartbeatTimeoutMs, replicationFactor: o.replicationFactor, settleMs: ha ? o.heartbeatTimeoutMs : 0 });
  let leadership: Leadership | undefined;
  const server = await startPlacementServer(service, {
    host: o.listenAddress,
    port: o.port,
    log,
    tls: o.tls,
    requireClientCertificate: o.requireClientCertificate,
    leader: () => leadership?.leader(),
  });
  const advertise = o.advertiseAddress ?? `${hostname()}:${server.port}`;
  try {
    if (ha) {
      leadership = await startLeadership({
        endpoints: o.etcdEndpoints,
        prefix: o.etcdPrefix,
        ttlSec: o.leaseTtlSec,
        tls: o.etcdTls,
        value: advertise,
        log,
        onElected: () => service.activate(),
        onLost: (why) => service.deactivate(`this placement replica lost the lead (${why}): try the next address`),
      });
    } else service.activate();
  } catch (e) {
    await server.close();
    throw e;
  }
  const health = o.healthPort ? await startHealth(service, o.listenAddress, o.healthPort) : undefined;
  const loopback = /^(127\.|::1$|\[::1\]|localhost$)/.test(o.listenAddress);
  if (!o.tls && !loopback) log.warn('placement gRPC without TLS on a non-loopback address: any client can join as a host and be sent actor calls; set --tls-cert-file, --tls-key-file and --identity-trust-bundle-file');
  log.info({ address: server.address, replicas: ha ? `etcd ${o.etcdEndpoints.join(',')}` : 'one', heartbeatTimeoutMs: o.heartbeatTimeoutMs, healthPort: o.healthPort || undefined }, `rt placement ready: gRPC on ${server.address}`);
  return {
    service,
    server,
    close: async () => {
      health?.close();
      service.deactivate('placement is shutting down');
      await leadership?.close();
      await server.close();
    },
  };
}

/** GET /healthz: the process lives. GET /readyz: 200 on the serving replica, 503 on a follower. */
async function startHealth(service: PlacementService, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const s = service.snapshot();
    if (req.method === 'GET' && (req.url === '/healthz' || req.url === '/readyz')) {
      const ok = req.url === '/healthz' || s.active;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: ok ? 'ok' : 'follower', ...s }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

export function placementCommand(argv: string[]): Promise<number> {
  return runServiceCommand({ name: 'placement', help: PLACEMENT_HELP, parse: parsePlacementArgs, usageError: PlacementUsageError, start: (o) => startPlacementProcess(o) }, argv);
}
