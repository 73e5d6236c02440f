/** The placement service over gRPC: one ReportDaprStatus stream per host. */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { verifiedPeerCertificate, type TlsSource } from '../../../shared/grpc-server-credentials.ts';
import { startGrpcServer } from '../../../shared/grpc-server.ts';
import { certificateWorkload, type WorkloadId } from '../../../shared/spiffe.ts';
import type { Order, PlacementService } from '../service.ts';
import { placementService, type PbHost, type PbOrder } from './proto.ts';
import { HostReportError, hostReport } from './validate.ts';

export interface PlacementServerOptions {
  host: string;
  port: number;
  log: Logger;
  /** Serve over TLS: a PEM certificate chain and key, as files (re-read when they change) or buffers. */
  tls?: TlsSource;
  /**
   * Mutual TLS: with `tls.ca`/`tls.caFile` (the workload trust bundle) a client certificate is
   * required, and each host's app id and namespace are its certificate's.
   */
  requireClientCertificate?: boolean;
  /** Who leads, for a follower's refusal (host:port), when known. */
  leader?: () => string | undefined;
}

export interface PlacementServer {
  port: number;
  address: string;
  close(): Promise<void>;
}

const toPbOrder = (o: Order): PbOrder => ({
  operation: o.operation,
  tables: {
    version: o.version,
    replicationFactor: o.replicationFactor,
    entries: o.entries ? Object.fromEntries(Object.entries(o.entries).map(([type, hosts]) => [type, { hosts: hosts.map((h) => ({ name: h.name, id: h.id, pod: h.pod })) }])) : undefined,
  },
});

export function placementImplementation(service: PlacementService, opts: Pick<PlacementServerOptions, 'log' | 'leader'>, scoped: boolean): grpc.UntypedServiceImplementation {
  const { log } = opts;
  return {
    ReportDaprStatus: (call: grpc.ServerDuplexStream<PbHost, PbOrder>) => {
      const fail = (code: grpc.status, details: string) => call.emit('error', { code, details });
      if (!service.accepting) {
        const leader = opts.leader?.();
        fail(grpc.status.FAILED_PRECONDITION, `this placement replica is not the leader${leader ? `; the leader is ${leader}` : ''}: try the next address`);
        return;
      }
      let who: WorkloadId | undefined;
      if (scoped) {
        who = certificateWorkload(verifiedPeerCertificate(call));
        if (!who) {
          fail(grpc.status.PERMISSION_DENIED, 'refused: the client certificate names no workload (one URI SAN spiffe://<trust domain>/ns/<namespace>/<app id>)');
          return;
        }
      }
      let open = true;
      const session = service.connect({
        send: (o) => {
          if (open) call.write(toPbOrder(o));
        },
        end: (reason) => {
          if (!open) return;
          open = false;
          fail(grpc.status.UNAVAILABLE, reason);
        },
      });
      const gone = () => {
        open = false;
        session.close();
      };
      call.on('data', (pb: PbHost) => {
        if (!open) return;
        try {
          session.report(hostReport(pb, who));
        } catch (e) {
          if (!(e instanceof HostReportError)) throw e;
          log.warn({ peer: call.getPeer(), err: e.message }, 'placement: refused a host report');
          open = false;
          fail(grpc.status.INVALID_ARGUMENT, e.message);
          session.close();
          return;
        }
        if (pb.ackOperation) session.ack(pb.ackOperation, pb.ackVersion ?? '');
      });
      call.on('end', () => {
        gone();
        call.end();
      });
      call.on('error', gone);
      call.on('cancelled', gone);
      call.on('close', gone);
    },
  };
}

/** Serves the service on host:port (0 = a free port), through rt's one gRPC server setup. */
export async function startPlacementServer(service: PlacementService, opts: PlacementServerOptions): Promise<PlacementServer> {
  const { host, port, tls, log } = opts;
  const mtls = opts.requireClientCertificate === true;
  const started = await startGrpcServer({
    host, port, tls, log,
    clientCertificate: mtls ? 'require' : 'none',
    // a host report is a few names and types; 1 MiB is far above any real one
    maxReceiveBytes: 1024 * 1024,
    services: (server) => server.addService(placementService().service, placementImplementation(service, opts, mtls)),
    // host streams never end by themselves: cut them (their hosts lock and reconnect elsewhere)
    shutdownGraceMs: 0,
  });
  return { port: started.port, address: started.address, close: started.close };
}
