/**
 * Subscription-level rawPayload on a real sidecar (pubsub.in-memory) and a real HTTP app: a
 * Subscription resource with spec.metadata.rawPayload "true" and a programmatic subscription
 * with metadata.rawPayload get the message's bytes as published, not a CloudEvent; routing
 * rules still see a CloudEvent around them; a message published raw reaches an ordinary
 * subscriber wrapped in a CloudEvent (data_base64).
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
  await app.discovered;
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
});

async function publish(topic: string, body: string, query = '', contentType = 'application/json'): Promise<void> {
  const res = await fetch(`${sc.base}/v1.0/publish/mem/${topic}${query}`, { method: 'POST', body, headers: { 'content-type': contentType } });
  expect(res.status).toBe(204);
}

describe('subscription rawPayload', () => {
  it('a Subscription resource with spec.metadata.rawPayload gets the bytes published raw, with their content type; rules see a CloudEvent', async () => {
    app.deliveries.length = 0;
    await publish('raw-decl', JSON.stringify({ order: 1, note: 'as is' }), '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/raw/matched');
    expect(d.body).toEqual({ order: 1, note: 'as is' });
    expect(d.headers['content-type']).toBe('application/json');
  });

  it('a raw subscriber of a message published as a CloudEvent gets the envelope bytes themselves', async () => {
    app.deliveries.length = 0;
    await publish('raw-decl', JSON.stringify({ order: 2 }));
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.body).toMatchObject({ specversion: '1.0', source: 'raw-app', topic: 'raw-decl', data: { order: 2 } });
    expect(d.headers['content-type']).toBe('application/cloudevents+json');
  });

  it('a programmatic subscription with metadata.rawPayload gets the raw bytes too', async () => {
    app.deliveries.length = 0;
    await publish('raw-prog', JSON.stringify([1, 2, 3]), '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.path).toBe('/raw/prog');
    expect(d.body).toEqual([1, 2, 3]);
  });

  it('a message published raw reaches an ordinary subscriber as a CloudEvent whose data_base64 holds the bytes', async () => {
    app.deliveries.length = 0;
    const body = JSON.stringify({ legacy: true });
    await publish('plain', body, '?metadata.rawPayload=true');
    const [d] = await app.waitFor((ds) => ds.length === 1);
    expect(d.headers['content-type']).toBe('application/cloudevents+json');
    expect(d.body).toMatchObject({ specversion: '1.0', topic: 'plain', pubsubname: 'mem', datacontenttype: 'application/json' });
    expect(Buffer.from(String(d.body.data_base64), 'base64').toString()).toBe(body);
  });

  it('the metadata lists the raw subscriptions with their rawPayload metadata', async () => {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; metadata?: Record<string, string>; type: string }[] };
    const byTopic = Object.fromEntries(md.subscriptions.map((s) => [s.topic, s]));
    expect(byTopic['raw-decl']).toMatchObject({ type: 'DECLARATIVE', metadata: { rawPayload: 'true' } });
    expect(byTopic['raw-prog']).toMatchObject({ type: 'PROGRAMMATIC', metadata: { rawPayload: 'true' } });
  });
});
