/** The scheduler's gRPC service over one engine. */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { SchedulerEngine } from '../engine.ts';
import { tokenMatches } from '../../../sidecar/src/http/auth.ts';
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

export function schedulerImplementation(engine: SchedulerEngine, log: Logger, host: () => string, token?: string): grpc.UntypedServiceImplementation {
  const allowed = (md: grpc.Metadata) => {
    if (!token) return true;
    const sent = md.get(TOKEN_METADATA)[0];
    return typeof sent === 'string' && tokenMatches(sent, token);
  };
  const unary =
    <Req, Res>(fn: (req: Req) => Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => {
      if (!allowed(call.metadata)) {
        cb(UNAUTHENTICATED);
        return;
      }
      fn(call.request).then(
        (res) => cb(null, res),
        (e) => cb(toServiceError(e)),
      );
    };
  let streams = 0;
  return {
    ScheduleJob: unary(async (req: { key?: PbKey; job?: PbJob; overwrite?: boolean; requestId?: string }) => {
      await engine.schedule(toKey(req.key), fromPbJob(req.job), req.overwrite === true, req.requestId || undefined);
      return {};
    }),
    GetJob: unary(async (req: { key?: PbKey }) => ({ job: toPbRecord(await engine.get(toKey(req.key))) })),
    DeleteJob: unary(async (req: { key?: PbKey }) => {
      await engine.delete(toKey(req.key));
      return {};
    }),
    ListJobs: unary(async (req: { namespace?: string; appId?: string; owner?: string }) => {
      const recs = await engine.list({ namespace: req.namespace ?? '', appId: req.appId ?? '', owner: req.owner ?? '' });
      return { jobs: recs.map(toPbRecord) };
    }),
    WatchJobs: (call: grpc.ServerDuplexStream<WatchMessage, unknown>) => {
      if (!allowed(call.metadata)) {
        call.emit('error', UNAUTHENTICATED);
        return;
      }
      const id = ++streams;
      let disconnect: (() => void) | undefined;
      const end = () => {
        disconnect?.();
        disconnect = undefined;
      };
      call.on('data', (msg: WatchMessage) => {
        if (msg.hello) {
          if (disconnect) return;
          const target: Target = { namespace: msg.hello.namespace ?? '', appId: msg.hello.appId ?? '' };
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
              if (batch.length === 0) setImmediate(flush);
              batch.push(toPbTrigger(t));
            },
          });
          call.write({ ready: { host: host() } });
        }
        for (const a of msg.acks ?? []) if (a.id) engine.ack(a.id, a.success === true);
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

/** Serves the engine on host:port (0 = a free port). */
/** `token`: when set, every call must carry it (constant-time compare). */
export async function startSchedulerServer(engine: SchedulerEngine, opts: { host: string; port: number; log: Logger; token?: string; tls?: { cert: Buffer; key: Buffer } }): Promise<SchedulerServer> {
  const server = new grpc.Server({ 'grpc.keepalive_permit_without_calls': 1, 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  let address = '';
  server.addService(schedulerService().service, schedulerImplementation(engine, opts.log, () => address, opts.token));
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const credentials = opts.tls ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: opts.tls.cert, private_key: opts.tls.key }], false) : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${opts.port}`, credentials, (err, p) => (err ? reject(err) : resolve(p))),
  );
  address = `${host}:${port}`;
  return {
    port,
    address,
    close: () =>
      new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000);
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      }),
  };
}
