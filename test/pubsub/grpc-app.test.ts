/**
 * Delivery to an app that speaks gRPC (--app-protocol grpc), with the real @dapr/dapr DaprServer
 * (CommunicationProtocolEnum.GRPC) as the app: its ListTopicSubscriptions is the programmatic
 * source, events arrive through OnTopicEvent with the route in `path`, SUCCESS / RETRY / DROP
 * decide as over HTTP (a DROP goes to the dead-letter topic, bulk entries included), a
 * Subscription resource's rules pick the route, bulk subscriptions go through
 * OnBulkTopicEventAlpha1, and rawPayload hands the app the bytes as published. The SDK
 * dispatches on TopicEventRequest.topic: it must be the delivering subscription's, so that a
 * dead-lettered message reaches the dead-letter topic's handler and a CloudEvent that names
 * another topic reaches the handler of the topic it was published to.
 */
import { DaprPubSubStatusEnum, type DaprServer } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { daprGrpcServer } from '../services/dapr-server.ts';
import { freePort } from '../services/net.ts';
import { component, startPubSubSidecar, watchedInMemory, type PubSubSidecar } from './helpers.ts';


const RESOURCES = [
  component('mem', 'pubsub.in-memory'),
  `apiVersion: rt.io/v2alpha1
kind: Subscription
metadata:
  name: decl
spec:
  pubsubname: mem
  topic: decl
  routes:
    rules:
      - match: event.data.kind == "vip"
        path: vip
    default: decl
`,
].join('---\n');

let sc: PubSubSidecar;
const mem = watchedInMemory();
let server: DaprServer;
const got: Record<string, unknown[]> = {};
let answer: (topic: string, n: number) => DaprPubSubStatusEnum = () => DaprPubSubStatusEnum.SUCCESS;
let bulkCalls = 0;
/** per topic, [data_content_type, data] of each event as the app received it */
const wire: Record<string, [string, Buffer][]> = {};
interface OneRequest { topic: string; dataContentType: string; data: Uint8Array }
interface BulkRequest { topic: string; entries: { event: { case: string; value: { dataContentType: string; data: Uint8Array } } }[] }

function record(key: string, fixed?: DaprPubSubStatusEnum) {
  got[key] = [];
  return async (data: unknown) => {
    got[key].push(data);
    return fixed ?? answer(key, got[key].length);
  };
}

beforeAll(async () => {
  const appPort = await freePort();
  sc = await startPubSubSidecar(RESOURCES, { appId: 'grpc-sub', appPort, appProtocol: 'grpc', catalog: mem.catalog });
  server = daprGrpcServer(appPort, sc.sidecar.grpcPort);
  await server.pubsub.subscribe('mem', 'orders', record('orders'));
  // the app's own rule for this topic differs from the Subscription resource's, which wins
  await server.pubsub.subscribeWithOptions('mem', 'decl', { route: { rules: [{ match: 'event.data.kind == "never"', path: 'vip' }], default: 'decl' } });
  server.pubsub.subscribeToRoute('mem', 'decl', 'vip', record('vip'));
  server.pubsub.subscribeToRoute('mem', 'decl', 'decl', record('decl'));
  await server.pubsub.subscribeBulk('mem', 'bulk', record('bulk'), { maxMessagesCount: 3, maxAwaitDurationMs: 2000 });
  await server.pubsub.subscribe('mem', 'raw', record('raw'), 'raw', { rawPayload: true }); // the SDK sends each value JSON-encoded
  // a handler that never takes its messages, and the handler of its dead-letter topic
  await server.pubsub.subscribeWithOptions('mem', 'dlsrc', { deadLetterTopic: 'dltopic', callback: record('dlsrc', DaprPubSubStatusEnum.RETRY) });
  await server.pubsub.subscribe('mem', 'dltopic', record('dltopic'));
  // handlers that drop everything, one by one and in batches, with their dead-letter topics
  await server.pubsub.subscribeWithOptions('mem', 'dropsrc', { deadLetterTopic: 'droptopic', callback: record('dropsrc', DaprPubSubStatusEnum.DROP) });
  await server.pubsub.subscribe('mem', 'droptopic', record('droptopic'));
  await server.pubsub.subscribeWithOptions('mem', 'bulkdrop', { deadLetterTopic: 'bulkdead', bulkSubscribe: { enabled: true, maxMessagesCount: 2, maxAwaitDurationMs: 500 }, callback: record('bulkdrop', DaprPubSubStatusEnum.DROP) });
  await server.pubsub.subscribe('mem', 'bulkdead', record('bulkdead'));
  // the data of each content type, one by one and in batches
  await server.pubsub.subscribe('mem', 'kinds', record('kinds'));
  await server.pubsub.subscribeBulk('mem', 'bulkkinds', record('bulkkinds'), { maxMessagesCount: 20, maxAwaitDurationMs: 300 });
  // count the batches the SDK's own OnBulkTopicEventAlpha1 receives, and keep the bytes of data
  // as they came on the wire (before the SDK decodes them)
  type Impl = Record<'onTopicEvent' | 'onBulkTopicEventAlpha1', (req: never, ...a: unknown[]) => Promise<unknown>>;
  const impl = (server.daprServer as unknown as { getServerImpl(): Impl }).getServerImpl();
  const bulk = impl.onBulkTopicEventAlpha1.bind(impl);
  impl.onBulkTopicEventAlpha1 = (req: BulkRequest, ...a: unknown[]) => {
    bulkCalls++;
    for (const e of req.entries) if (e.event.case === 'cloudEvent') (wire[req.topic] ??= []).push([e.event.value.dataContentType, Buffer.from(e.event.value.data)]);
    return bulk(req as never, ...a);
  };
  const one = impl.onTopicEvent.bind(impl);
  impl.onTopicEvent = (req: OneRequest, ...a: unknown[]) => {
    (wire[req.topic] ??= []).push([req.dataContentType, Buffer.from(req.data)]);
    return one(req as never, ...a);
  };
  await server.start();
  // the sidecar asks the app for its subscriptions once its port answers; the metadata lists
  // a subscription once it is open on its component
  const end = Date.now() + 15_000;
  for (;;) {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; type: string }[] };
    const topics = Object.keys(got).filter((k) => k !== 'vip'); // vip: a route of decl
    if (topics.every((topic) => md.subscriptions.some((s) => s.topic === topic))) break;
    if (Date.now() > end) throw new Error(`the sidecar never listed the gRPC app subscriptions: ${JSON.stringify(md.subscriptions)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 30_000);

afterAll(async () => {
  await server?.stop().catch(() => undefined);
  await sc?.close();
});

async function publish(topic: string, body: string, query = '', contentType = 'application/json'): Promise<void> {
  const res = await fetch(`${sc.base}/v1.0/publish/mem/${topic}${query}`, { method: 'POST', body, headers: { 'content-type': contentType } });
  expect(res.status).toBe(204);
}

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`condition not met in time; got ${JSON.stringify(got)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a gRPC app (DaprServer over gRPC) as the subscriber', () => {
  it('lists its ListTopicSubscriptions as PROGRAMMATIC subscriptions in the metadata', async () => {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; type: string; metadata?: Record<string, string> }[] };
    const byTopic = Object.fromEntries(md.subscriptions.map((s) => [s.topic, s]));
    expect(byTopic.orders).toMatchObject({ type: 'PROGRAMMATIC' });
    expect(byTopic.bulk).toMatchObject({ type: 'PROGRAMMATIC' });
    expect(byTopic.raw).toMatchObject({ type: 'PROGRAMMATIC', metadata: { rawPayload: 'true' } });
  });

  it('gets a published event through OnTopicEvent', async () => {
    got.orders.length = 0;
    await publish('orders', JSON.stringify({ id: 7, item: 'tea' }));
    await until(() => got.orders.length === 1);
    expect(got.orders[0]).toEqual({ id: 7, item: 'tea' });
  });

  it('RETRY is delivered again, DROP is not', async () => {
    got.orders.length = 0;
    answer = (_t, n) => (n === 1 ? DaprPubSubStatusEnum.RETRY : DaprPubSubStatusEnum.SUCCESS);
    await publish('orders', JSON.stringify({ try: 'again' }));
    await until(() => got.orders.length === 2);
    expect(got.orders).toEqual([{ try: 'again' }, { try: 'again' }]);

    got.orders.length = 0;
    answer = () => DaprPubSubStatusEnum.DROP;
    await publish('orders', JSON.stringify({ drop: 'me' }));
    await until(() => got.orders.length === 1);
    await mem.settled(); // acknowledged: no retry can follow
    expect(got.orders).toHaveLength(1);
    answer = () => DaprPubSubStatusEnum.SUCCESS;
  });

  it("a Subscription resource's rules choose the route the app sees in path", async () => {
    await publish('decl', JSON.stringify({ kind: 'vip', n: 1 }));
    await publish('decl', JSON.stringify({ kind: 'plain', n: 2 }));
    await until(() => got.vip.length === 1 && got.decl.length === 1);
    expect(got.vip).toEqual([{ kind: 'vip', n: 1 }]);
    expect(got.decl).toEqual([{ kind: 'plain', n: 2 }]);
  });

  it('a bulk subscription receives its messages in one OnBulkTopicEventAlpha1 batch', async () => {
    const before = bulkCalls;
    for (const n of [1, 2, 3]) await publish('bulk', JSON.stringify({ n }));
    await until(() => got.bulk.length === 3);
    expect(got.bulk).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }, { n: 3 }]));
    expect(bulkCalls - before).toBe(1);
  });

  it('rawPayload: the app gets the bytes as published, not a CloudEvent', async () => {
    await publish('raw', 'plain words, no envelope', '?metadata.rawPayload=true', 'text/plain');
    await publish('raw', JSON.stringify({ wrapped: true }));
    await until(() => got.raw.length === 2);
    expect(got.raw[0]).toBe('plain words, no envelope');
    // published as a CloudEvent: the raw subscriber sees the envelope itself
    expect(got.raw[1]).toMatchObject({ specversion: '1.0', topic: 'raw', data: { wrapped: true } });
  });

  it("a dead-lettered message reaches the dead-letter topic's handler, once, and is not delivered again", async () => {
    await publish('dlsrc', JSON.stringify({ doomed: 1 }));
    await until(() => got.dltopic.length === 1);
    expect(got.dlsrc).toEqual([{ doomed: 1 }, { doomed: 1 }, { doomed: 1 }, { doomed: 1 }]); // the first attempt and 3 retries
    expect(got.dltopic).toEqual([{ doomed: 1 }]);
    // the copy's CloudEvent still says topic "dlsrc": delivered under that topic, an SDK looks it
    // up among dlsrc's routes (this one acknowledges it unhandled; the Python SDK's handler
    // answered RETRY and the component brought it back every second)
    await mem.settled(); // both acknowledged: the component brings neither back
    expect(got.dlsrc).toHaveLength(4);
    expect(got.dltopic).toHaveLength(1);
  });

  it("a DROP answer goes to the dead-letter topic's handler, once, without retries (bulk entries too)", async () => {
    await publish('dropsrc', JSON.stringify({ dropped: 1 }));
    await until(() => got.droptopic.length === 1);
    expect(got.droptopic).toEqual([{ dropped: 1 }]);
    for (const n of [1, 2]) await publish('bulkdrop', JSON.stringify({ n }));
    await until(() => got.bulkdead.length === 2);
    expect(got.bulkdead).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
    await mem.settled(); // all acknowledged: no retry can follow
    expect(got.dropsrc).toEqual([{ dropped: 1 }]);
    expect(got.bulkdrop).toHaveLength(2);
    expect(got.droptopic).toHaveLength(1);
    expect(got.bulkdead).toHaveLength(2);
  });

  it("data is the JSON of a JSON type's value (a string keeps its quotes), a text's own bytes, other types' bytes; one by one and in bulk", async () => {
    const cases: [string | Uint8Array, string, string | Buffer, unknown][] = [
      // [published body, content type, data on the wire, what the SDK's handler gets]
      ['"hello"', 'application/json', '"hello"', 'hello'], // the Java SDK's String
      ['"42"', 'application/json', '"42"', '42'], // a string that looks like a number stays a string
      ['{"id":7}', 'application/json', '{"id":7}', { id: 7 }],
      ['42', 'application/json', '42', 42],
      ['"vendor"', 'application/vnd.orders+json', '"vendor"', 'vendor'],
      ['plain words', 'text/plain', 'plain words', 'plain words'],
      [new Uint8Array([0x62, 0x69, 0x6e]), 'application/octet-stream', 'bin', 'bin'],
    ];
    for (const topic of ['kinds', 'bulkkinds']) {
      for (const [body, contentType] of cases) {
        const res = await fetch(`${sc.base}/v1.0/publish/mem/${topic}`, { method: 'POST', body, headers: { 'content-type': contentType } });
        expect(res.status).toBe(204);
      }
      await until(() => got[topic].length === cases.length);
      expect(wire[topic]).toEqual(cases.map(([, contentType, data]) => [contentType, Buffer.from(data)]));
      expect(got[topic]).toEqual(cases.map(([, , , value]) => value));
    }
  });

  it('a CloudEvent that names another topic and pub/sub reaches the handler of the topic it was published to', async () => {
    got.orders.length = 0;
    const ce = { specversion: '1.0', id: 'fwd-1', source: 'upstream', type: 'order.created', datacontenttype: 'application/json', data: { order: 7 }, topic: 'inbound', pubsubname: 'elsewhere' };
    await publish('orders', JSON.stringify(ce), '', 'application/cloudevents+json');
    await until(() => got.orders.length === 1);
    expect(got.orders).toEqual([{ order: 7 }]);
  });
});
