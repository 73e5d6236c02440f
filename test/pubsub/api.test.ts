/**
 * The pub/sub API on a real sidecar with pubsub.in-memory and a real HTTP app: publish and the
 * CloudEvent envelope, errors, DECLARATIVE (v2alpha1 rules, v1alpha1 route) and PROGRAMMATIC
 * subscriptions, SUCCESS/RETRY/DROP, retries then the dead-letter topic (where dropped, expired
 * and unrouted messages go too), metadata, bulk publish, the app's concurrency limit, and the
 * gRPC PublishEvent's answers for an unknown pub/sub.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { component, startApp, startPubSubSidecar, watchedInMemory, type PubSubSidecar, type TestApp } from './helpers.ts';

const RESOURCES = [
  component('mem', 'pubsub.in-memory'),
  `apiVersion: rt.io/v2alpha1
kind: Subscription
metadata:
  name: orders
spec:
  pubsubname: mem
  topic: orders
  routes:
    rules:
      - match: event.type == "order.big" && event.data.amount > 100
        path: /orders/big
      - match: event.data.kind == 'gift'
        path: /orders/gift
    default: /orders
  deadLetterTopic: orders-dead
`,
  `apiVersion: rt.io/v1alpha1
kind: Subscription
metadata:
  name: dead
spec:
  pubsubname: mem
  topic: orders-dead
  route: /dead
`,
  `apiVersion: rt.io/v2alpha1
kind: Subscription
metadata:
  name: picky
spec:
  pubsubname: mem
  topic: picky
  routes:
    rules:
      - match: event.data.n == 1
        path: /picky
  deadLetterTopic: picky-dead
`,
  `apiVersion: rt.io/v1alpha1
kind: Subscription
metadata:
  name: not-mine
spec:
  pubsubname: mem
  topic: other
  route: /other
scopes: [someone-else]
`,
].join('---\n');

let app: TestApp;
let sc: PubSubSidecar;
const mem = watchedInMemory();

beforeAll(async () => {
  app = await startApp();
  app.subscribe = [
    { pubsubname: 'mem', topic: 'prog', route: '/prog', metadata: { rawPayload: 'false' } },
    { pubsubname: 'mem', topic: 'prog-rules', routes: { rules: [{ match: 'event.data.n == 2', path: '/two' }], default: '/rest' } },
    // raw: an expired message's dead-letter copy is still expired, an ordinary subscriber would drop it
    { pubsubname: 'mem', topic: 'picky-dead', route: '/picky-dead', metadata: { rawPayload: 'true' } },
  ];
  sc = await startPubSubSidecar(RESOURCES, { appId: 'pubber', appPort: app.port, appMaxConcurrency: 2, catalog: mem.catalog });
  await app.opened(sc.base);
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
});

const publish = (path: string, body: string | Buffer, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(`${sc.base}/v1.0/publish/${path}`, { method: 'POST', body, headers });

function reset(): void {
  app.deliveries.length = 0;
  app.answer = () => ({ status: 200, body: { status: 'SUCCESS' } });
}

describe('publish', () => {
  it('wraps a JSON body in a CloudEvent with the fields users expect, and passes traceparent', async () => {
    reset();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const res = await publish('mem/orders', JSON.stringify({ amount: 5 }), { 'content-type': 'application/json', traceparent: tp });
    expect(res.status).toBe(204);
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/orders');
    expect(d.headers['content-type']).toBe('application/cloudevents+json');
    expect(d.headers.traceparent).toBe(tp);
    expect(d.headers.pubsubname).toBe('mem');
    expect(d.body).toMatchObject({ specversion: '1.0', source: 'pubber', type: 'rt.event.sent', datacontenttype: 'application/json', data: { amount: 5 }, topic: 'orders', pubsubname: 'mem', traceparent: tp });
    expect(typeof d.body.id).toBe('string');
  });

  it('every CloudEvent rt writes has its attributes in sorted order (data first), as the reference runtime writes them', async () => {
    reset();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const trace = { traceparent: tp, tracestate: 'k=v' };
    // a JSON body (written as text directly), with every optional attribute
    await publish('mem/orders?metadata.ttlInSeconds=60', JSON.stringify({ z: 1, a: 2 }), { 'content-type': 'application/json', ...trace });
    // a text body, a binary one, a caller's CloudEvent with an extension, bulk entries
    await publish('mem/orders', 'words', { 'content-type': 'text/plain', ...trace });
    await publish('mem/orders', Buffer.from([0, 1, 2]), { 'content-type': 'application/octet-stream' });
    await publish('mem/orders', JSON.stringify({ type: 'x', specversion: '1.0', zext: 'z', id: 'ce-sorted', source: 's', data: 7 }), { 'content-type': 'application/cloudevents+json' });
    const bulk = await fetch(`${sc.base}/v1.0-alpha1/publish/bulk/mem/orders?metadata.ttlInSeconds=60`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: tp },
      body: JSON.stringify([{ entryId: 'b1', event: { b: 1 }, contentType: 'application/json' }, { entryId: 'b2', event: 'text', contentType: 'text/plain' }]),
    });
    expect(bulk.status).toBe(204);
    const ds = await app.waitFor((x) => x.length === 6);
    for (const d of ds) {
      expect(Object.keys(d.body)).toEqual(Object.keys(d.body).sort());
      expect(Object.keys(d.body)[0]).toMatch(/^data(_base64)?$/);
    }
    // data keeps its own member order
    expect(Object.keys(ds[0].body.data as object)).toEqual(['z', 'a']);
    expect(Object.keys(ds[0].body)).toEqual(['data', 'datacontenttype', 'expiration', 'id', 'pubsubname', 'source', 'specversion', 'time', 'topic', 'traceid', 'traceparent', 'tracestate', 'type']);
  });

  it('passes a CloudEvent body as it is, adding what routing needs; its topic and pub/sub become the publish call\'s', async () => {
    reset();
    const ce = { specversion: '1.0', id: 'my-id', source: 'elsewhere', type: 'order.big', data: { amount: 500 }, myext: 'x' };
    expect((await publish('mem/orders', JSON.stringify(ce), { 'content-type': 'application/cloudevents+json' })).status).toBe(204);
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/orders/big');
    expect(d.body).toMatchObject({ ...ce, topic: 'orders', pubsubname: 'mem' });
    // an event passed on from another topic (and pub/sub) names where it was published now
    reset();
    const fwd = { ...ce, id: 'fwd-id', topic: 'inbound', pubsubname: 'elsewhere' };
    expect((await publish('mem/orders', JSON.stringify(fwd), { 'content-type': 'application/cloudevents+json' })).status).toBe(204);
    const [f] = await app.waitFor((ds) => ds.length === 1);
    expect(f.body).toMatchObject({ id: 'fwd-id', source: 'elsewhere', myext: 'x', topic: 'orders', pubsubname: 'mem' });
  });

  it('sends the raw body with metadata.rawPayload=true; the app gets it in data_base64', async () => {
    reset();
    expect((await publish('mem/orders?metadata.rawPayload=true', Buffer.from([1, 2, 3, 255]), { 'content-type': 'application/octet-stream' })).status).toBe(204);
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(Buffer.from(d.body.data_base64 as string, 'base64')).toEqual(Buffer.from([1, 2, 3, 255]));
  });

  it('text bodies become string data; ttlInSeconds sets the expiration', async () => {
    reset();
    const before = Date.now();
    expect((await publish('mem/orders?metadata.ttlInSeconds=30', 'hello', { 'content-type': 'text/plain' })).status).toBe(204);
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.body.data).toBe('hello');
    const exp = Date.parse(d.body.expiration as string);
    expect(exp).toBeGreaterThanOrEqual(before + 29_000);
    expect(exp).toBeLessThanOrEqual(Date.now() + 30_000);
  });

  it('an unknown pub/sub is 404 ERR_PUBSUB_NOT_FOUND; a malformed body or metadata is 400', async () => {
    const r1 = await publish('nope/orders', '{}');
    expect(r1.status).toBe(404);
    expect(((await r1.json()) as { errorCode: string }).errorCode).toBe('ERR_PUBSUB_NOT_FOUND');
    const r2 = await publish('mem/orders', '{"a":');
    expect(r2.status).toBe(400);
    expect(((await r2.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    const r3 = await publish('mem/orders', '[1]', { 'content-type': 'application/cloudevents+json' });
    expect(r3.status).toBe(400);
    const r4 = await publish('mem/orders?metadata.ttlInSeconds=soon', '{}');
    expect(r4.status).toBe(400);
  });

  it('gRPC: an unknown pub/sub is INVALID_ARGUMENT ERR_PUBSUB_NOT_FOUND (as the reference answers), an empty name ERR_PUBSUB_EMPTY', async () => {
    const Client = runtimeClient();
    const c = new Client(`127.0.0.1:${sc.sidecar.grpcPort}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (req: unknown, cb: (e: grpc.ServiceError | null) => void) => void>;
    try {
      const fail = (method: string, req: unknown) => new Promise<grpc.ServiceError | null>((r) => c[method](req, (e) => r(e)));
      for (const method of ['PublishEvent', 'BulkPublishEvent', 'BulkPublishEventAlpha1']) {
        const e = await fail(method, { pubsub_name: 'nope', topic: 'orders', data: Buffer.from('{}'), data_content_type: 'application/json', entries: [] });
        expect({ method, code: e?.code }).toEqual({ method, code: grpc.status.INVALID_ARGUMENT });
        expect(e?.metadata.get('rt-error-code')).toEqual(['ERR_PUBSUB_NOT_FOUND']);
        expect(e?.details).toMatch(/nope\W{0,4} is not loaded/);
      }
      const empty = await fail('PublishEvent', { pubsub_name: '', topic: 'orders', data: Buffer.from('{}') });
      expect(empty?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(empty?.metadata.get('rt-error-code')).toEqual(['ERR_PUBSUB_EMPTY']);
      const noTopic = await fail('PublishEvent', { pubsub_name: 'mem', topic: '', data: Buffer.from('{}') });
      expect(noTopic?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(noTopic?.metadata.get('rt-error-code')).toEqual(['ERR_TOPIC_NAME_EMPTY']);
    } finally {
      c.close();
    }
  });

  it('bulk publish delivers every entry; bad entries are 400', async () => {
    reset();
    const entries = [
      { entryId: '1', event: { amount: 1 }, contentType: 'application/json' },
      { entryId: '2', event: 'plain', contentType: 'text/plain' },
      { entryId: '3', event: { specversion: '1.0', id: 'ce-3', source: 's', type: 't', data: 3, topic: 'inbound' }, contentType: 'application/cloudevents+json' },
    ];
    const res = await fetch(`${sc.base}/v1.0-alpha1/publish/bulk/mem/orders`, { method: 'POST', body: JSON.stringify(entries), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(204);
    const ds = await app.waitFor((x) => x.length === 3);
    expect(ds.map((d) => JSON.stringify(d.body.data)).sort()).toEqual(['"plain"', '3', '{"amount":1}']);
    expect(ds.map((d) => `${d.body.pubsubname}/${d.body.topic}`)).toEqual(['mem/orders', 'mem/orders', 'mem/orders']);
    const bad = await fetch(`${sc.base}/v1.0-alpha1/publish/bulk/mem/orders`, { method: 'POST', body: JSON.stringify([{ entryId: '1', event: 1 }, { entryId: '1', event: 2 }]) });
    expect(bad.status).toBe(400);
    const notFound = await fetch(`${sc.base}/v1.0-alpha1/publish/bulk/nope/orders`, { method: 'POST', body: '[]' });
    expect(notFound.status).toBe(404);
  });
});

describe('subscriptions and delivery', () => {
  it('routes by the CEL rules in order, the default last', async () => {
    reset();
    await publish('mem/orders', JSON.stringify({ specversion: '1.0', id: 'a', source: 's', type: 'order.big', data: { amount: 50, kind: 'gift' } }), { 'content-type': 'application/cloudevents+json' });
    await publish('mem/orders', JSON.stringify({ specversion: '1.0', id: 'b', source: 's', type: 'order.big', data: { amount: 150, kind: 'gift' } }), { 'content-type': 'application/cloudevents+json' });
    await publish('mem/orders', JSON.stringify({ kind: 'none' }));
    const ds = await app.waitFor((x) => x.length === 3);
    const byId = Object.fromEntries(ds.map((d) => [d.body.id, d.path]));
    expect(byId.a).toBe('/orders/gift');
    expect(byId.b).toBe('/orders/big');
    expect(ds.filter((d) => d.path === '/orders')).toHaveLength(1);
  });

  it('programmatic subscriptions from /dapr/subscribe are delivered, rules included', async () => {
    reset();
    await publish('mem/prog', JSON.stringify({ n: 1 }));
    await publish('mem/prog-rules', JSON.stringify({ n: 2 }));
    await publish('mem/prog-rules', JSON.stringify({ n: 3 }));
    const ds = await app.waitFor((x) => x.length === 3);
    expect(ds.map((d) => d.path).sort()).toEqual(['/prog', '/rest', '/two']);
  });

  it('RETRY is retried with backoff until SUCCESS', async () => {
    reset();
    let n = 0;
    app.answer = () => (++n < 3 ? { status: 200, body: { status: 'RETRY' } } : { status: 200, body: { status: 'SUCCESS' } });
    await publish('mem/orders', JSON.stringify({ retry: true }));
    const ds = await app.waitFor((x) => x.length === 3);
    expect(new Set(ds.map((d) => d.body.id)).size).toBe(1);
    expect(ds[1].at - ds[0].at).toBeGreaterThanOrEqual(200);
    expect(ds[2].at - ds[1].at).toBeGreaterThanOrEqual(450); // the delay doubles: 250 ms, then 500 ms
    await mem.settled(); // acknowledged: nothing is delivered again
    expect(app.deliveries).toHaveLength(3);
  });

  it('an HTTP error status retries; when the attempts are spent the message goes to the dead-letter topic', async () => {
    reset();
    app.answer = (d) => (d.path === '/dead' ? { status: 200 } : { status: 500, body: { error: 'boom' } });
    await publish('mem/orders', JSON.stringify({ doomed: true }));
    const ds = await app.waitFor((x) => x.some((d) => d.path === '/dead'));
    const tries = ds.filter((d) => d.path === '/orders');
    expect(tries).toHaveLength(4); // the first attempt and 3 retries
    const dead = ds.find((d) => d.path === '/dead')!;
    expect(dead.body.id).toBe(tries[0].body.id);
    expect(dead.body.data).toEqual({ doomed: true });
    // the message as it was received: its CloudEvent still names the topic it failed on (as the
    // reference runtime's dead-letter copy does); HTTP apps tell topics apart by path
    expect(dead.body.topic).toBe('orders');
  });

  it('DROP and 404 are not retried; with a dead-letter topic they go there, as received', async () => {
    reset();
    app.answer = (d) => {
      if (d.path === '/dead') return { status: 200 };
      return (d.body.data as { how: string }).how === 'drop' ? { status: 200, body: { status: 'DROP' } } : { status: 404 };
    };
    await publish('mem/orders', JSON.stringify({ how: 'drop' }));
    await publish('mem/orders', JSON.stringify({ how: '404' }));
    const ds = await app.waitFor((x) => x.filter((d) => d.path === '/dead').length === 2);
    await mem.settled(); // every message (and copy) acknowledged: no retry can follow
    const tries = app.deliveries.filter((d) => d.path === '/orders');
    expect(tries).toHaveLength(2);
    const dead = ds.filter((d) => d.path === '/dead');
    expect(dead.map((d) => d.body.id).sort()).toEqual(tries.map((d) => d.body.id).sort());
    expect(dead.map((d) => (d.body.data as { how: string }).how).sort()).toEqual(['404', 'drop']);
    expect(dead.every((d) => d.body.topic === 'orders')).toBe(true);
    expect(app.deliveries).toHaveLength(4);
  });

  it('DROP without a dead-letter topic is acknowledged, and nothing else happens', async () => {
    reset();
    app.answer = () => ({ status: 200, body: { status: 'DROP' } });
    await publish('mem/prog', JSON.stringify({ how: 'drop' }));
    await app.waitFor((x) => x.length === 1);
    await mem.settled();
    expect(app.deliveries.map((d) => d.path)).toEqual(['/prog']);
  });

  it('a message no rule routes, or one expired before delivery, goes to the dead-letter topic', async () => {
    reset();
    await publish('mem/picky', JSON.stringify({ n: 1 }));
    await publish('mem/picky', JSON.stringify({ n: 2 }));
    const gone = { specversion: '1.0', id: 'expired-1', source: 's', type: 't', data: { n: 1 }, expiration: new Date(Date.now() - 60_000).toISOString() };
    await publish('mem/picky', JSON.stringify(gone), { 'content-type': 'application/cloudevents+json' });
    const ds = await app.waitFor((x) => x.length === 3);
    await mem.settled();
    expect(app.deliveries).toHaveLength(3);
    expect(ds.filter((d) => d.path === '/picky').map((d) => d.body.data)).toEqual([{ n: 1 }]);
    // the raw subscriber of the dead-letter topic gets each copy wrapped: its bytes are the message as received
    const dead = ds.filter((d) => d.path === '/picky-dead').map((d) => JSON.parse(Buffer.from(String(d.body.data_base64), 'base64').toString()) as Record<string, unknown>);
    expect(dead.map((d) => d.topic)).toEqual(['picky', 'picky']);
    expect(dead.find((d) => d.id === 'expired-1')?.data).toEqual({ n: 1 });
    expect(dead.find((d) => d.id !== 'expired-1')?.data).toEqual({ n: 2 });
  });

  it('holds --app-max-concurrency', async () => {
    reset();
    let now = 0;
    let max = 0;
    // the app answers only when the test lets it: one at a time, once two are waiting (the last alone)
    const held: (() => void)[] = [];
    app.answer = async () => {
      max = Math.max(max, ++now);
      await new Promise<void>((r) => held.push(r));
      now--;
      return { status: 200 };
    };
    for (let i = 0; i < 10; i++) await publish('mem/orders', JSON.stringify({ i }));
    for (let answered = 0; answered < 10; answered++) {
      await vi.waitFor(() => expect(held.length).toBe(Math.min(2, 10 - answered)), { timeout: 5000, interval: 10 });
      held.shift()!();
    }
    await app.waitFor((x) => x.length === 10);
    await mem.settled();
    expect(max).toBe(2);
  });

  it('metadata lists declarative and programmatic subscriptions with their fields; scoped-out ones are absent', async () => {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: Record<string, unknown>[] };
    const orders = md.subscriptions.find((s) => s.topic === 'orders');
    expect(orders).toEqual({
      pubsubname: 'mem',
      topic: 'orders',
      metadata: {},
      rules: [
        { match: 'event.type == "order.big" && event.data.amount > 100', path: '/orders/big' },
        { match: "event.data.kind == 'gift'", path: '/orders/gift' },
        { match: '', path: '/orders' },
      ],
      deadLetterTopic: 'orders-dead',
      type: 'DECLARATIVE',
    });
    expect(md.subscriptions.find((s) => s.topic === 'prog')).toMatchObject({ type: 'PROGRAMMATIC', rules: [{ match: '', path: '/prog' }], metadata: { rawPayload: 'false' } });
    expect(md.subscriptions.find((s) => s.topic === 'other')).toBeUndefined();
  });
});
