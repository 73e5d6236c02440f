/**
 * pubsub.mqtt3 and bindings.mqtt3 as the @dapr/dapr JS SDK's own end-to-end suite uses them
 * (its components: `pubsub-mqtt` with qos 1 and a clean session, `binding-mqtt` with a fixed
 * consumerID), through the SDK's DaprServer over HTTP and over gRPC, against a real Mosquitto of
 * this suite's own: plain events with the `pubsubname` header, rawPayload and bulk rawPayload
 * subscriptions (MQTT keeps no content type), `#` and `+` wildcard
 * subscriptions, the status answers (SUCCESS once, RETRY twice then SUCCESS, DROP to the dead
 * letter topic), and an input binding receiving what the output side of the same binding sent.
 */
import { DaprPubSubStatusEnum, DaprServer } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { daprGrpcServer, silentDaprLogger } from '../../test/services/dapr-server.ts';
import { mosquittoMissing, startMosquitto, type Mosquitto } from '../../test/services/mosquitto.ts';
import { freePort } from '../../test/services/net.ts';
import { component, startPubSubSidecar, type PubSubSidecar } from '../../test/pubsub/helpers.ts';

const missing = mosquittoMissing();
const available = requireService('Mosquitto', !missing, missing ?? '');

const PUBSUB = 'pubsub-mqtt';
const BINDING = 'binding-mqtt';

interface Call {
  data: unknown;
  headers: Record<string, string>;
}

async function until(check: () => boolean, what: () => unknown, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`condition not met in time; got ${JSON.stringify(what())}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}


let broker: Mosquitto;
beforeAll(async () => {
  if (available) broker = await startMosquitto();
});
afterAll(async () => {
  await broker?.close();
});

for (const proto of ['http', 'grpc'] as const) {
  describe.skipIf(!available)(`the JS SDK's MQTT cases, DaprServer over ${proto}`, () => {
    let server: DaprServer;
    let side: PubSubSidecar;
    const t = (topic: string) => `${proto}-${topic}`;
    const calls: Record<string, Call[]> = {};
    const record = (name: string, answer?: (data: unknown) => DaprPubSubStatusEnum | undefined) => {
      calls[name] = [];
      return async (data: unknown, headers?: unknown) => {
        calls[name].push({ data, headers: { ...(headers as Record<string, string> | undefined) } });
        return answer?.(data);
      };
    };
    let retries = 0;
    const status = (data: unknown) => {
      if (data === 'DROP') return DaprPubSubStatusEnum.DROP;
      if (data === 'TEST_RETRY_TWICE' && retries < 2) {
        retries++;
        return DaprPubSubStatusEnum.RETRY;
      }
      return DaprPubSubStatusEnum.SUCCESS;
    };

    beforeAll(async () => {
      const appPort = await freePort();
      const yaml = [
        component(PUBSUB, 'pubsub.mqtt3', { url: broker.url, qos: '1', cleanSession: 'true', backOffMaxRetries: '0' }),
        component(BINDING, 'bindings.mqtt3', { consumerID: `e2e-${proto}`, url: broker.url, topic: t('topic-testing'), retain: 'false', cleanSession: 'false' }),
      ].join('---\n');
      side = await startPubSubSidecar(yaml, { appId: `sdk-mqtt-${proto}`, appPort, appProtocol: proto });
      server =
        proto === 'grpc'
          ? daprGrpcServer(appPort, side.sidecar.grpcPort)
          : new DaprServer({ serverHost: '127.0.0.1', serverPort: String(appPort), clientOptions: { daprHost: '127.0.0.1', daprPort: String(side.sidecar.httpPort), logger: silentDaprLogger }, logger: silentDaprLogger });
      await server.binding.receive(BINDING, record('binding'));
      await server.pubsub.subscribe(PUBSUB, t('test-topic'), record('plain'));
      await server.pubsub.subscribe(PUBSUB, t('test-topic-raw'), record('raw'), undefined, { rawPayload: true });
      await server.pubsub.subscribeBulk(PUBSUB, t('bulk-subscribe-topic'), record('bulkraw'), { maxMessagesCount: 2, maxAwaitDurationMs: 500, metadata: { rawPayload: true } });
      await server.pubsub.subscribe(PUBSUB, t('myhome/groundfloor/#'), record('hash'));
      await server.pubsub.subscribe(PUBSUB, t('myhome/firstfloor/+/temperature'), record('plus'));
      await server.pubsub.subscribeWithOptions(PUBSUB, t('test-topic-status-callback'), { callback: record('status', status), deadLetterTopic: t('deadletter-topic') });
      await server.pubsub.subscribe(PUBSUB, t('deadletter-topic'), record('deadletter'));
      await server.start();
    }, 60_000);

    afterAll(async () => {
      await server?.stop().catch(() => undefined);
      await side?.close();
    });

    const publish = async (topic: string, data: unknown, raw = false) => {
      const res = await server.client.pubsub.publish(PUBSUB, t(topic), data as object, raw ? { metadata: { rawPayload: 'true' } } : {});
      expect(res.error).toBeUndefined();
    };

    it('a plain event arrives with the pub/sub name in its headers', async () => {
      await publish('test-topic', 'Hello, world!');
      await until(() => calls.plain.length === 1, () => calls);
      expect(calls.plain[0].data).toBe('Hello, world!');
      expect(calls.plain[0].headers.pubsubname).toBe(PUBSUB);
      if (proto === 'http') expect(calls.plain[0].headers['content-type']).toBe('application/cloudevents+json');
    });

    it('rawPayload subscriptions: CloudEvents arrive whole, raw messages as published (MQTT carries no content type)', async () => {
      await publish('test-topic-raw', 'Hello, world!');
      await publish('test-topic-raw', { message: 'Hello, world!' });
      await until(() => calls.raw.length === 2, () => calls.raw);
      expect(calls.raw.map((c) => (c.data as { data: unknown }).data).sort()).toEqual(['Hello, world!', { message: 'Hello, world!' }].sort());
      await publish('test-topic-raw', 'plain raw', true);
      await until(() => calls.raw.length === 3, () => calls.raw);
      expect(calls.raw[2].data).toBe('plain raw');
      await publish('test-topic-raw', { message: 'raw json' }, true);
      await until(() => calls.raw.length === 4, () => calls.raw);
      expect(calls.raw[3].data).toEqual({ message: 'raw json' });
    });

    it('bulk rawPayload: raw messages arrive as published, in order', async () => {
      await publish('bulk-subscribe-topic', { message: 'Message 1!' }, true);
      await publish('bulk-subscribe-topic', { message: 'Message 2!' }, true);
      await until(() => calls.bulkraw.length === 2, () => calls.bulkraw);
      expect(calls.bulkraw.map((c) => c.data)).toEqual([{ message: 'Message 1!' }, { message: 'Message 2!' }]);
    });

    it('a # subscription (myhome/groundfloor/#) gets a message two levels below', async () => {
      await publish('myhome/groundfloor/foo/bar', { message: 'Hello, world!' });
      await until(() => calls.hash.length === 1, () => calls);
      expect(calls.hash[0].data).toEqual({ message: 'Hello, world!' });
    });

    it('a + subscription (myhome/firstfloor/+/temperature) gets a message for one level, not for two', async () => {
      await publish('myhome/firstfloor/foo/temperature', { message: 'Hello, world!' });
      await publish('myhome/firstfloor/foo/bar/temperature', { message: 'not for me' });
      // a marker after it, from the same publisher: the broker keeps its order, so a wrong match
      // would be here by the time the marker is
      await publish('myhome/firstfloor/marker/temperature', { message: 'marker' });
      await until(() => calls.plus.some((c) => (c.data as { message?: string }).message === 'marker'), () => calls);
      expect(calls.plus.map((c) => c.data)).toEqual([{ message: 'Hello, world!' }, { message: 'marker' }]);
    });

    it('SUCCESS: taken once, not again; RETRY twice: offered three times; DROP: to the dead-letter topic', async () => {
      await publish('test-topic-status-callback', 'SUCCESS');
      await until(() => calls.status.length === 1, () => calls);
      // a second SUCCESS would show among the offers counted next
      expect(calls.status.map((c) => c.data)).toEqual(['SUCCESS']);
      await publish('test-topic-status-callback', 'TEST_RETRY_TWICE');
      await until(() => calls.status.length === 4, () => calls, 15_000);
      expect(calls.status.slice(1).map((c) => c.data)).toEqual(['TEST_RETRY_TWICE', 'TEST_RETRY_TWICE', 'TEST_RETRY_TWICE']);
      await publish('test-topic-status-callback', 'DROP');
      await until(() => calls.deadletter.length === 1, () => calls);
      expect(calls.status.at(-1)?.data).toBe('DROP');
      expect(calls.deadletter[0].data).toBe('DROP');
    }, 30_000);

    it('a publish to a topic with a wildcard is a 400 naming the problem, and the connection stays up', async () => {
      const r = await fetch(`${side.base}/v1.0/publish/${PUBSUB}/${t('myhome')}%2F%2B%2Fx`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { message: string }).message).toMatch(/wildcard/);
      await publish('test-topic', 'still here');
      await until(() => calls.plain.some((c) => c.data === 'still here'), () => calls.plain);
    });

    it('the binding: what `create` sends to its topic comes back to the app through the input side', async () => {
      await server.client.binding.send(BINDING, 'create', { hello: 'world' });
      await until(() => calls.binding.length === 1, () => calls);
      expect(calls.binding[0].data).toEqual({ hello: 'world' });
    });
  });
}
