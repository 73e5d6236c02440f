/** The scheduler's gRPC service over one engine. */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { SchedulerEngine } from '../engine.ts';
import { tokenMatches } from '../../../shared/token.ts';
import { verifiedPeerCertificate, type TlsSource } from '../../../shared/grpc-server-credentials.ts';
import { startGrpcServer } from '../../../shared/grpc-server.ts';
import { certificateWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';
import { invalid, type Target } from '../types.ts';
import { TOKEN_METADATA, fromPbJob, schedulerService, toKey, toPbRecord, toPbTrigger, toServiceError, type PbJob, type PbKey } from './proto.ts';

interface WatchMessage {
  hello?: { namespace?: string; appId?: string; internalOnly?: boolean };
  acks?: { id?: string; success?: boolean }[];
}

/** Most triggers in one stream message. */
const MAX_BATCH = 512;

export interface SchedulerServer {
  port: number;
  address: string;
  close(): Promise<void>;
}

const UNAUTHENTICATED: Partial<grpc.StatusObject> = {
  code: grpc.status.UNAUTHENTICATED,
  details: `missing or wrong scheduler token: send it in the ${TOKEN_METADATA} metadata (sidecars: env RT_SCHEDULER_TOKEN)`,
};

/** A call naming another app than its client certificate's; the message says both. */
class OutOfScope extends Error {}

/**
 * With mutual TLS (`scoped`) every call is the app of its client certificate's: a request that
 * names no namespace or app id gets the certificate's, one that names others is refused.
 */
function scopeOf<T extends { namespace?: string; appId?: string }>(who: WorkloadId | undefined, what: string, ref: T | undefined): T {
  const r = { ...(ref ?? {}) } as T;
  if (!who) return r;
  if ((r.namespace && r.namespace !== who.namespace) || (r.appId && r.appId !== who.appId)) {
    throw new OutOfScope(`refused: ${what} names app "${r.appId ?? ''}" in namespace "${r.namespace ?? ''}", but the client certificate is ${spiffeUri(who)}: a sidecar reaches only its own app's jobs`);
  }
  return { ...r, namespace: who.namespace, appId: who.appId };
}

const NO_WORKLOAD: Partial<grpc.StatusObject> = {
  code: grpc.status.PERMISSION_DENIED,
  details: 'refused: the client certificate names no workload (one URI SAN spiffe://<trust domain>/ns/<namespace>/<app id>)',
};

/**
 * `token`: when set, every call must carry it. `scoped`: mutual TLS is on, and each call is
 * limited to the namespace and app id of the caller's certificate.
 */
export function schedulerImplementation(engine: SchedulerEngine, log: Logger, host: () => string, token?: string, scoped = false): grpc.UntypedServiceImplementation {
  const allowed = (md: grpc.Metadata) => {
    if (!token) return true;
    const sent = md.get(TOKEN_METADATA)[0];
    return typeof sent === 'string' && tokenMatches(sent, token);
  };
  /** The refusal of a call before it runs, if any; else the workload it is scoped to (undefined unscoped). */
  const admit = (call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>): { refused: Partial<grpc.StatusObject> } | { who: WorkloadId | undefined } => {
    if (!allowed(call.metadata)) return { refused: UNAUTHENTICATED };
    if (!scoped) return { who: undefined };
    const who = certificateWorkload(verifiedPeerCertificate(call));
    return who ? { who } : { refused: NO_WORKLOAD };
  };
  const refuse = (e: unknown): Partial<grpc.StatusObject> => {
    if (!(e instanceof OutOfScope)) return toServiceError(e);
    log.warn(e.message);
    return { code: grpc.status.PERMISSION_DENIED, details: e.message };
  };
  const unary =
    <Req, Res>(fn: (req: Req, who: WorkloadId | undefined) => Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => {
      const a = admit(call);
      if ('refused' in a) {
        cb(a.refused);
        return;
      }
      fn(call.request, a.who).then(
        (res) => cb(null, res),
        (e) => cb(refuse(e)),
      );
    };
  let streams = 0;
  return {
    ScheduleJob: unary(async (req: { key?: PbKey; job?: PbJob; overwrite?: boolean; requestId?: string }, who) => {
      await engine.schedule(toKey(scopeOf(who, 'the job', req.key)), fromPbJob(req.job), req.overwrite === true, req.requestId || undefined);
      return {};
    }),
    GetJob: unary(async (req: { key?: PbKey }, who) => ({ job: toPbRecord(await engine.get(toKey(scopeOf(who, 'the job', req.key)))) })),
    DeleteJob: unary(async (req: { key?: PbKey }, who) => {
      await engine.delete(toKey(scopeOf(who, 'the job', req.key)));
      return {};
    }),
    ListJobs: unary(async (req: { namespace?: string; appId?: string; owner?: string }, who) => {
      const ref = scopeOf(who, 'the list', req);
      const recs = await engine.list({ namespace: ref.namespace ?? '', appId: ref.appId ?? '', owner: ref.owner ?? '' });
      return { jobs: recs.map(toPbRecord) };
    }),
    WatchJobs: (call: grpc.ServerDuplexStream<WatchMessage, unknown>) => {
      const a = admit(call);
      if ('refused' in a) {
        call.emit('error', a.refused);
        return;
      }
      const who = a.who;
      // scoped: acks count only for triggers sent on this stream (another app's ids are not its to ack)
      const sent = who ? new Set<string>() : undefined;
      const id = ++streams;
      let disconnect: (() => void) | undefined;
      const end = () => {
        disconnect?.();
        disconnect = undefined;
      };
      call.on('data', (msg: WatchMessage) => {
        if (msg.hello) {
          if (disconnect) return;
          let hello: { namespace?: string; appId?: string };
          try {
            hello = scopeOf(who, 'hello', msg.hello);
          } catch (e) {
            call.emit('error', refuse(e));
            return;
          }
          const target: Target = { namespace: hello.namespace ?? '', appId: hello.appId ?? '' };
          if (!target.namespace || !target.appId) {
            // grpc-js ends a server stream with this status when 'error' is emitted on it
            call.emit('error', toServiceError(invalid('RT_SCHEDULER_APP_ID', 'hello needs namespace and appId')));
            return;
          }
          const peer = call.getPeer();
          // triggers sent in one turn of the event loop go out as one message
          let batch: ReturnType<typeof toPbTrigger>[] = [];
          const flush = () => {
            const out = batch;
            batch = [];
            for (let i = 0; i < out.length; i += MAX_BATCH) call.write({ triggers: out.slice(i, i + MAX_BATCH) });
          };
          disconnect = engine.connect(target, {
            name: `${target.appId}@${peer}#${id}`,
            appJobs: msg.hello.internalOnly !== true,
            send: (t) => {
              sent?.add(t.id);
              if (batch.length === 0) setImmediate(flush);
              batch.push(toPbTrigger(t));
            },
          });
          call.write({ ready: { host: host() } });
        }
        for (const a of msg.acks ?? []) {
          if (!a.id || (sent && !sent.delete(a.id))) continue;
          engine.ack(a.id, a.success === true);
        }
      });
      call.on('end', () => {
        end();
        call.end();
      });
      call.on('error', (e) => {
        log.debug({ err: e.message }, 'watch stream error');
        end();
      });
      call.on('cancelled', end);
      call.on('close', end);
    },
  };
}

export interface SchedulerServerOptions {
  host: string;
  port: number;
  log: Logger;
  /** When set, every call must carry it (constant-time compare). */
  token?: string;
  /** Serve over TLS: a PEM certificate chain and key, as files (re-read when they change) or buffers. */
  tls?: TlsSource;
  /**
   * Mutual TLS: with `tls.ca`/`tls.caFile` (the workload trust bundle) a client certificate is
   * required, and every call is scoped to the namespace and app id it names.
   */
  requireClientCertificate?: boolean;
}

/** A request carries one job: its data (up to MAX_DATA_BYTES, 4 MiB) with room for the rest. */
const MAX_RECEIVE_BYTES = 16 * 1024 * 1024;
/** How long close() lets open calls finish before cutting them. */
const SHUTDOWN_GRACE_MS = 2000;

/** Serves the engine on host:port (0 = a free port). */
export async function startSchedulerServer(engine: SchedulerEngine, opts: SchedulerServerOptions): Promise<SchedulerServer> {
  let address = '';
  const mtls = opts.requireClientCertificate === true;
  if (mtls && !opts.tls) throw new Error('a client certificate can only be required over TLS');
  const started = await startGrpcServer({
    host: opts.host,
    port: opts.port,
    tls: opts.tls,
    clientCertificate: mtls ? 'require' : 'none',
    log: opts.log,
    maxReceiveBytes: MAX_RECEIVE_BYTES,
    shutdownGraceMs: SHUTDOWN_GRACE_MS,
    services: (server) => server.addService(schedulerService().service, schedulerImplementation(engine, opts.log, () => address, opts.token, mtls)),
  });
  address = started.address;
  return { port: started.port, address, close: started.close };
}
