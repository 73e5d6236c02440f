/**
 * `rt scheduler`: the scheduler as a service of its own. SQLite (one replica) by default;
 * `--etcd-endpoints` for several replicas sharing the jobs by partition.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { rtHome } from '../../shared/rt-home.ts';
import type { Clock } from '../../shared/clock.ts';
import { createLogger, isLogLevel, logAsJsonFromEnv } from '../../shared/logger.ts';
import { flagSpec, parseFlags, runServiceCommand, wholeNumberFlag } from '../../shared/service-command.ts';
import { SchedulerEngine } from './engine.ts';
import { startSchedulerServer, type SchedulerServer } from './grpc/server.ts';
import type { TlsSource } from '../../shared/grpc-server-credentials.ts';
import { EtcdJobStore } from './store/etcd.ts';
import { SqliteJobStore } from './store/sqlite.ts';
import type { JobStore } from './store/types.ts';

export const SCHEDULER_HELP = `usage: rt scheduler [options]

Runs the jobs scheduler: sidecars connect with --scheduler-host-address HOST:PORT.

options:
  --port N                  gRPC port (default 50006; 0 = any free port)
  --listen-address ADDR     bind address (default 127.0.0.1; 0.0.0.0 in a pod)
  --health-port N           HTTP GET /healthz for probes (default 0 = off)
  --data-dir DIR            SQLite store folder (default ~/.rt/scheduler, or under RT_HOME)
  --etcd-endpoints A[,B]    use etcd instead of SQLite (HA: run several replicas)
  --etcd-prefix P           key prefix in etcd (default /rt/scheduler)
  --etcd-ca-file PATH       TLS toward etcd: the CA of etcd's certificate (env RT_SCHEDULER_ETCD_CA_FILE)
  --etcd-cert-file PATH     client certificate and key when etcd requires them
  --etcd-key-file PATH      (env RT_SCHEDULER_ETCD_CERT_FILE, RT_SCHEDULER_ETCD_KEY_FILE)
  --partitions N            job partitions shared by the replicas (default 16; same on every replica)
  --lease-ttl SECONDS       how long a dead replica holds its jobs (default 5)
  --replica-id ID           this replica's name (default host-pid-random)
  --token-file PATH         require this token from every caller (or env RT_SCHEDULER_TOKEN);
                            sidecars send it from their env RT_SCHEDULER_TOKEN. For standalone use:
                            one token shared by every app cannot tell them apart; on a cluster use
                            --identity-trust-bundle-file
  --identity-trust-bundle-file PATH
                            mutual TLS (needs --tls-*): every caller must present a workload
                            certificate from these roots (PEM, one or two during a root rotation;
                            re-read when it changes; env RT_IDENTITY_TRUST_BUNDLE_FILE), and each
                            call is limited to the namespace and app id of its certificate
  --tls-cert-file PATH      serve gRPC over TLS with this PEM certificate chain (env RT_SCHEDULER_TLS_CERT_FILE)
  --tls-key-file PATH       and this PEM key (env RT_SCHEDULER_TLS_KEY_FILE); sidecars verify the
                            certificate with the CA in their env RT_SCHEDULER_TLS_CA_FILE
  --log-level LEVEL         debug, info, warn, error (default info)
  --log-as-json             JSON log lines (default in a pod; env RT_LOG_AS_JSON)
environment: RT_SCHEDULER_PORT, RT_SCHEDULER_LISTEN_ADDRESS, RT_SCHEDULER_HEALTH_PORT, RT_SCHEDULER_ETCD_ENDPOINTS, RT_DATA_DIR, RT_LOG_LEVEL`;

export interface SchedulerProcessOptions {
  port: number;
  listenAddress: string;
  /** 0 = no health endpoint. */
  healthPort?: number;
  dataDir: string;
  etcdEndpoints: string[];
  etcdPrefix: string;
  partitions: number;
  leaseTtlSec: number;
  replicaId: string;
  logLevel: string;
  /** JSON log lines instead of readable ones. */
  logAsJson?: boolean;
  /** Callers must send it (metadata rt-scheduler-token); undefined = no check (loopback). */
  token?: string;
  /** TLS toward etcd (--etcd-ca-file, and --etcd-cert-file/--etcd-key-file for client auth). */
  etcdTls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
  /**
   * PEM certificate chain and key: serve gRPC over TLS (sidecars verify it with RT_SCHEDULER_TLS_CA_FILE).
   * With the files named, they are read again when they change (a renewed certificate).
   */
  tls?: { cert: Buffer; key: Buffer; certFile?: string; keyFile?: string };
  /** The workload trust bundle: mutual TLS, every call scoped to its client certificate's app. */
  clientCa?: { pem: Buffer; file?: string };
  /** The engine's time (tests pass a ManualClock); the system clock by default. */
  clock?: Clock;
}

export class SchedulerUsageError extends Error {}

export function parseSchedulerArgs(argv: string[]): SchedulerProcessOptions | 'help' {
  const v = parseFlags(
    argv,
    flagSpec(['port', 'listen-address', 'health-port', 'data-dir', 'etcd-endpoints', 'etcd-prefix', 'partitions', 'lease-ttl', 'replica-id', 'token-file', 'tls-cert-file', 'etcd-ca-file', 'etcd-cert-file', 'etcd-key-file', 'tls-key-file', 'identity-trust-bundle-file', 'log-level'], ['log-as-json']),
    SchedulerUsageError,
  );
  if (v === 'help') return 'help';
  const env = process.env;
  const int = (name: string, s: string | undefined, def: number, min: number, max: number) => wholeNumberFlag(name, s, def, min, max, SchedulerUsageError);
  const etcd = (v['etcd-endpoints'] as string | undefined) ?? env.RT_SCHEDULER_ETCD_ENDPOINTS;
  return {
    port: int('port', (v.port as string | undefined) ?? env.RT_SCHEDULER_PORT, 50006, 0, 65535),
    listenAddress: (v['listen-address'] as string | undefined) ?? env.RT_SCHEDULER_LISTEN_ADDRESS ?? '127.0.0.1',
    healthPort: int('health-port', (v['health-port'] as string | undefined) ?? env.RT_SCHEDULER_HEALTH_PORT, 0, 0, 65535),
    dataDir: (v['data-dir'] as string | undefined) ?? env.RT_DATA_DIR ?? join(rtHome(env), 'scheduler'),
    etcdEndpoints: etcd ? etcd.split(',').map((s) => s.trim()).filter(Boolean) : [],
    etcdPrefix: (v['etcd-prefix'] as string | undefined) ?? '/rt/scheduler',
    partitions: int('partitions', v.partitions as string | undefined, 16, 1, 4096),
    leaseTtlSec: int('lease-ttl', v['lease-ttl'] as string | undefined, 5, 2, 3600),
    replicaId: (v['replica-id'] as string | undefined) ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`,
    logLevel: logLevelArg((v['log-level'] as string | undefined) ?? env.RT_LOG_LEVEL ?? 'info'),
    logAsJson: (v['log-as-json'] as boolean | undefined) ?? logAsJsonFromEnv(env) ?? Boolean(env.KUBERNETES_SERVICE_HOST),
    token: readToken(v['token-file'] as string | undefined) ?? (env.RT_SCHEDULER_TOKEN || undefined),
    etcdTls: readEtcdTls(
      (v['etcd-ca-file'] as string | undefined) ?? env.RT_SCHEDULER_ETCD_CA_FILE,
      (v['etcd-cert-file'] as string | undefined) ?? env.RT_SCHEDULER_ETCD_CERT_FILE,
      (v['etcd-key-file'] as string | undefined) ?? env.RT_SCHEDULER_ETCD_KEY_FILE,
    ),
    ...readTls(
      (v['tls-cert-file'] as string | undefined) ?? env.RT_SCHEDULER_TLS_CERT_FILE,
      (v['tls-key-file'] as string | undefined) ?? env.RT_SCHEDULER_TLS_KEY_FILE,
      (v['identity-trust-bundle-file'] as string | undefined) ?? (env.RT_IDENTITY_TRUST_BUNDLE_FILE || undefined),
    ),
  };
}

function logLevelArg(level: string): string {
  if (!isLogLevel(level)) throw new SchedulerUsageError(`--log-level must be one of debug, info, warn, error, got "${level}"`);
  return level;
}

function readFlagFile(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new SchedulerUsageError(`--${flag} ${file}: ${(e as Error).message}`);
  }
}

function readTls(certFile: string | undefined, keyFile: string | undefined, bundleFile: string | undefined): Pick<SchedulerProcessOptions, 'tls' | 'clientCa'> {
  if (bundleFile && !certFile) throw new SchedulerUsageError('--identity-trust-bundle-file (mutual TLS) needs --tls-cert-file and --tls-key-file');
  if (!certFile && !keyFile) return {};
  if (!certFile || !keyFile) throw new SchedulerUsageError('TLS needs both --tls-cert-file and --tls-key-file');
  return {
    tls: { cert: readFlagFile('tls-cert-file', certFile), key: readFlagFile('tls-key-file', keyFile), certFile, keyFile },
    clientCa: bundleFile ? { pem: readFlagFile('identity-trust-bundle-file', bundleFile), file: bundleFile } : undefined,
  };
}

/** What the gRPC server serves with: the files when named (re-read on change), else the buffers. */
function tlsSource(o: SchedulerProcessOptions): TlsSource | undefined {
  if (!o.tls) return undefined;
  const { cert, key, certFile, keyFile } = o.tls;
  if (certFile && keyFile && (!o.clientCa || o.clientCa.file)) return { certFile, keyFile, caFile: o.clientCa?.file };
  return { cert, key, ca: o.clientCa?.pem };
}

function readEtcdTls(caFile: string | undefined, certFile: string | undefined, keyFile: string | undefined): SchedulerProcessOptions['etcdTls'] {
  if (!caFile && !certFile && !keyFile) return undefined;
  if (!caFile) throw new SchedulerUsageError('--etcd-cert-file/--etcd-key-file need --etcd-ca-file (the CA of etcd\'s certificate)');
  if (!certFile !== !keyFile) throw new SchedulerUsageError('an etcd client certificate needs both --etcd-cert-file and --etcd-key-file');
  return {
    ca: readFlagFile('etcd-ca-file', caFile),
    cert: certFile ? readFlagFile('etcd-cert-file', certFile) : undefined,
    key: keyFile ? readFlagFile('etcd-key-file', keyFile) : undefined,
  };
}

function readToken(file: string | undefined): string | undefined {
  if (!file) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (e) {
    throw new SchedulerUsageError(`--token-file ${file}: ${(e as Error).message}`);
  }
  if (!text) throw new SchedulerUsageError(`--token-file ${file} is empty`);
  return text;
}

export interface RunningScheduler {
  engine: SchedulerEngine;
  server: SchedulerServer;
  store: JobStore;
  close(): Promise<void>;
}

/** Starts engine + store + gRPC server; used by `rt scheduler`, `rt run` and tests. */
export async function startScheduler(o: SchedulerProcessOptions, log = createLogger({ level: o.logLevel, json: o.logAsJson, base: { scope: 'rt.scheduler' } })): Promise<RunningScheduler> {
  const store: JobStore =
    o.etcdEndpoints.length > 0
      ? new EtcdJobStore({ endpoints: o.etcdEndpoints, prefix: o.etcdPrefix, partitions: o.partitions, leaseTtlSec: o.leaseTtlSec, replicaId: o.replicaId, log, tls: o.etcdTls })
      : new SqliteJobStore(join(o.dataDir, 'scheduler.sqlite'), log);
  const engine = new SchedulerEngine({ log, store, clock: o.clock });
  // a store that fails to load stops here (the engine has let go of everything it had
  // started): the command exits non-zero instead of running without a gRPC or health port
  await engine.start();
  let server: SchedulerServer;
  try {
    server = await startSchedulerServer(engine, { host: o.listenAddress, port: o.port, log, token: o.token, tls: tlsSource(o), requireClientCertificate: !!o.clientCa });
  } catch (e) {
    await engine.close();
    throw e;
  }
  const health = o.healthPort ? await startHealth(engine, store, o.listenAddress, o.healthPort) : undefined;
  const loopback = /^(127\.|::1$|\[::1\]|localhost$)/.test(o.listenAddress);
  if (!o.tls && !loopback) log.warn('scheduler gRPC without TLS on a non-loopback address: triggers, job data and the token travel in clear; set --tls-cert-file and --tls-key-file');
  if (!o.token && !o.clientCa && !loopback) log.warn('no scheduler token: any client that reaches this port can schedule and receive jobs of every app; set --identity-trust-bundle-file (mutual TLS) or, standalone, RT_SCHEDULER_TOKEN or --token-file');
  log.info({ address: server.address, store: store.describe(), healthPort: health?.port, token: o.token ? 'required' : 'none', clientCertificate: o.clientCa ? 'required' : 'none' }, `rt scheduler ready: gRPC on ${server.address}`);
  return {
    engine,
    server,
    store,
    close: async () => {
      health?.server.close();
      // the engine first: a handover waits for acks that arrive on the still-open streams
      await engine.close();
      await server.close();
    },
  };
}

/** GET /healthz → 200 with a few numbers; for Kubernetes probes. */
async function startHealth(engine: SchedulerEngine, store: JobStore, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/healthz' || req.url === '/readyz')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', store: store.describe(), ...engine.snapshot() }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as { port: number }).port };
}

export function schedulerCommand(argv: string[]): Promise<number> {
  return runServiceCommand({ name: 'scheduler', help: SCHEDULER_HELP, parse: parseSchedulerArgs, usageError: SchedulerUsageError, start: (o) => startScheduler(o) }, argv);
}
