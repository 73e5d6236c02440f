/**
 * Span links of bulk pub/sub, as a real Jaeger receives them (OTLP links become FOLLOWS_FROM
 * references in its JSON): a bulk subscribe batch's CONSUMER span is the child of its first
 * entry's context and links to each other entry's (the PRODUCER span of each publish, three
 * traces), and a bulk publish's PRODUCER span links to
 * the context each CloudEvent entry brought of its own.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { normalTraceId, type RawTrace } from '../services/jaeger/query.ts';
import { eventually, startTracedSidecar, tracingFolder } from './harness.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `bulk-${process.pid}-${Date.now().toString(36)}`;
const pad = (id: string, w: number) => id.toLowerCase().padStart(w, '0');
/** "00-<trace>-<span>-01" → "<trace>-<span>". */
const context = (traceparent: string) => traceparent.split('-').slice(1, 3).join('-');

describe.skipIf(!available)('span links of bulk pub/sub, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let remove: (() => Promise<void>) | undefined;
  let sidecar: Sidecar | undefined;
  let app: Server | undefined;
  /** The entries of each batch the app got (their CloudEvents' traceparent). */
  const batches: string[][] = [];

  beforeAll(async () => {
    jaeger = await startJaeger();
    let dir: string;
    ({ dir, remove } = await tracingFolder('rt-bulk-tracing-', jaeger, [{ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'bus' }, spec: { type: 'pubsub.in-memory', version: 'v1' } }]));
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        if (req.url === '/dapr/subscribe') {
          res.end(JSON.stringify([{ pubsubname: 'bus', topic: 'orders', route: '/batch', bulkSubscribe: { enabled: true, maxMessagesCount: 3, maxAwaitDurationMs: 3000 } }]));
        } else if (req.url === '/batch') {
          const entries = (JSON.parse(body) as { entries: { entryId: string; event: { traceparent: string } }[] }).entries;
          batches.push(entries.map((e) => e.event.traceparent));
          res.end(JSON.stringify({ statuses: entries.map((e) => ({ entryId: e.entryId, status: 'SUCCESS' })) }));
        } else res.writeHead(404).end('{}');
      });
    });
    await new Promise<void>((r) => app!.listen(0, '127.0.0.1', r));
    sidecar = await startTracedSidecar(dir, APP, { port: (app.address() as { port: number }).port, protocol: 'http' });
  }, 120_000);

  afterAll(async () => {
    await sidecar?.close();
    await new Promise((r) => (app ? app.close(r) : r(undefined)));
    await jaeger?.stop();
    await remove?.();
  });

  /** One trace as Jaeger's JSON has it (links included), once it holds `min` spans. */
  async function rawTrace(traceId: string, min: number): Promise<RawTrace> {
    await jaeger.waitForTrace(traceId, min, 20_000);
    const answer = (await (await fetch(`${jaeger.queryUrl}/api/traces/${normalTraceId(traceId)}`)).json()) as { data: RawTrace[] };
    return answer.data[0];
  }
  const follows = (s: RawTrace['spans'][number]) => (s.references ?? []).filter((r) => r.refType === 'FOLLOWS_FROM').map((r) => `${pad(r.traceID, 32)}-${pad(r.spanID, 16)}`);

  it("a bulk subscribe batch's CONSUMER span: the first entry's child, linked to each other entry's context", async () => {
    const traces = [hex(16), hex(16), hex(16)];
    for (const [i, t] of traces.entries()) {
      const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/publish/bus/orders`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: `00-${t}-${hex(8)}-01` }, body: JSON.stringify({ n: i }) });
      expect(res.status).toBe(204);
    }
    const batch = await eventually(() => (batches.flat().length >= 3 ? batches.flat() : undefined), 'the batch delivery', 20_000);
    // each entry carries its publish's PRODUCER span: traceparent 00-<trace>-<producer span>-01
    const entryContexts = batch.map(context);
    expect(entryContexts.map((c) => c.split('-')[0]).sort()).toEqual([...traces].sort());
    // the batch's span lives in its first entry's trace, under that entry's context
    const first = batch[0].split('-');
    const trace = await rawTrace(first[1], 3);
    const consumer = trace.spans.find((s) => s.operationName === 'process orders' && s.tags?.some((t) => t.key === 'rt.operation' && t.value === 'deliver.bulk'));
    expect(consumer).toBeDefined();
    expect(consumer!.references?.find((r) => r.refType === 'CHILD_OF')?.spanID.padStart(16, '0')).toBe(first[2]);
    // a link per other entry of that batch (all three, unless the in-memory broker split them)
    expect(batches[0][0]).toBe(batch[0]);
    expect(follows(consumer!).sort()).toEqual(batches[0].slice(1).map(context).sort());
    expect(follows(consumer!).length).toBeGreaterThan(0);
  }, 60_000);

  it("a bulk publish's PRODUCER span links to the context each CloudEvent entry brought", async () => {
    const traceId = hex(16);
    const own = [`${hex(16)}-${hex(8)}`, `${hex(16)}-${hex(8)}`];
    const entries = [
      ...own.map((c, i) => ({ entryId: `ce-${i}`, event: { specversion: '1.0', id: `e${i}`, source: 't', type: 't', traceparent: `00-${c}-01`, data: { i } }, contentType: 'application/cloudevents+json' })),
      { entryId: 'plain', event: { n: 1 }, contentType: 'application/json' },
    ];
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0-alpha1/publish/bulk/bus/elsewhere`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-01` }, body: JSON.stringify(entries) });
    expect(res.status).toBe(204);
    const trace = await rawTrace(traceId, 2);
    const producer = trace.spans.find((s) => s.operationName === 'publish elsewhere');
    expect(producer).toBeDefined();
    expect(follows(producer!).sort()).toEqual([...own].sort());
  }, 60_000);
});
