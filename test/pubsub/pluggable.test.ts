/**
 * A pluggable pub/sub component through the pub/sub API: the example component
 * (examples/pluggable-state, now also serving dapr.proto.components.v1.PubSub) as its own
 * process on a Unix socket; publish over HTTP, a declarative subscription delivers to a real
 * app, and a message the app does not take is given back to the component (ackError), which
 * sends it again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExample, tempDirs, type ExampleProcess, type TempDirs } from '../pluggable/helpers.ts';
import { component, startApp, startPubSubSidecar, type PubSubSidecar, type TestApp } from './helpers.ts';

let dirs: TempDirs;
let example: ExampleProcess;
let app: TestApp;
let sc: PubSubSidecar;

beforeAll(async () => {
  dirs = tempDirs();
  example = await startExample(dirs.sockets, 'broker');
  app = await startApp();
  const sub = `apiVersion: rt.io/v2alpha1\nkind: Subscription\nmetadata:\n  name: s\nspec:\n  pubsubname: plug\n  topic: orders\n  routes:\n    rules:\n      - match: event.data.vip == true\n        path: /vip\n    default: /orders\n`;
  sc = await startPubSubSidecar([component('plug', 'pubsub.broker'), sub].join('---\n'), { appId: 'plugged', appPort: app.port, componentsSocketsFolder: dirs.sockets });
  await app.opened(sc.base, ['orders']);
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
  await example?.stop();
  dirs?.cleanup();
});

describe('pubsub.<socket> through the pub/sub API', () => {
  it('publishes through the component and delivers to the routes', async () => {
    const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { components: { name: string; type: string }[] };
    expect(md.components).toContainEqual(expect.objectContaining({ name: 'plug', type: 'pubsub.broker' }));
    for (const body of [{ vip: true }, { vip: false }]) {
      const r = await fetch(`${sc.base}/v1.0/publish/plug/orders`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(204);
    }
    const ds = await app.waitFor((x) => x.length === 2);
    expect(ds.map((d) => d.path).sort()).toEqual(['/orders', '/vip']);
    expect(ds[0].body).toMatchObject({ source: 'plugged', pubsubname: 'plug', topic: 'orders' });
  });

  it('a message the app keeps refusing goes back to the component, which sends it again', async () => {
    app.deliveries.length = 0;
    let n = 0;
    // 4 attempts (first + 3 retries) fail, then the component's redelivery is taken
    app.answer = () => (++n <= 4 ? { status: 503 } : { status: 200 });
    await fetch(`${sc.base}/v1.0/publish/plug/orders`, { method: 'POST', body: JSON.stringify({ again: true }), headers: { 'content-type': 'application/json' } });
    const ds = await app.waitFor((x) => x.length === 5, 15_000);
    expect(new Set(ds.map((d) => d.body.id)).size).toBe(1);
    expect(ds[4].at - ds[3].at).toBeGreaterThanOrEqual(900);
  });
});
