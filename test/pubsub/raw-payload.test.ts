/**
 * Subscription-level rawPayload on a real sidecar (pubsub.in-memory) and a real HTTP app: a
 * Subscription resource with spec.metadata.rawPayload "true" and a programmatic subscription
 * with metadata.rawPayload get, as the reference runtime sends them, a CloudEvent that wraps
 * the message's bytes (data_base64, datacontenttype application/octet-stream, attributes in
 * sorted order), which the routing rules read too; rawPayloadAsBody asks for the bytes
 * themselves as the body; a message published raw reaches an ordinary subscriber wrapped in a
 * CloudEvent (data_base64).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { component, startApp, startPubSubSidecar, type PubSubSidecar, type TestApp } from './helpers.ts';

const RESOURCES = [
  component('mem', 'pubsub.in-memory'),
  `apiVersion: rt.io/v2alpha1
kind: Subscription
metadata:
  name: raw-decl
spec:
  pubsubname: mem
  topic: raw-decl
  metadata:
    rawPayload: "true"
  routes:
    rules:
      - match: event.type == "rt.event.sent" && event.topic == "raw-decl"
        path: /raw/matched
    default: /raw/default
`,
  `apiVersion: rt.io/v1alpha1
kind: Subscription
metadata:
  name: raw-body
spec:
  pubsubname: mem
  topic: raw-body
  route: /raw/body
  metadata:
    rawPayload: "true"
    rawPayloadAsBody: "true"
`,
  `apiVersion: rt.io/v1alpha1
kind: Subscription
metadata:
  name: plain
spec:
  pubsubname: mem
  topic: plain
  route: /plain
`,
].join('---\n');

let app: TestApp;
let sc: PubSubSidecar;

beforeAll(async () => {
  app = await startApp();
  app.subscribe = [{ pubsubname: 'mem', topic: 'raw-prog', route: '/raw/prog', metadata: { rawPayload: 'true' } }];
  sc = await startPubSubSidecar(RESOURCES, { appId: 'raw-app', appPort: app.port });
  await app.opened(sc.base);
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
});

async function publish(topic: string, body: string, query = '', contentType = 'application/json'): Promise<void> {
  const res = await fetch(`${sc.base}/v1.0/publish/mem/${topic}${query}`, { method: 'POST', body, headers: { 'content-type': contentType } });
  expect(res.status).toBe(204);
}

/** The bytes a raw subscriber's CloudEvent wraps. */
const unwrap = (body: Record<string, unknown>) => Buffer.from(String(body.data_base64), 'base64');
const sorted = (o: object) => [...Object.keys(o)].sort();

describe('subscription rawPayload', () => {
  it('a Subscription resource with spec.metadata.rawPayload gets a CloudEvent that wraps the bytes as published; rules read it', async () => {
    app.deliveries.length = 0;
    const body = JSON.stringify({ order: 1, note: 'as is' });
    await publish('raw-decl', body, '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/raw/matched');
    expect(d.headers['content-type']).toBe('application/cloudevents+json');
    expect(d.headers.pubsubname).toBe('mem');
    expect(d.body).toMatchObject({ datacontenttype: 'application/octet-stream', topic: 'raw-decl', pubsubname: 'mem', type: 'rt.event.sent', specversion: '1.0' });
    expect(unwrap(d.body).toString()).toBe(body);
    // in the reference runtime's (sorted) order: data_base64 first
    expect(Object.keys(d.body)).toEqual(sorted(d.body));
    expect(Object.keys(d.body)[0]).toBe('data_base64');
  });

  it('a raw subscriber of a message published as a CloudEvent gets the envelope bytes, wrapped', async () => {
    app.deliveries.length = 0;
    await publish('raw-decl', JSON.stringify({ order: 2 }));
    const [d] = await app.waitFor((ds) => ds.length === 1);
    const inner = JSON.parse(unwrap(d.body).toString()) as Record<string, unknown>;
    expect(inner).toMatchObject({ specversion: '1.0', source: 'raw-app', topic: 'raw-decl', data: { order: 2 } });
    // the envelope rt wrote at publish is sorted too: an SDK reads its first value as the data
    expect(Object.keys(inner)).toEqual(sorted(inner));
    expect(Object.values(inner)[0]).toEqual({ order: 2 });
  });

  it('a programmatic subscription with metadata.rawPayload gets the wrapped bytes too', async () => {
    app.deliveries.length = 0;
    await publish('raw-prog', JSON.stringify([1, 2, 3]), '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/raw/prog');
    expect(d.body.datacontenttype).toBe('application/octet-stream');
    expect(JSON.parse(unwrap(d.body).toString())).toEqual([1, 2, 3]);
  });

  it('rawPayloadAsBody: the bytes themselves are the body, with the content type they were published with', async () => {
    app.deliveries.length = 0;
    await publish('raw-body', JSON.stringify({ as: 'bytes' }), '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.headers['content-type']).toBe('application/json');
    expect(d.headers.pubsubname).toBe('mem');
    expect(d.body).toEqual({ as: 'bytes' });
  });

  it('a message published raw reaches an ordinary subscriber as a CloudEvent whose data_base64 holds the bytes', async () => {
    app.deliveries.length = 0;
    const body = JSON.stringify({ legacy: true });
    await publish('plain', body, '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.headers['content-type']).toBe('application/cloudevents+json');
    expect(d.body).toMatchObject({ specversion: '1.0', topic: 'plain', pubsubname: 'mem', datacontenttype: 'application/json' });
    expect(unwrap(d.body).toString()).toBe(body);
    expect(Object.keys(d.body)).toEqual(sorted(d.body));
  });

  it('the metadata lists the raw subscriptions with their rawPayload metadata', async () => {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; metadata?: Record<string, string>; type: string }[] };
    const byTopic = Object.fromEntries(md.subscriptions.map((s) => [s.topic, s]));
    expect(byTopic['raw-decl']).toMatchObject({ type: 'DECLARATIVE', metadata: { rawPayload: 'true' } });
    expect(byTopic['raw-prog']).toMatchObject({ type: 'PROGRAMMATIC', metadata: { rawPayload: 'true' } });
    expect(byTopic['raw-body']).toMatchObject({ type: 'DECLARATIVE', metadata: { rawPayload: 'true', rawPayloadAsBody: 'true' } });
  });
});
