/**
 * The @dapr/dapr SDK on rt's pub/sub: DaprClient publishes and bulk-publishes over HTTP and
 * gRPC (a CloudEvent it publishes takes the topic and pub/sub of the call), and a DaprServer app
 * subscribes programmatically (its /dapr/subscribe) and receives.
 */
import { CommunicationProtocolEnum, DaprClient, DaprServer, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';
import { component, startApp, startPubSubSidecar, type PubSubSidecar, type TestApp } from '../../test/pubsub/helpers.ts';

const noop = () => undefined;
const logger = { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } };
const SUBS = ['http', 'grpc'].map((p) => `apiVersion: rt.io/v1alpha1\nkind: Subscription\nmetadata:\n  name: sdk-${p}\nspec:\n  pubsubname: mem\n  topic: sdk-${p}\n  route: /sdk\n`);

let app: TestApp;
let sc: PubSubSidecar;
const clients: DaprClient[] = [];

beforeAll(async () => {
  app = await startApp();
  sc = await startPubSubSidecar([component('mem', 'pubsub.in-memory'), ...SUBS].join('---\n'), { appId: 'sdk-pub', appPort: app.port });
  await app.opened(sc.base);
});

afterAll(async () => {
  for (const c of clients) await c.stop().catch(() => undefined);
  await sc?.close();
  await app?.close();
});

function client(proto: 'http' | 'grpc'): DaprClient {
  const c = new DaprClient({
    daprHost: '127.0.0.1',
    daprPort: String(proto === 'http' ? sc.sidecar.httpPort : sc.sidecar.grpcPort),
    communicationProtocol: proto === 'http' ? CommunicationProtocolEnum.HTTP : CommunicationProtocolEnum.GRPC,
    logger,
  });
  clients.push(c);
  return c;
}

describe('DaprClient publishes over both protocols', () => {
  for (const proto of ['http', 'grpc'] as const) {
    it(`${proto}: publish and publishBulk reach the app as CloudEvents; an unknown pub/sub is an error`, async () => {
      app.deliveries.length = 0;
      const c = client(proto);
      const res = await c.pubsub.publish('mem', `sdk-${proto}`, { hello: proto });
      expect(res.error).toBeUndefined();
      const [d] = await app.waitFor((ds) => ds.length === 1);
      expect(d.body).toMatchObject({ data: { hello: proto }, topic: `sdk-${proto}`, pubsubname: 'mem', source: 'sdk-pub', specversion: '1.0' });
      const bulk = await c.pubsub.publishBulk('mem', `sdk-${proto}`, [{ n: 1 }, { n: 2 }, 'three']);
      expect(bulk.failedMessages).toEqual([]);
      const ds = await app.waitFor((x) => x.length === 4);
      expect(ds.slice(1).map((x) => JSON.stringify(x.body.data)).sort()).toEqual(['"three"', '{"n":1}', '{"n":2}']);
      // the HTTP client answers {error: Error} (404); the gRPC one throws {error: ConnectError INVALID_ARGUMENT}
      const bad = (await c.pubsub.publish('nope', 'x', { a: 1 }).catch((e: { error: Error }) => e)).error as (Error & { code?: number }) | undefined;
      expect(bad?.message).toMatch(/nope\W{0,4} is not loaded/);
      if (proto === 'grpc') expect(bad?.code).toBe(3); // Connect's Code.InvalidArgument, as the reference answers
    });

    it(`${proto}: a CloudEvent passed on from another topic and pub/sub arrives under the ones it was published to`, async () => {
      app.deliveries.length = 0;
      const c = client(proto);
      const ce = { specversion: '1.0', id: `fwd-${proto}`, source: 'upstream', type: 'order.created', datacontenttype: 'application/json', data: { order: 7 }, topic: 'inbound', pubsubname: 'elsewhere' };
      const res = await c.pubsub.publish('mem', `sdk-${proto}`, ce, { contentType: 'application/cloudevents+json' });
      expect(res.error).toBeUndefined();
      const [d] = await app.waitFor((ds) => ds.length === 1);
      expect(d.body).toMatchObject({ id: `fwd-${proto}`, source: 'upstream', data: { order: 7 }, topic: `sdk-${proto}`, pubsubname: 'mem' });
    });
  }
});

describe('a DaprServer app subscribes programmatically', () => {
  let server: DaprServer;
  let side: PubSubSidecar;
  afterAll(async () => {
    await server?.stop().catch(() => undefined);
    await side?.close();
  });

  it('gets what is published to its topic through its own /dapr/subscribe', async () => {
    const serverPort = await freePort();
    const got: unknown[] = [];
    side = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), { appId: 'sdk-sub', appPort: serverPort });
    server = new DaprServer({ serverHost: '127.0.0.1', serverPort: String(serverPort), clientOptions: { daprHost: '127.0.0.1', daprPort: String(side.sidecar.httpPort), logger }, logger });
    await server.pubsub.subscribe('mem', 'greetings', async (data: unknown) => {
      got.push(data);
    });
    await server.start();
    const c = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(side.sidecar.httpPort), logger });
    clients.push(c);
    // once: the publish waits until the sidecar has subscribed for the app
    expect((await c.pubsub.publish('mem', 'greetings', { hi: 'there' })).error).toBeUndefined();
    const end = Date.now() + 10_000;
    while (got.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual([{ hi: 'there' }]);
    const md = (await (await fetch(`${side.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; type: string }[] };
    expect(md.subscriptions).toContainEqual(expect.objectContaining({ topic: 'greetings', type: 'PROGRAMMATIC' }));
  });
});
