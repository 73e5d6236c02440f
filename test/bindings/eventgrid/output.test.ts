/**
 * Output direction through a real sidecar: POST /v1.0/bindings/<name> with operation `create`
 * publishes to the topic stand-in over HTTPS.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { toCloudEvents } from '../../../sidecar/src/components/bindings/eventgrid/publisher.ts';
import { startAzureStandIns, type AzureStandIns } from '../../services/azure-standins.ts';
import { capturingLogger, componentYaml, envSecretStoreYaml, q, startWith, type Started } from './helpers.ts';

describe('event-routing output binding (loopback stand-in for Azure)', () => {
  let az: AzureStandIns;
  let s: Started;
  let cap: ReturnType<typeof capturingLogger>;

  beforeAll(async () => {
    az = await startAzureStandIns();
    process.env.EGOUT_TOPIC_KEY = az.topic.key;
    cap = capturingLogger();
    s = await startWith(
      {
        'out.yaml': componentYaml('orders-out', { direction: q('output'), topicEndpoint: q(az.topic.endpoint), accessKey: q(az.topic.key) }),
        // the ecosystem's type name works too
        'alias.yaml': componentYaml('alias-out', { topicEndpoint: q(az.topic.endpoint), accessKey: q(az.topic.key) }, 'bindings.azure.eventgrid'),
        'wrongkey.yaml': componentYaml('wrongkey-out', { topicEndpoint: q(az.topic.endpoint), accessKey: q('d3Jvbmcta2V5') }),
        'slow.yaml': componentYaml('slow-out', { topicEndpoint: q(az.topic.endpoint), accessKey: q(az.topic.key), publishTimeout: q('300ms') }),
        // the access key from a secret store
        'store.yaml': envSecretStoreYaml('envsecrets', 'EGOUT_'),
        'fromstore.yaml': componentYaml('store-out', { topicEndpoint: q(az.topic.endpoint) }, undefined, { store: 'envsecrets', refs: { accessKey: 'TOPIC_KEY' } }),
      },
      0,
      cap.logger,
    );
  });
  afterAll(async () => {
    delete process.env.EGOUT_TOPIC_KEY;
    await s?.stop();
    await az?.close();
  });
  beforeEach(() => {
    az.topic.received.length = 0;
    az.topic.failWith = undefined;
    az.topic.hang = false;
  });

  const invoke = (name: string, body: unknown) =>
    fetch(`${s.base}/v1.0/bindings/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('starts no output-only component as an input binding', () => {
    expect(cap.text()).not.toContain('input binding');
  });

  it('wraps plain data into a CloudEvent with the type from request metadata', async () => {
    const res = await invoke('orders-out', { operation: 'create', data: { orderId: 7 }, metadata: { type: 'com.example.order.created', subject: 'orders/7' } });
    expect(res.status).toBe(204);
    expect(az.topic.received).toHaveLength(1);
    const { contentType, events } = az.topic.received[0];
    expect(contentType).toBe('application/cloudevents+json; charset=utf-8');
    expect(events[0]).toMatchObject({
      specversion: '1.0',
      type: 'com.example.order.created',
      subject: 'orders/7',
      source: '/default/egapp/bindings/orders-out',
      datacontenttype: 'application/json',
      data: { orderId: 7 },
    });
    expect(typeof events[0].id).toBe('string');
    expect(events[0].id).not.toBe('');
  });

  it('uses a default type, and keeps a non-JSON string as text', async () => {
    expect((await invoke('orders-out', { operation: 'create', data: 'hello' })).status).toBe(204);
    expect(az.topic.received[0].events[0]).toMatchObject({ type: 'rt.bindings.eventrouter.create', data: 'hello', datacontenttype: 'text/plain' });
  });

  it('adds no attribute to a CloudEvent published as it is (no time when it had none)', () => {
    const event = { specversion: '1.0', id: 'e-1', source: 'urn:shop', type: 'com.example.paid', data: { x: 1 } };
    const [out] = toCloudEvents(event, {}, 'urn:src').events as Record<string, unknown>[];
    expect(out).toEqual(event);
  });

  it('labels bytes (data_base64) application/octet-stream, not JSON, unless the caller names a type', () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x00]);
    const [plain] = toCloudEvents(bytes, {}, 'urn:src').events as Record<string, unknown>[];
    expect(plain).toMatchObject({ data_base64: bytes.toString('base64'), datacontenttype: 'application/octet-stream' });
    const [named] = toCloudEvents(bytes, { dataContentType: 'image/png' }, 'urn:src').events as Record<string, unknown>[];
    expect(named.datacontenttype).toBe('image/png');
  });

  it('publishes a valid CloudEvent as it is (also when sent as a JSON string)', async () => {
    const event = { specversion: '1.0', id: 'evt-1', source: 'urn:shop', type: 'com.example.paid', time: '2026-01-01T00:00:00.000Z', data: { x: 1 }, tenant: 'blue' };
    expect((await invoke('alias-out', { operation: 'create', data: event })).status).toBe(204);
    expect((await invoke('alias-out', { operation: 'create', data: JSON.stringify(event) })).status).toBe(204);
    expect(az.topic.received.map((r) => r.events[0])).toEqual([event, event]);
  });

  it('publishes with an access key taken from a secret store', async () => {
    expect((await invoke('store-out', { operation: 'create', data: { a: 1 } })).status).toBe(204);
    expect(az.topic.received).toHaveLength(1);
  });

  it('publishes a JSON array as one batch', async () => {
    const data = [{ a: 1 }, { specversion: '1.0', id: 'k2', source: 'urn:x', type: 't' }, 'three'];
    expect((await invoke('orders-out', { operation: 'create', data })).status).toBe(204);
    expect(az.topic.received).toHaveLength(1);
    const { contentType, events } = az.topic.received[0];
    expect(contentType).toBe('application/cloudevents-batch+json; charset=utf-8');
    expect(events).toHaveLength(3);
    expect(events[0]).toMatchObject({ data: { a: 1 }, type: 'rt.bindings.eventrouter.create' });
    expect(events[1]).toMatchObject({ id: 'k2', type: 't' });
    expect(events[2]).toMatchObject({ data: 'three' });
  });

  it('answers 500 carrying the topic status and message when the topic refuses', async () => {
    const res = await invoke('wrongkey-out', { operation: 'create', data: { a: 1 } });
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errorCode: string; message: string; details: { topicStatus: number }[] };
    expect(body.errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
    expect(body.message).toMatch(/answered 401 Unauthorized: The request authorization key is not authorized/);
    expect(body.details[0].topicStatus).toBe(401);

    az.topic.failWith = { status: 503, code: 'ServiceUnavailable', message: 'try again later' };
    const res2 = await invoke('orders-out', { operation: 'create', data: { a: 1 } });
    expect(res2.status).toBe(500);
    expect(((await res2.json()) as { message: string }).message).toMatch(/answered 503 ServiceUnavailable: try again later/);
    expect(az.topic.received).toHaveLength(0);
  });

  it('bounds the publish with a timeout', async () => {
    az.topic.hang = true;
    const t0 = Date.now();
    const res = await invoke('slow-out', { operation: 'create', data: { a: 1 } });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { message: string }).message).toMatch(/no answer within 300 ms/);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('refuses bad requests with 400 and publishes nothing', async () => {
    for (const body of [
      { operation: 'create', data: [] },
      { operation: 'create', data: { specversion: '1.0', id: 'x', source: 's', type: 't', 'Bad-Name': 1 } },
      { operation: 'create', data: { specversion: '0.3', id: 'x', source: 's', type: 't' } },
      { operation: 'create', data: 1, metadata: { type: ' ' } },
      { operation: 'delete', data: 1 },
    ]) {
      const res = await invoke('orders-out', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as { errorCode: string }).errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
    }
    expect(az.topic.received).toHaveLength(0);
  });

  it('answers any data with 204 (published) or 400 (nothing published), never a 5xx (property)', async () => {
    const attr = fc.oneof(fc.string(), fc.constantFrom('1.0', '0.3', 'x'));
    const ceLike = fc.record({ specversion: attr, id: attr, source: attr, type: attr, data: fc.jsonValue(), Extra: fc.string(), time: fc.string() }, { requiredKeys: [] });
    const data = fc.oneof(fc.jsonValue(), ceLike, fc.array(fc.oneof(fc.jsonValue(), ceLike), { maxLength: 4 }), fc.jsonValue().map((v) => JSON.stringify(v)), fc.constant(undefined));
    const metadata = fc.dictionary(fc.constantFrom('type', 'subject', 'dataContentType', 'other'), fc.string(), { maxKeys: 3 });
    await fc.assert(
      fc.asyncProperty(data, metadata, async (d, md) => {
        az.topic.received.length = 0;
        const res = await invoke('orders-out', { operation: 'create', data: d, metadata: md });
        const text = await res.text();
        expect([204, 400], text).toContain(res.status);
        if (res.status === 400) {
          expect(az.topic.received).toHaveLength(0);
          return;
        }
        expect(az.topic.received).toHaveLength(1);
        // a string that is a JSON array or object is sent as its events; any other string (also
        // one that only starts like JSON, e.g. "[") is one event's data
        const parsed = typeof d === 'string' && /^\s*[[{]/.test(d) ? parseOr(d) : d;
        expect(az.topic.received[0].events).toHaveLength(Array.isArray(parsed) ? parsed.length : 1);
        for (const ev of az.topic.received[0].events) expect(ev.specversion).toBe('1.0');
      }),
      { numRuns: 150 },
    );
  });

  it('reports OUTPUT_BINDING in the metadata API and never logs the access key', async () => {
    const md = (await (await fetch(`${s.base}/v1.0/metadata`)).json()) as { components: { name: string; type: string; capabilities: string[] }[] };
    expect(md.components.find((c) => c.name === 'orders-out')).toMatchObject({ type: 'bindings.cloud.eventrouter', capabilities: ['OUTPUT_BINDING'] });
    expect(cap.text()).not.toContain(az.topic.key);
  });
});

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
