/**
 * A pluggable pub/sub component: discovered and initialised like the others, publishing and
 * pulling messages with acks through the adapter (the pub/sub API over it:
 * test/pubsub/pluggable.test.ts).
 */
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import type { PluggablePubSub } from '../../sidecar/src/pluggable/pubsub.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { ok, sidecarFor, startTestServer, tempDirs, writeComponents, type TempDirs } from './helpers.ts';

describe('pluggable pub/sub', () => {
  let dirs: TempDirs;
  let server: grpc.Server;
  let sidecar: Sidecar;

  afterAll(async () => {
    await sidecar?.close();
    server?.forceShutdown();
    dirs?.cleanup();
  });

  it('is registered as pubsub.<socket>, publishes, and pulls messages with acks', async () => {
    dirs = tempDirs();
    const published: { topic: string; pubsubName: string; data: string }[] = [];
    const acks: { id: string; error?: string }[] = [];
    server = await startTestServer(join(dirs.sockets, 'broker.sock'), {
      PubSub: {
        Init: ok({}),
        Features: ok({ features: ['SUBSCRIBE_WILDCARDS'] }),
        Ping: ok({}),
        Publish: (c: grpc.ServerUnaryCall<{ topic: string; pubsubName: string; data: Buffer }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          published.push({ topic: c.request.topic, pubsubName: c.request.pubsubName, data: c.request.data.toString() });
          cb(null, {});
        },
        BulkPublish: ok({ failedEntries: [{ entryId: 'e2', error: 'too big' }] }),
        PullMessages: (call: grpc.ServerDuplexStream<{ topic: { name: string } | null; ackMessageId: string; ackError: { message: string } | null }, unknown>) => {
          call.on('data', (req) => {
            if (req.topic) {
              call.write({ data: Buffer.from('good'), topicName: req.topic.name, metadata: {}, contentType: 'text/plain', id: 'm1' });
              call.write({ data: Buffer.from('bad'), topicName: req.topic.name, metadata: {}, contentType: 'text/plain', id: 'm2' });
            } else acks.push({ id: req.ackMessageId, error: req.ackError?.message });
          });
        },
      },
    });
    writeComponents(dirs.resources, [{ name: 'events', type: 'pubsub.broker' }]);
    sidecar = await sidecarFor(dirs);
    expect(sidecar.ctx.components.catalog.get('pubsub.broker')?.pluggable).toBe(true);
    // the contract shows capabilities for state stores and bindings only
    expect(sidecar.ctx.components.info()).toContainEqual({ name: 'events', type: 'pubsub.broker', version: 'v1', capabilities: [] });
    const ps = sidecar.ctx.components.get('events')!.instance as PluggablePubSub;
    expect(ps.features()).toEqual(['SUBSCRIBE_WILDCARDS']);
    await ps.publish('orders', Buffer.from('{"id":1}'));
    expect(published).toEqual([{ topic: 'orders', pubsubName: 'events', data: '{"id":1}' }]);
    expect(await ps.bulkPublish('orders', [{ entryId: 'e1', event: Buffer.from('a') }, { entryId: 'e2', event: Buffer.from('b') }])).toEqual([
      { entryId: 'e2', error: 'too big' },
    ]);

    const got: string[] = [];
    const sub = ps.subscribe('orders', {}, async (m) => {
      got.push(`${m.topic}:${Buffer.from(m.data).toString()}`);
      if (Buffer.from(m.data).toString() === 'bad') throw new Error('cannot handle');
    });
    for (let i = 0; i < 100 && acks.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    sub.close();
    expect(got).toEqual(['orders:good', 'orders:bad']);
    expect(acks).toEqual([{ id: 'm1' }, { id: 'm2', error: 'cannot handle' }]);
  });
});
