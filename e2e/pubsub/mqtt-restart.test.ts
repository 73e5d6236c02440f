/**
 * A broker restart under a running sidecar and app, through the HTTP API and the app channel:
 * pubsub.mqtt3 with a persistent session, an app that refuses every message at first, the broker
 * stopped (SIGTERM: it saves its sessions) and started again on the same port, publishes made
 * while it is down. Every QoS 1 message reaches the app: the refused ones come again from the
 * broker after the reconnect, the publishes wait for the connection and go out then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { mosquittoMissing, startMosquitto, type Mosquitto } from '../../test/services/mosquitto.ts';
import { component, startApp, startPubSubSidecar, type PubSubSidecar, type TestApp } from '../../test/pubsub/helpers.ts';

const missing = mosquittoMissing();
const available = requireService('Mosquitto', !missing, missing ?? '');

describe.skipIf(!available)('pubsub.mqtt3 across a broker restart, through a sidecar and its app', () => {
  let broker: Mosquitto;
  let app: TestApp;
  let side: PubSubSidecar;
  const topic = `rt-e2e/restart/${process.pid}`;

  beforeAll(async () => {
    broker = await startMosquitto();
    app = await startApp();
    app.subscribe = [{ pubsubname: 'mqtt', topic, route: '/orders' }];
    side = await startPubSubSidecar(component('mqtt', 'pubsub.mqtt3', { url: broker.url, consumerID: `restart-${process.pid}`, cleanSession: 'false' }), { appId: 'restart', appPort: app.port });
    await app.opened(side.base);
  }, 30_000);

  afterAll(async () => {
    await side?.close();
    await app?.close();
    await broker?.close();
  });

  const publish = async (n: string) => {
    const r = await fetch(`${side.base}/v1.0/publish/mqtt/${encodeURIComponent(topic)}`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(204);
  };
  const taken = () => new Set(app.deliveries.filter((d) => d.body.taken === true).map((d) => (d.body.data as { n: string }).n));

  it('no QoS 1 message is lost: the refused ones come again after the restart, publishes made while it was down arrive', async () => {
    let refuse = true;
    app.answer = (d) => {
      if (refuse) return { status: 500 };
      d.body.taken = true;
      return { status: 200 };
    };
    for (let i = 0; i < 10; i++) await publish(`before-${i}`);
    await app.waitFor((ds) => new Set(ds.map((d) => (d.body.data as { n: string }).n)).size === 10);
    await broker.stop();
    refuse = false;
    const during = Array.from({ length: 10 }, (_, i) => publish(`during-${i}`));
    await broker.start();
    await Promise.all(during);
    const want = [...Array.from({ length: 10 }, (_, i) => `before-${i}`), ...Array.from({ length: 10 }, (_, i) => `during-${i}`)].sort();
    await app.waitFor(() => want.every((w) => taken().has(w)), 30_000);
    expect([...taken()].sort()).toEqual(want);
  }, 60_000);
});
