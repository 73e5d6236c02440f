/**
 * Ready means subscribed, on pubsub.in-memory (which keeps nothing for subscriptions that come
 * later): a publish sent as soon as /v1.0/healthz answers reaches the app's DECLARATIVE and
 * PROGRAMMATIC subscriptions, because publishes wait until they are open; the metadata lists a
 * subscription only once it is open; an app that never listens holds publishes for a bounded time.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { HOLD_LIMIT_MS } from '../../sidecar/src/pubsub/gate.ts';
import { freePort } from '../services/net.ts';
import { component, startApp, startPubSubSidecar, subscription, type PubSubSidecar, type TestApp } from './helpers.ts';

const RESOURCES = [component('mem', 'pubsub.in-memory'), subscription('decl', 'decl', '/decl')].join('---\n');
const PROGRAMMATIC = [{ pubsubname: 'mem', topic: 'prog', route: '/prog' }];

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await r.close();
});

async function sidecar(appId: string, appPort: number): Promise<PubSubSidecar> {
  const sc = await startPubSubSidecar(RESOURCES, { appId, appPort });
  running.push(sc);
  return sc;
}

async function app(port?: number): Promise<TestApp> {
  const a = await startApp(port);
  a.subscribe = PROGRAMMATIC;
  running.push(a);
  return a;
}

async function healthy(sc: PubSubSidecar): Promise<void> {
  const end = Date.now() + 10_000;
  while ((await fetch(`${sc.base}/v1.0/healthz`)).status !== 204) {
    if (Date.now() > end) throw new Error('/v1.0/healthz never answered 204');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const publish = (sc: PubSubSidecar, topic: string, n: number) => fetch(`${sc.base}/v1.0/publish/mem/${topic}`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });

async function subscriptions(sc: PubSubSidecar): Promise<{ topic: string; type: string }[]> {
  return ((await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: { topic: string; type: string }[] }).subscriptions;
}

describe('ready means subscribed', () => {
  it('start, then publish as soon as healthz answers: 50 times, no message is lost', async () => {
    for (let i = 0; i < 50; i++) {
      const a = await app();
      const sc = await sidecar(`ready-${i}`, a.port);
      await healthy(sc);
      const res = await Promise.all([publish(sc, 'decl', i), publish(sc, 'prog', i)]);
      expect(res.map((r) => r.status)).toEqual([204, 204]);
      const ds = await a.waitFor((x) => x.length === 2, 5000);
      expect(ds.map((d) => `${d.path} ${JSON.stringify(d.body.data)}`).sort()).toEqual([`/decl {"n":${i}}`, `/prog {"n":${i}}`]);
      for (const r of running.splice(0).reverse()) await r.close();
    }
  }, 180_000);

  it('before the app listens no subscription is listed and a publish waits; once it listens, both are open and the message arrives', async () => {
    const port = await freePort();
    const sc = await sidecar('late', port);
    await healthy(sc);
    expect(await subscriptions(sc)).toEqual([]);
    const pending = publish(sc, 'decl', 1);
    const a = await app(port);
    expect((await pending).status).toBe(204);
    const [d] = await a.waitFor((x) => x.length === 1, 5000);
    expect(d.path).toBe('/decl');
    expect((await subscriptions(sc)).map((s) => `${s.topic} ${s.type}`)).toEqual(['decl DECLARATIVE', 'prog PROGRAMMATIC']);
  });

  it('an app that never listens holds publishes no longer than the limit, and later ones not at all', async () => {
    const sc = await sidecar('never', await freePort());
    const t0 = Date.now();
    expect((await publish(sc, 'decl', 1)).status).toBe(204);
    // held until the limit, counted from the sidecar's start (which took some of it)
    expect(Date.now() - t0).toBeGreaterThan(HOLD_LIMIT_MS / 2);
    expect(Date.now() - t0).toBeLessThan(HOLD_LIMIT_MS + 2000);
    const t1 = Date.now();
    expect((await publish(sc, 'decl', 2)).status).toBe(204);
    expect(Date.now() - t1).toBeLessThan(1000);
  }, 20_000);

  it('a publish still waiting when the sidecar stops goes on, and does not hold the stop', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
    const sc = await startPubSubSidecar(RESOURCES, { appId: 'stopping', appPort: await freePort(), logger });
    const pending = publish(sc, 'decl', 1);
    const end = Date.now() + 5000;
    while (!lines.some((l) => l.includes('a publish waits')) && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(lines.some((l) => l.includes('a publish waits'))).toBe(true);
    const t0 = Date.now();
    await sc.close();
    expect(Date.now() - t0).toBeLessThan(HOLD_LIMIT_MS / 2);
    expect((await pending).status).toBe(204);
  });

  it('bad input is refused at once while the subscriptions are not open yet', async () => {
    const sc = await sidecar('early', await freePort());
    const t0 = Date.now();
    const res = await fetch(`${sc.base}/v1.0/publish/mem/decl?metadata.ttlInSeconds=soon`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    expect((await fetch(`${sc.base}/v1.0/publish/nope/decl`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect(Date.now() - t0).toBeLessThan(HOLD_LIMIT_MS / 2);
  });
});
