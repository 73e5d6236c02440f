/**
 * App health checks for an app that speaks gRPC (--app-protocol grpc --enable-app-health-check):
 * the sidecar probes AppCallbackHealthCheck/HealthCheck instead of an HTTP path the gRPC server
 * cannot answer. With the real @dapr/dapr DaprServer over gRPC as the app, the probe passes and a
 * subscription opens and delivers; a gRPC server without the health service, or no server, fails
 * the probe.
 */
import { CommunicationProtocolEnum, DaprServer, LogLevel } from '@dapr/dapr';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcHealthProbe } from '../../sidecar/src/app/grpc-health.ts';
import { freePort } from '../services/net.ts';
import { component, startPubSubSidecar, type PubSubSidecar } from '../pubsub/helpers.ts';

const noop = () => undefined;
const logger = { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } };

let sc: PubSubSidecar | undefined;
let server: DaprServer | undefined;
let bare: grpc.Server | undefined;
const got: unknown[] = [];
let appPort = 0;

beforeAll(async () => {
  appPort = await freePort();
  sc = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), {
    appId: 'grpc-health',
    appPort,
    appProtocol: 'grpc',
    appHealthCheck: true,
    appHealthProbeIntervalMs: 200,
    appHealthProbeTimeoutMs: 500,
  });
  server = new DaprServer({
    serverHost: '127.0.0.1',
    serverPort: String(appPort),
    communicationProtocol: CommunicationProtocolEnum.GRPC,
    clientOptions: { daprHost: '127.0.0.1', daprPort: String(sc.sidecar.grpcPort), communicationProtocol: CommunicationProtocolEnum.GRPC, logger },
    logger,
  });
  await server.pubsub.subscribe('mem', 'orders', async (data: unknown) => void got.push(data));
  await server.start();
}, 30_000);

afterAll(async () => {
  await sc?.close();
  await server?.stop().catch(() => undefined);
  if (bare) await new Promise<void>((r) => bare!.tryShutdown(() => r()));
});

describe('app health checks for a gRPC app', () => {
  it('the DaprServer answers the HealthCheck probe, and the sidecar then opens its subscriptions', async () => {
    const probe = new GrpcHealthProbe(`127.0.0.1:${appPort}`);
    try {
      expect(await probe.probe(1000)).toBe(true);
    } finally {
      probe.close();
    }
    // the programmatic subscriptions are asked for only once the app is healthy
    let md: { subscriptions: { topic: string; type: string }[] } = { subscriptions: [] };
    const end = Date.now() + 10_000;
    while (!md.subscriptions.length && Date.now() < end) {
      md = (await (await fetch(`${sc!.base}/v1.0/metadata`)).json()) as typeof md;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(md.subscriptions).toEqual(expect.arrayContaining([expect.objectContaining({ topic: 'orders', type: 'PROGRAMMATIC' })]));
  });

  it('a healthy gRPC app gets its events', async () => {
    const res = await fetch(`${sc!.base}/v1.0/publish/mem/orders`, { method: 'POST', body: JSON.stringify({ n: 1 }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(204);
    const end = Date.now() + 10_000;
    while (got.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual([{ n: 1 }]);
  });

  it('a gRPC server without the health service fails the probe (UNIMPLEMENTED)', async () => {
    bare = new grpc.Server();
    const port = await new Promise<number>((res, rej) => bare!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    const probe = new GrpcHealthProbe(`127.0.0.1:${port}`);
    try {
      expect(await probe.probe(1000)).toBe(false);
    } finally {
      probe.close();
    }
  });

  it('no server at all fails the probe within its timeout', async () => {
    const probe = new GrpcHealthProbe(`127.0.0.1:${await freePort()}`);
    const start = Date.now();
    try {
      expect(await probe.probe(300)).toBe(false);
      expect(Date.now() - start).toBeLessThan(2000);
    } finally {
      probe.close();
    }
  });
});
