/**
 * An input binding added, updated and removed in the resource files of a running sidecar, while
 * its events flow to the app and state requests are in flight: the added one starts delivering,
 * an update re-initialises it (new metadata) and moves delivery to the new instance's Read stream
 * while the old stream closes, a removal stops delivery — and no delivery nor request fails.
 * The same for an output binding while it is invoked. Both are pluggable components served over
 * their sockets (real gRPC servers).
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { ok, sidecarFor, startTestServer, tempDirs, writeComponents, type TempDirs } from '../pluggable/helpers.ts';
import { freePort } from '../services/net.ts';

type ReadCall = grpc.ServerDuplexStream<{ messageId: string; responseData: Buffer; responseError: { message: string } | null }, unknown>;

describe('hot reload: input and output bindings', () => {
  let dirs: TempDirs;
  let sidecar: Sidecar;
  let server: grpc.Server;
  let writer: grpc.Server;
  const writerInits: Record<string, string>[] = [];
  let app: Server;
  /** Metadata of every Init, in order. */
  const inits: Record<string, string>[] = [];
  /** Read streams open now, and every ack with the generation (metadata v) of its stream. */
  let openReads = 0;
  const acks: { gen: string; id: string; error?: string }[] = [];
  /** What the app got: the body of each POST to /ticks. */
  const delivered: { gen: string; n: number }[] = [];

  beforeAll(async () => {
    dirs = tempDirs();
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/ticks') return void res.writeHead(404).end();
        delivered.push(JSON.parse(body) as { gen: string; n: number });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    const appPort = await freePort();
    await new Promise<void>((r) => app.listen(appPort, '127.0.0.1', r));
    // each Read stream sends a tick every 10 ms, tagged with the metadata of the Init before it
    server = await startTestServer(join(dirs.sockets, 'ticker.sock'), {
      InputBinding: {
        Init: (call: grpc.ServerUnaryCall<{ metadata: { properties: Record<string, string> } }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          inits.push(call.request.metadata.properties);
          cb(null, {});
        },
        Ping: ok({}),
        Read: (call: ReadCall) => {
          const gen = inits.at(-1)?.v ?? '?';
          openReads++;
          let n = 0;
          const timer = setInterval(() => call.write({ data: Buffer.from(JSON.stringify({ gen, n: n++ })), metadata: {}, contentType: 'application/json', messageId: `${gen}-${n}` }), 10);
          const end = () => {
            if (!timer.hasRef()) return;
            clearInterval(timer);
            timer.unref();
            openReads--;
          };
          call.on('data', (ack) => acks.push({ gen, id: ack.messageId, error: ack.responseError?.message }));
          call.on('cancelled', end);
          call.on('end', () => {
            end();
            call.end();
          });
          call.on('error', end);
        },
      },
    });
    // an output binding answering with the metadata of the latest Init
    writer = await startTestServer(join(dirs.sockets, 'writer.sock'), {
      OutputBinding: {
        Init: (call: grpc.ServerUnaryCall<{ metadata: { properties: Record<string, string> } }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          writerInits.push(call.request.metadata.properties);
          cb(null, {});
        },
        Ping: ok({}),
        ListOperations: ok({ operations: ['create'] }),
        Invoke: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, { data: Buffer.from(`gen ${writerInits.at(-1)?.v}`), metadata: {}, contentType: 'text/plain' }),
      },
    });
    writeComponents(dirs.resources, [{ name: 'store', type: 'state.in-memory' }]);
    sidecar = await sidecarFor(dirs, 'hot-bindings', { appPort });
  });

  afterAll(async () => {
    await sidecar?.close();
    server?.forceShutdown();
    writer?.forceShutdown();
    app?.close();
    dirs?.cleanup();
  });

  /** State writes and reads on `store` until stop(); every status seen (0: no answer). */
  const traffic = () => {
    const base = `http://127.0.0.1:${sidecar.httpPort}`;
    let running = true;
    const statuses: number[] = [];
    const done = (async () => {
      for (let i = 0; running; i++) {
        try {
          const save = await fetch(`${base}/v1.0/state/store`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: `k${i % 5}`, value: i }]) });
          await save.arrayBuffer();
          statuses.push(save.status);
          const get = await fetch(`${base}/v1.0/state/store/k${i % 5}`);
          await get.arrayBuffer();
          statuses.push(get.status);
        } catch {
          statuses.push(0);
        }
      }
    })();
    return { statuses, stop: async () => ((running = false), await done, statuses) };
  };

  it('adds, updates and removes an input binding while events and requests are in flight; none fails', async () => {
    const t = traffic();
    const both = (v: string) => [{ name: 'store', type: 'state.in-memory' }, { name: 'ticks', type: 'bindings.ticker', metadata: { v } }];

    // add: events of generation 1 reach the app
    writeComponents(dirs.resources, both('1'));
    await vi.waitFor(() => expect(delivered.filter((d) => d.gen === '1').length).toBeGreaterThan(20), { timeout: 15_000 });
    expect(openReads).toBe(1);

    // update: Init again with the new metadata; delivery moves to the new stream, the old one closes
    writeComponents(dirs.resources, both('2'));
    await vi.waitFor(() => expect(delivered.filter((d) => d.gen === '2').length).toBeGreaterThan(20), { timeout: 15_000 });
    await vi.waitFor(() => expect(openReads).toBe(1), { timeout: 10_000 });
    expect(inits.map((i) => i.v)).toEqual(['1', '2']);
    // the old stream closed after its deliveries drained: none of it comes later (checked once the
    // removal below is over, a window longer than any delivery)
    const oneAfterUpdate = delivered.filter((d) => d.gen === '1').length;

    // remove: its stream closes and nothing more arrives
    writeComponents(dirs.resources, [{ name: 'store', type: 'state.in-memory' }]);
    await vi.waitFor(() => expect(sidecar.ctx.components.get('ticks')).toBeUndefined(), { timeout: 10_000 });
    await vi.waitFor(() => expect(openReads).toBe(0), { timeout: 10_000 });
    // drained before it closed: nothing was left to come
    const total = delivered.length;

    const statuses = await t.stop();
    expect(delivered.length).toBe(total);
    expect(delivered.filter((d) => d.gen === '1').length).toBe(oneAfterUpdate);
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200 && s !== 204)).toEqual([]);
    // every event the app answered was acked with its answer: no delivery failed across the swaps
    expect(acks.filter((a) => a.error)).toEqual([]);
    expect(acks.length).toBeGreaterThan(40);
    // each generation's events reached the app once each, none missing: 0…k. Each event is
    // delivered as it arrives, not after the one before it was answered (docs/pluggable-components.md),
    // so two close together may reach the app in either order
    for (const gen of ['1', '2']) {
      const ns = delivered.filter((d) => d.gen === gen).map((d) => d.n);
      const sorted = [...ns].sort((a, b) => a - b);
      expect(sorted).toEqual(sorted.map((_, i) => i));
    }
  }, 60_000);

  it('adds, updates and removes an output binding while it is invoked; no call fails, a removed one answers 4xx', async () => {
    const base = `http://127.0.0.1:${sidecar.httpPort}`;
    let running = true;
    const answers: { status: number; body: string }[] = [];
    const calls = (async () => {
      while (running) {
        try {
          const r = await fetch(`${base}/v1.0/bindings/out`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'create', data: 'x' }) });
          answers.push({ status: r.status, body: await r.text() });
        } catch {
          answers.push({ status: 0, body: '' });
        }
      }
    })();
    const out = (v: string) => [{ name: 'store', type: 'state.in-memory' }, { name: 'out', type: 'bindings.writer', metadata: { v } }];
    const seen = (body: string) => answers.filter((a) => a.body === body).length;
    try {
      writeComponents(dirs.resources, out('1'));
      await vi.waitFor(() => expect(seen('gen 1')).toBeGreaterThan(10), { timeout: 15_000 });
      writeComponents(dirs.resources, out('2'));
      await vi.waitFor(() => expect(seen('gen 2')).toBeGreaterThan(10), { timeout: 15_000 });
      expect(writerInits.map((i) => i.v)).toEqual(['1', '2']);
      writeComponents(dirs.resources, [{ name: 'store', type: 'state.in-memory' }]);
      await vi.waitFor(() => expect(sidecar.ctx.components.get('out')).toBeUndefined(), { timeout: 10_000 });
      const after = answers.length;
      await vi.waitFor(() => expect(answers.length).toBeGreaterThan(after + 3), { timeout: 10_000 });
    } finally {
      running = false;
      await calls;
    }
    // before it was loaded and after its removal: 4xx; while loaded: every call answered 200
    const first = answers.findIndex((a) => a.status === 200);
    const last = answers.findLastIndex((a) => a.status === 200);
    expect(answers.slice(first, last + 1).filter((a) => a.status !== 200)).toEqual([]);
    expect(answers.filter((a) => a.status === 0 || a.status >= 500)).toEqual([]);
    expect(answers.at(-1)!.status).toBeGreaterThanOrEqual(400);
  }, 60_000);
});
