/**
 * Pub/sub delivery as the @dapr/dapr DaprServer reads it, over HTTP and over gRPC, on
 * pubsub.in-memory: the handler gets the pub/sub's name in its headers (`pubsubname`); a
 * rawPayload subscription gets the bytes as published (a CloudEvent that wraps them over HTTP,
 * which the SDK unwraps), and a CloudEvent published to it arrives whole, its data the first
 * value; a bulk rawPayload subscription gets each entry's bytes the same way; and a message
 * published as soon as the app has started reaches it (the sidecar has subscribed by then).
 */
import { DaprServer } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { daprGrpcServer, silentDaprLogger } from '../../test/services/dapr-server.ts';
import { freePort } from '../../test/services/net.ts';
import { component, startPubSubSidecar, type PubSubSidecar } from '../../test/pubsub/helpers.ts';

type Proto = 'http' | 'grpc';
interface Call {
  data: unknown;
  headers: Record<string, string>;
}

interface Pair {
  server: DaprServer;
  side: PubSubSidecar;
  calls: Record<string, Call[]>;
  close(): Promise<void>;
}

/** A sidecar with pubsub.in-memory and a started DaprServer app; `register` subscribes before the start. */
async function startPair(proto: Proto, appId: string, register: (server: DaprServer, record: (topic: string) => (data: unknown, headers: unknown) => Promise<void>) => Promise<void>): Promise<Pair> {
  const appPort = await freePort();
  const side = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), { appId, appPort, appProtocol: proto });
  const server =
    proto === 'grpc'
      ? daprGrpcServer(appPort, side.sidecar.grpcPort)
      : new DaprServer({ serverHost: '127.0.0.1', serverPort: String(appPort), clientOptions: { daprHost: '127.0.0.1', daprPort: String(side.sidecar.httpPort), logger: silentDaprLogger }, logger: silentDaprLogger });
  const calls: Record<string, Call[]> = {};
  const record = (topic: string) => {
    calls[topic] = [];
    return async (data: unknown, headers: unknown) => {
      calls[topic].push({ data, headers: { ...(headers as Record<string, string>) } });
    };
  };
  await register(server, record);
  await server.start();
  return {
    server,
    side,
    calls,
    close: async () => {
      await server.stop().catch(() => undefined);
      await side.close();
    },
  };
}

async function until(check: () => boolean, what: () => string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`condition not met in time; got ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const proto of ['http', 'grpc'] as const) {
  describe(`a DaprServer app over ${proto}`, () => {
    let pair: Pair;
    const got = (topic: string) => pair.calls[topic];
    const waitFor = (topic: string, n: number) => until(() => got(topic).length >= n, () => JSON.stringify(pair.calls));
    const publish = async (topic: string, data: object | string, raw = false) => {
      const res = await pair.server.client.pubsub.publish('mem', topic, data, raw ? { metadata: { rawPayload: 'true' } } : {});
      expect(res.error).toBeUndefined();
    };

    beforeAll(async () => {
      pair = await startPair(proto, `sdk-${proto}`, async (server, record) => {
        await server.pubsub.subscribe('mem', 'plain', record('plain'));
        await server.pubsub.subscribe('mem', 'raw', record('raw'), 'raw', { rawPayload: true });
        await server.pubsub.subscribeBulk('mem', 'bulkraw', record('bulkraw'), { maxMessagesCount: 2, maxAwaitDurationMs: 500, metadata: { rawPayload: true } });
      });
    }, 30_000);

    afterAll(async () => {
      await pair?.close();
    });

    it('the handler gets the pub/sub name in the pubsubname header', async () => {
      await publish('plain', 'Hello, world!');
      await waitFor('plain', 1);
      expect(got('plain')[0].data).toBe('Hello, world!');
      expect(got('plain')[0].headers.pubsubname).toBe('mem');
      if (proto === 'http') expect(got('plain')[0].headers['content-type']).toBe('application/cloudevents+json');
    });

    it('rawPayload: a message published raw arrives as published; a CloudEvent arrives whole, its data the first value', async () => {
      await publish('raw', { message: 'as is' }, true);
      await waitFor('raw', 1);
      expect(got('raw')[0].data).toEqual({ message: 'as is' });
      await publish('raw', 'Hello, world!');
      await waitFor('raw', 2);
      const ce = got('raw')[1].data as Record<string, unknown>;
      expect(ce).toMatchObject({ data: 'Hello, world!', topic: 'raw', pubsubname: 'mem', specversion: '1.0' });
      expect(Object.values(ce)[0]).toBe('Hello, world!');
      expect(got('raw')[1].headers.pubsubname).toBe('mem');
    });

    it('bulk rawPayload: each entry arrives as published; a CloudEvent arrives whole, its data the first value', async () => {
      await publish('bulkraw', { message: 'Message 1!' }, true);
      await publish('bulkraw', { message: 'Message 2!' }, true);
      await waitFor('bulkraw', 2);
      expect(got('bulkraw').map((c) => c.data)).toEqual([{ message: 'Message 1!' }, { message: 'Message 2!' }]);
      await publish('bulkraw', { message: 'Message 3!' });
      await publish('bulkraw', { message: 'Message 4!' });
      await waitFor('bulkraw', 4);
      expect(got('bulkraw').slice(2).map((c) => Object.values(c.data as object)[0])).toEqual([{ message: 'Message 3!' }, { message: 'Message 4!' }]);
    });
  });

  describe(`a DaprServer app over ${proto}, published to as soon as it started`, () => {
    it('gets the message, each of 3 times (the sidecar has subscribed before the publish goes out)', async () => {
      for (let i = 0; i < 3; i++) {
        const pair = await startPair(proto, `sdk-ready-${proto}-${i}`, async (server, record) => {
          await server.pubsub.subscribe('mem', 'ready', record('ready'));
        });
        try {
          const res = await pair.server.client.pubsub.publish('mem', 'ready', { n: i });
          expect(res.error).toBeUndefined();
          await until(() => pair.calls.ready.length === 1, () => JSON.stringify(pair.calls), 5000);
          expect(pair.calls.ready[0].data).toEqual({ n: i });
        } finally {
          await pair.close();
        }
      }
    }, 60_000);
  });
}
