/**
 * bindings.mqtt3 against a real Mosquitto of this suite's own: `create` publishes to the
 * component's topic or the request's, the input side delivers each message to the app with its
 * topic (a wildcard topic takes many), a refused event is offered `backOffMaxRetries` more times,
 * `direction` limits what the binding serves, and bad metadata or requests are refused clearly.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { factory } from '../../sidecar/src/components/bindings/mqtt3/index.ts';
import type { InputBinding, InputBindingEvent, InputBindingReply, OutputBinding } from '../../sidecar/src/components/types.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { requireService } from '../services/ci.ts';
import { mosquittoMissing, type Mosquitto } from '../services/mosquitto.ts';
import { mosquittoForSuite, sessionBacklog, uniqueMqttName, until } from '../services/mqtt-suite.ts';
import { componentContext, spec } from '../state/helpers.ts';

const missing = mosquittoMissing();
const available = requireService('Mosquitto', !missing, missing ?? '');

type Binding = OutputBinding & InputBinding;
let broker: Mosquitto;
const opened = new Set<Binding>();

interface App {
  events: InputBindingEvent[];
  status: () => number;
}

async function open(md: Record<string, string>, app?: App, log = componentContext.log): Promise<Binding> {
  const b = factory() as Binding;
  const deliverToApp = async (_name: string, e: InputBindingEvent): Promise<InputBindingReply> => {
    app?.events.push(e);
    return { status: app?.status() ?? 200, body: new Uint8Array() };
  };
  try {
    await b.init({ ...spec('bindings.mqtt3', { url: broker.url, ...md }), name: 'mqtt' }, { ...componentContext, log, deliverToApp });
    await b.start();
  } catch (e) {
    await b.close();
    throw e;
  }
  opened.add(b);
  return b;
}

const unique = uniqueMqttName;
async function closeOne(b: Binding): Promise<void> {
  opened.delete(b);
  await b.close();
}
const text = (e: InputBindingEvent) => Buffer.from(e.data).toString();

describe.skipIf(!available)('bindings.mqtt3 against a real Mosquitto', () => {
  mosquittoForSuite(opened, (b) => (broker = b));

  it('create publishes to the component topic (or the request topic); the input side hands each message to the app with its topic', async () => {
    const base = unique('events');
    const app: App = { events: [], status: () => 200 };
    const reader = await open({ topic: `${base}/#`, consumerID: unique('reader') }, app);
    expect(reader.capabilities()).toEqual(['INPUT_BINDING', 'OUTPUT_BINDING']);
    const writer = await open({ topic: `${base}/default`, consumerID: unique('writer'), direction: 'output' });
    expect(writer.capabilities()).toEqual(['OUTPUT_BINDING']);
    expect(await writer.invoke({ operation: 'create', data: { hello: 'world' }, metadata: {} })).toEqual({});
    await writer.invoke({ operation: 'create', data: 'plain text', metadata: { topic: `${base}/other` } });
    await until(() => app.events.length === 2, () => app.events.map(text));
    const got = app.events.map((e) => [e.metadata.topic, text(e)]).sort((a, b) => a[0].localeCompare(b[0]));
    expect(got).toEqual([
      [`${base}/default`, '{"hello":"world"}'],
      [`${base}/other`, 'plain text'],
    ]);
  });

  it('an event the app refuses is offered backOffMaxRetries more times, 5 s apart, then left to the broker', async () => {
    const topic = unique('refused');
    let answers = [500, 200];
    const app: App = { events: [], status: () => answers.shift() ?? 500 };
    const retryClient = unique('retry');
    const b = await open({ topic, consumerID: retryClient, backOffMaxRetries: '1' }, app);
    await b.invoke({ operation: 'create', data: 'x', metadata: {} });
    await until(() => app.events.length === 2, () => app.events.length, 12_000);
    // taken on the second offer: acknowledged (the consumer connection's session, `<consumerID>-consumer`,
    // holds nothing), and the close stops any
    // redelivery, so no third offer
    await closeOne(b);
    expect(app.events.length).toBe(2);
    expect(await sessionBacklog(broker.url, `${retryClient}-consumer`, topic)).toEqual([]);
    // without retries: one offer only, then the component says it leaves the message to the broker
    answers = [];
    const once = unique('once');
    const onceClient = unique('once');
    const warnings: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    const app2: App = { events: [], status: () => 500 };
    const c = await open({ topic: once, consumerID: onceClient }, app2, log);
    await c.invoke({ operation: 'create', data: 'y', metadata: {} });
    await until(() => warnings.some((w) => w.includes('left unacknowledged')), () => warnings);
    await closeOne(c);
    expect(app2.events.length).toBe(1);
    expect(await sessionBacklog(broker.url, `${onceClient}-consumer`, once)).toEqual(['y']);
  }, 30_000);

  it('an input-only binding refuses create; a wildcard topic or another operation is a 400', async () => {
    const topic = unique('input-only');
    const b = await open({ topic: `${topic}/+`, consumerID: unique('in'), direction: 'input' }, { events: [], status: () => 200 });
    expect(b.operations()).toEqual([]);
    const out = await open({ topic: `${topic}/+`, consumerID: unique('out'), direction: 'output' });
    for (const [binding, req] of [
      [out, { operation: 'create', data: 'x', metadata: {} }],
      [out, { operation: 'delete', data: 'x', metadata: {} }],
      [b, { operation: 'create', data: 'x', metadata: {} }],
    ] as const) {
      const e = await binding.invoke(req).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).status).toBe(400);
    }
  });

  it('refuses bad metadata at init, naming the field', async () => {
    const err = async (md: Record<string, string>) => {
      const b = factory() as Binding;
      const e = await b.init(spec('bindings.mqtt3', md), componentContext).then(
        () => undefined,
        (x: Error) => x,
      );
      await b.close();
      return e?.message ?? 'no error';
    };
    expect(await err({ url: broker.url, consumerID: 'c' })).toMatch(/"topic" is required/);
    expect(await err({ url: broker.url, topic: 't' })).toMatch(/"consumerID" is required/);
    expect(await err({ url: broker.url, topic: 't', consumerID: 'c', backOffMaxRetries: '-2' })).toMatch(/"backOffMaxRetries" "-2" is out of range/);
    expect(await err({ url: broker.url, topic: 'a/#/b', consumerID: 'c' })).toMatch(/"topic".*# stands alone/);
    expect(await err({ url: broker.url, topic: 't', consumerID: 'c', direction: 'sideways' })).toMatch(/"direction"/);
    expect(await err({ url: 'udp://u:s3cret@h', topic: 't', consumerID: 'c' })).toMatch(/scheme "udp:"/);
  });
});
