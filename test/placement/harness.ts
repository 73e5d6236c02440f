/** A placement service on loopback and hosts to connect to it, for the placement suites. */
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { placementService, type PbHost, type PbOrder } from '../../placement/src/index.ts';
import { startPlacementServer, type PlacementServer } from '../../placement/src/grpc/server.ts';
import { PlacementService, type PlacementServiceOptions } from '../../placement/src/service.ts';
import { createRemotePlacement, type RemotePlacement } from '../../sidecar/src/actors/placement/remote.ts';

export const quiet = pino({ level: 'silent' });

export interface RunningPlacement {
  service: PlacementService;
  server: PlacementServer;
  address: string;
  close(): Promise<void>;
}

export async function startPlacement(opts: Partial<PlacementServiceOptions> = {}, port = 0): Promise<RunningPlacement> {
  const service = new PlacementService({ log: quiet, ...opts });
  service.activate();
  const server = await startPlacementServer(service, { host: '127.0.0.1', port, log: quiet });
  return {
    service,
    server,
    address: server.address,
    close: async () => {
      service.deactivate('closing');
      await server.close();
    },
  };
}

let nextPort = 41000;
/** A placement client for a pretend sidecar at 127.0.0.1:<unique port>. */
export function host(addresses: string[], appId: string, types: string[], heartbeatMs = 200): RemotePlacement {
  return createRemotePlacement({ addresses, appId, namespace: 'default', hostAddress: `127.0.0.1:${nextPort++}`, hostedTypes: types, log: quiet, heartbeatMs });
}

/** A host speaking the wire directly: it reports when told and acknowledges only while `acking`. */
export class RawHost {
  readonly orders: PbOrder[] = [];
  acking = true;
  /** A slow host: each order is applied (and acknowledged) this long after it arrives. */
  delayMs = 0;
  /** Its routing state as a sidecar's would be: locked until an unlock of the table it has. */
  locked = true;
  version = '';
  ended?: grpc.ServiceError;
  private readonly client: grpc.Client;
  private readonly stream: grpc.ClientDuplexStream<PbHost, PbOrder>;

  readonly report: PbHost;

  constructor(address: string, report: PbHost) {
    this.report = report;
    const Ctor = placementService();
    this.client = new Ctor(address, grpc.credentials.createInsecure());
    this.stream = (this.client as grpc.Client & { ReportDaprStatus(): grpc.ClientDuplexStream<PbHost, PbOrder> }).ReportDaprStatus();
    this.stream.on('data', (o: PbOrder) => {
      this.orders.push(o);
      const apply = () => {
        if (o.operation === 'lock') this.locked = true;
        if (o.operation === 'update') this.version = o.tables?.version ?? '';
        if (o.operation === 'unlock' && this.version === o.tables?.version) this.locked = false;
        if (this.acking) this.send({ ackOperation: o.operation, ackVersion: o.tables?.version });
      };
      if (this.delayMs > 0) setTimeout(apply, this.delayMs);
      else apply();
    });
    this.stream.on('error', (e: grpc.ServiceError) => (this.ended = e));
    this.stream.on('end', () => (this.ended ??= { code: grpc.status.OK } as grpc.ServiceError));
  }

  send(extra: Partial<PbHost> = {}): void {
    this.stream.write({ ...this.report, ...extra });
  }

  close(): void {
    this.stream.cancel();
    this.client.close();
  }
}
