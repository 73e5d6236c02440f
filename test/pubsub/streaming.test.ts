/**
 * STREAMING subscriptions over gRPC SubscribeTopicEventsAlpha1 on a real sidecar: the initial
 * response, events with their CloudEvent attributes, SUCCESS/RETRY/DROP answers, the dead-letter
 * topic (after the retries, and for DROP), metadata listing while open, and refusals (unknown
 * pub/sub, no initial request). An
 * event's topic and pub/sub are the stream's, whatever its CloudEvent says.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { component, startPubSubSidecar, watchedInMemory, type PubSubSidecar } from './helpers.ts';

interface EventMessage {
  id: string;
  source: string;
  type: string;
  spec_version: string;
  data_content_type: string;
  topic: string;
  data: Buffer;
  pubsub_name: string;
  extensions: { fields: Record<string, { stringValue?: string }> };
}
interface Response {
  initial_response?: object | null;
  event_message?: EventMessage | null;
}

let sc: PubSubSidecar;
const mem = watchedInMemory();
let client: grpc.Client & Record<string, (...a: unknown[]) => unknown>;

beforeAll(async () => {
  sc = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), { appId: 'streamer', catalog: mem.catalog });
  const Client = runtimeClient();
  client = new Client(`127.0.0.1:${sc.sidecar.grpcPort}`, grpc.credentials.createInsecure()) as typeof client;
});

afterAll(async () => {
  client?.close();
  await sc?.close();
});

function open(initial: Record<string, unknown>) {
  const call = client.SubscribeTopicEventsAlpha1() as grpc.ClientDuplexStream<unknown, Response>;
  const events: EventMessage[] = [];
  const errors: grpc.ServiceError[] = [];
  let initialised = false;
  call.on('data', (r: Response) => {
    if (r.initial_response) initialised = true;
    if (r.event_message) events.push(r.event_message);
  });
  call.on('error', (e: grpc.ServiceError) => errors.push(e));
  call.write({ initial_request: initial });
  return { call, events, errors, initialised: () => initialised };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const publish = (topic: string, body: unknown) =>
  fetch(`${sc.base}/v1.0/publish/mem/${topic}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });

describe('SubscribeTopicEventsAlpha1', () => {
  it('streams events; SUCCESS acknowledges, RETRY is sent again, metadata lists the stream while it is open', async () => {
    const s = open({ pubsub_name: 'mem', topic: 'live', metadata: {} });
    await until(s.initialised);
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: Record<string, unknown>[] };
    expect(md.subscriptions).toContainEqual({ pubsubname: 'mem', topic: 'live', metadata: {}, rules: [], deadLetterTopic: '', type: 'STREAMING' });

    expect((await publish('live', { n: 1 })).status).toBe(204);
    await until(() => s.events.length === 1);
    const e = s.events[0];
    expect(e).toMatchObject({ source: 'streamer', spec_version: '1.0', data_content_type: 'application/json', topic: 'live', pubsub_name: 'mem' });
    expect(JSON.parse(Buffer.from(e.data).toString())).toEqual({ n: 1 });
    expect(e.extensions.fields.traceparent.stringValue).toMatch(/^00-0af7/);
    s.call.write({ event_processed: { id: e.id, status: { status: 1 } } }); // RETRY
    await until(() => s.events.length === 2);
    expect(s.events[1].id).toBe(e.id);
    s.call.write({ event_processed: { id: e.id, status: { status: 0 } } }); // SUCCESS
    await mem.settled(); // acknowledged: not sent again
    expect(s.events).toHaveLength(2);

    s.call.end();
    await vi.waitFor(async () => {
      const after = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: Record<string, unknown>[] };
      expect(after.subscriptions.filter((x) => x.type === 'STREAMING')).toEqual([]);
    });
  });

  it('after the retries the event goes to the dead-letter topic; DROP is not retried and goes there at once', async () => {
    const dead = open({ pubsub_name: 'mem', topic: 'live-dead', metadata: {} });
    const s = open({ pubsub_name: 'mem', topic: 'live2', metadata: {}, dead_letter_topic: 'live-dead' });
    await until(() => s.initialised() && dead.initialised());
    s.call.on('data', (r: Response) => {
      if (r.event_message) s.call.write({ event_processed: { id: r.event_message.id, status: { status: JSON.parse(Buffer.from(r.event_message.data).toString()).drop ? 2 : 1 } } });
    });
    dead.call.on('data', (r: Response) => {
      if (r.event_message) dead.call.write({ event_processed: { id: r.event_message.id, status: { status: 0 } } });
    });
    await publish('live2', { drop: false });
    await until(() => dead.events.length === 1, 8000);
    expect(s.events).toHaveLength(4);
    // the copy is the message as received: its CloudEvent still names live2 (in extensions), the
    // event is the dead-letter stream's
    expect(dead.events[0]).toMatchObject({ id: s.events[0].id, topic: 'live-dead', pubsub_name: 'mem' });
    expect(dead.events[0].extensions.fields.topic.stringValue).toBe('live2');
    await publish('live2', { drop: true });
    await until(() => s.events.length === 5 && dead.events.length === 2);
    expect(dead.events[1]).toMatchObject({ id: s.events[4].id, topic: 'live-dead', pubsub_name: 'mem' });
    expect(JSON.parse(Buffer.from(dead.events[1].data).toString())).toEqual({ drop: true });
    await mem.settled(); // both acknowledged, and their copies: no retry can follow
    expect(s.events).toHaveLength(5);
    expect(dead.events).toHaveLength(2);
    s.call.end();
    dead.call.end();
  });

  it("a published CloudEvent that names another topic and pub/sub arrives as the stream's", async () => {
    const s = open({ pubsub_name: 'mem', topic: 'live-fwd', metadata: {} });
    await until(s.initialised);
    s.call.on('data', (r: Response) => {
      if (r.event_message) s.call.write({ event_processed: { id: r.event_message.id, status: { status: 0 } } });
    });
    const ce = { specversion: '1.0', id: 'fwd-1', source: 'upstream', type: 'order.created', datacontenttype: 'application/json', data: { order: 7 }, topic: 'inbound', pubsubname: 'elsewhere' };
    const res = await fetch(`${sc.base}/v1.0/publish/mem/live-fwd`, { method: 'POST', body: JSON.stringify(ce), headers: { 'content-type': 'application/cloudevents+json' } });
    expect(res.status).toBe(204);
    await until(() => s.events.length === 1);
    expect(s.events[0]).toMatchObject({ id: 'fwd-1', source: 'upstream', type: 'order.created', topic: 'live-fwd', pubsub_name: 'mem' });
    expect(JSON.parse(Buffer.from(s.events[0].data).toString())).toEqual({ order: 7 });
    // publishing set the CloudEvent's own attributes to where it was published
    expect(s.events[0].extensions.fields.topic.stringValue).toBe('live-fwd');
    expect(s.events[0].extensions.fields.pubsubname.stringValue).toBe('mem');
    s.call.end();
  });

  it("data holds the bytes as published: a JSON type's value as JSON (a string keeps its quotes), text as is, other types' bytes", async () => {
    const s = open({ pubsub_name: 'mem', topic: 'live-data', metadata: {} });
    await until(s.initialised);
    s.call.on('data', (r: Response) => {
      if (r.event_message) s.call.write({ event_processed: { id: r.event_message.id, status: { status: 0 } } });
    });
    const post = async (body: string | Uint8Array, contentType: string) => {
      const res = await fetch(`${sc.base}/v1.0/publish/mem/live-data`, { method: 'POST', body, headers: { 'content-type': contentType } });
      expect(res.status).toBe(204);
    };
    const cases: [string | Uint8Array, string, string | Buffer][] = [
      ['"hello"', 'application/json', '"hello"'], // what the Java SDK publishes for a String
      ['{"a":1,"b":[true,null]}', 'application/json', '{"a":1,"b":[true,null]}'],
      ['42', 'application/json', '42'],
      ['"42"', 'application/json; charset=utf-8', '"42"'],
      ['"vendor"', 'application/vnd.orders+json', '"vendor"'],
      ['hello', 'text/plain', 'hello'],
      ['"quoted text"', 'text/plain', '"quoted text"'],
      ['<a>x</a>', 'application/xml', '<a>x</a>'],
      [new Uint8Array([0, 1, 0xfe, 0xff]), 'application/octet-stream', Buffer.from([0, 1, 0xfe, 0xff])],
      // a caller's own CloudEvent: its datacontenttype decides
      [JSON.stringify({ specversion: '1.0', id: 'ce-json', source: 's', type: 't', datacontenttype: 'application/json', data: 'in a CloudEvent' }), 'application/cloudevents+json', '"in a CloudEvent"'],
      [JSON.stringify({ specversion: '1.0', id: 'ce-text', source: 's', type: 't', datacontenttype: 'text/plain', data: 'plain in a CloudEvent' }), 'application/cloudevents+json', 'plain in a CloudEvent'],
      [JSON.stringify({ specversion: '1.0', id: 'ce-none', source: 's', type: 't', data: { no: 'type' } }), 'application/cloudevents+json', '{"no":"type"}'],
      [JSON.stringify({ specversion: '1.0', id: 'ce-b64', source: 's', type: 't', datacontenttype: 'image/png', data_base64: Buffer.from([9, 8, 7]).toString('base64') }), 'application/cloudevents+json', Buffer.from([9, 8, 7])],
    ];
    for (const [body, contentType] of cases) await post(body, contentType);
    // gRPC PublishEvent, as the Java SDK publishes a String
    await new Promise<void>((resolve, reject) => client.PublishEvent({ pubsub_name: 'mem', topic: 'live-data', data: Buffer.from('"over gRPC"'), data_content_type: 'application/json' }, (err: Error | null) => (err ? reject(err) : resolve())));
    await until(() => s.events.length === cases.length + 1);
    const got = s.events.map((e) => [e.data_content_type, Buffer.from(e.data)]);
    expect(got).toEqual([
      ...cases.map(([body, contentType, want]) => [contentType === 'application/cloudevents+json' ? (JSON.parse(body as string) as { datacontenttype?: string }).datacontenttype ?? '' : contentType, Buffer.from(want)]),
      ['application/json', Buffer.from('"over gRPC"')],
    ]);
    // each decodes to the value an HTTP subscriber reads in the CloudEvent's data
    expect(JSON.parse(Buffer.from(s.events[0].data).toString())).toBe('hello');
    expect(JSON.parse(Buffer.from(s.events[3].data).toString())).toBe('42');
    s.call.end();
  });

  it('rawPayload in the initial request: events carry the bytes as published, not a CloudEvent', async () => {
    const s = open({ pubsub_name: 'mem', topic: 'live-raw', metadata: { rawPayload: 'true' } });
    await until(s.initialised);
    s.call.on('data', (r: Response) => {
      if (r.event_message) s.call.write({ event_processed: { id: r.event_message.id, status: { status: 0 } } });
    });
    const res = await fetch(`${sc.base}/v1.0/publish/mem/live-raw?metadata.rawPayload=true`, { method: 'POST', body: 'bytes as they are', headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(204);
    await until(() => s.events.length === 1);
    expect(Buffer.from(s.events[0].data).toString()).toBe('bytes as they are');
    expect(s.events[0].data_content_type).toBe('application/octet-stream'); // as the reference runtime's wrapper says
    // published as a CloudEvent: a raw subscriber sees the envelope's JSON text
    await publish('live-raw', { n: 9 });
    await until(() => s.events.length === 2);
    expect(JSON.parse(Buffer.from(s.events[1].data).toString())).toMatchObject({ specversion: '1.0', topic: 'live-raw', data: { n: 9 } });
    s.call.end();
  });

  it('refuses an unknown pub/sub (INVALID_ARGUMENT ERR_PUBSUB_NOT_FOUND, as the reference) and a stream that does not start with initial_request (INVALID_ARGUMENT)', async () => {
    const s = open({ pubsub_name: 'nope', topic: 't', metadata: {} });
    await until(() => s.errors.length === 1);
    expect(s.errors[0].code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(s.errors[0].metadata.get('rt-error-code')).toEqual(['ERR_PUBSUB_NOT_FOUND']);
    expect(s.errors[0].details).toMatch(/nope\W{0,4} is not loaded/);
    const call = client.SubscribeTopicEventsAlpha1() as grpc.ClientDuplexStream<unknown, Response>;
    const err = new Promise<grpc.ServiceError>((r) => call.on('error', r));
    call.write({ event_processed: { id: 'x', status: { status: 0 } } });
    expect((await err).code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});
