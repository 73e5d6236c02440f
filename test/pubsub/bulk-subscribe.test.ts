/**
 * bulkSubscribe on a real sidecar (pubsub.in-memory) and a real app: batches up to
 * maxMessagesCount or maxAwaitDurationMs, per-entry statuses, a RETRY entry delivered again in
 * a later batch, a DROP entry sent to the dead-letter topic (a batch answered 404 is not), the
 * body's members and the `pubsubname` header as the reference runtime sends them, rawPayload
 * entries as base64 with application/octet-stream, and the resource field checked when the
 * Subscription is read.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadResources } from '../../sidecar/src/resources/loader.ts';
import { component, startApp, startPubSubSidecar, watchedInMemory, type PubSubSidecar, type TestApp } from './helpers.ts';

const SUB = `apiVersion: rt.io/v2alpha1
kind: Subscription
metadata:
  name: batched
spec:
  pubsubname: mem
  topic: batched
  routes:
    default: /batch
  bulkSubscribe:
    enabled: true
    maxMessagesCount: 5
    maxAwaitDurationMs: 1500
  deadLetterTopic: batched-dead
`;
const DEAD = `apiVersion: rt.io/v1alpha1
kind: Subscription
metadata:
  name: batched-dead
spec:
  pubsubname: mem
  topic: batched-dead
  route: /bdead
`;

let app: TestApp;
let sc: PubSubSidecar;
const mem = watchedInMemory();

beforeAll(async () => {
  app = await startApp();
  app.subscribe = [
    { pubsubname: 'mem', topic: 'prog-batched', route: '/pbatch', bulkSubscribe: { enabled: true, maxMessagesCount: 2, maxAwaitDurationMs: 5000 } },
    { pubsubname: 'mem', topic: 'raw-batched', route: '/rawbatch', metadata: { rawPayload: 'true' }, bulkSubscribe: { enabled: true, maxMessagesCount: 3, maxAwaitDurationMs: 5000 } },
  ];
  sc = await startPubSubSidecar([component('mem', 'pubsub.in-memory'), SUB, DEAD].join('---\n'), { appId: 'bulky', appPort: app.port, catalog: mem.catalog });
  await app.opened(sc.base, ['batched']);
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
});

type Entry = { entryId: string; event: { id: string; data: { n: number } }; contentType: string };

const publish = (topic: string, n: number) => fetch(`${sc.base}/v1.0/publish/mem/${topic}`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });

describe('bulkSubscribe', () => {
  it('delivers batches; each entry has its own status; a RETRY entry comes again in a later batch, a DROP one goes to the dead-letter topic', async () => {
    const seen = new Map<number, number>();
    app.answer = (d) => {
      if (d.path === '/bdead') return { status: 200 };
      const entries = d.body.entries as Entry[];
      return {
        status: 200,
        body: {
          statuses: entries.map((e) => {
            const n = e.event.data.n;
            seen.set(n, (seen.get(n) ?? 0) + 1);
            return { entryId: e.entryId, status: n === 0 && seen.get(n) === 1 ? 'RETRY' : n === 1 ? 'DROP' : 'SUCCESS' };
          }),
        },
      };
    };
    for (let n = 0; n < 5; n++) expect((await publish('batched', n)).status).toBe(204);
    // the five fill one batch at once; the wait (1.5 s) is long enough that five publishes one after
    // another fit in it beside a CPU load (300 ms did not, at load 16)
    const all = await app.waitFor((x) => x.filter((d) => d.path === '/batch').length === 2 && x.some((d) => d.path === '/bdead'), 15_000);
    const ds = all.filter((d) => d.path === '/batch');
    expect(ds[0].body).toMatchObject({ pubsubname: 'mem', topic: 'batched', type: 'rt.event.sent.bulk' });
    expect(ds[0].headers.pubsubname).toBe('mem');
    // the reference runtime's member order: the body's sorted, each entry's as its struct
    expect(Object.keys(ds[0].body)).toEqual(['entries', 'id', 'metadata', 'pubsubname', 'topic', 'type']);
    expect(Object.keys((ds[0].body.entries as Entry[])[0])).toEqual(['entryId', 'event', 'metadata', 'contentType']);
    expect((ds[0].body.entries as Entry[]).map((e) => e.event.data.n).sort()).toEqual([0, 1, 2, 3, 4]);
    expect((ds[0].body.entries as Entry[])[0].contentType).toBe('application/cloudevents+json');
    // the retried entry alone, after maxAwaitDurationMs
    expect((ds[1].body.entries as Entry[]).map((e) => e.event.data.n)).toEqual([0]);
    expect(ds[1].at - ds[0].at).toBeGreaterThanOrEqual(1400);
    // the dropped entry, as it was received
    const dead = all.filter((d) => d.path === '/bdead');
    expect(dead).toHaveLength(1);
    expect(dead[0].body).toMatchObject({ topic: 'batched', data: { n: 1 } });
    expect(dead[0].body.id).toBe((ds[0].body.entries as Entry[]).find((e) => e.event.data.n === 1)?.event.id);
    await mem.settled(); // every entry acknowledged: no batch can follow
    expect(app.deliveries).toHaveLength(3);
  });

  it('a batch answered 404 (no such route) is acknowledged without the dead-letter topic, as the reference runtime does', async () => {
    app.deliveries.length = 0;
    app.answer = (d) => ({ status: d.path === '/bdead' ? 200 : 404 });
    for (let n = 10; n < 12; n++) expect((await publish('batched', n)).status).toBe(204);
    await app.waitFor((x) => x.length >= 1, 15_000);
    await mem.settled(); // both acknowledged by the 404: no retry, no copy
    expect(app.deliveries.map((d) => d.path)).toEqual(['/batch']);
  });

  it("the app's own bulkSubscribe entry batches too (maxMessagesCount reached before the wait)", async () => {
    app.deliveries.length = 0;
    app.answer = (d) => ({ status: 200, body: { statuses: (d.body.entries as Entry[]).map((e) => ({ entryId: e.entryId, status: 'SUCCESS' })) } });
    await publish('prog-batched', 1);
    await publish('prog-batched', 2);
    const [d] = await app.waitFor((x) => x.length === 1, 3000);
    expect(d.path).toBe('/pbatch');
    expect((d.body.entries as Entry[]).map((e) => e.event.data.n).sort()).toEqual([1, 2]);
  });

  it('rawPayload: each entry is the base64 of the bytes as published, with contentType application/octet-stream', async () => {
    app.deliveries.length = 0;
    app.answer = (d) => ({ status: 200, body: { statuses: (d.body.entries as Entry[]).map((e) => ({ entryId: e.entryId, status: 'SUCCESS' })) } });
    const raw = (body: string | Buffer, contentType: string) => fetch(`${sc.base}/v1.0/publish/mem/raw-batched?metadata.rawPayload=true`, { method: 'POST', body, headers: { 'content-type': contentType } });
    expect((await raw(JSON.stringify({ message: 'one' }), 'application/json')).status).toBe(204);
    expect((await raw(Buffer.from([0, 255]), 'application/octet-stream')).status).toBe(204);
    expect((await publish('raw-batched', 3)).status).toBe(204); // published as a CloudEvent
    const [d] = await app.waitFor((x) => x.length === 1, 3000);
    expect(d.headers.pubsubname).toBe('mem');
    const entries = d.body.entries as unknown as { event: string; contentType: string }[];
    expect(entries.map((e) => e.contentType)).toEqual(['application/octet-stream', 'application/octet-stream', 'application/octet-stream']);
    const bytes = entries.map((e) => Buffer.from(e.event, 'base64'));
    expect(JSON.parse(bytes[0].toString())).toEqual({ message: 'one' });
    expect(bytes[1]).toEqual(Buffer.from([0, 255]));
    // the CloudEvent's own bytes: sorted, its data the first value (as an SDK test reads it)
    expect(Object.values(JSON.parse(bytes[2].toString()) as object)[0]).toEqual({ n: 3 });
  });

  it('a Subscription with a malformed bulkSubscribe is refused naming the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-bulk-'));
    try {
      writeFileSync(join(dir, 's.yaml'), SUB.replace('maxMessagesCount: 5', 'maxMessagesCount: -5'));
      await expect(loadResources([dir], { appId: 'bulky', namespace: 'default' })).rejects.toThrow(/bulkSubscribe\.maxMessagesCount/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
