/**
 * Subscriptions follow the resources while the sidecar runs: a Subscription file added later
 * opens (and is listed), a changed route takes effect, a removed one stops delivering.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SubscriptionManager } from '../../sidecar/src/pubsub/subscriptions.ts';
import { component, startApp, startPubSubSidecar, watchedInMemory, type PubSubSidecar, type TestApp } from './helpers.ts';

let app: TestApp;
let sc: PubSubSidecar;
const mem = watchedInMemory();
// the manager's looks at the resources (on a change, and once a second)
const looks = vi.spyOn(SubscriptionManager.prototype, 'reconcile');

beforeAll(async () => {
  app = await startApp();
  sc = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), { appId: 'hot', appPort: app.port, catalog: mem.catalog });
  await app.opened(sc.base);
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
});

const sub = (route: string) => `apiVersion: rt.io/v1alpha1\nkind: Subscription\nmetadata:\n  name: later\nspec:\n  pubsubname: mem\n  topic: later\n  route: ${route}\n`;
const publish = () => fetch(`${sc.base}/v1.0/publish/mem/later`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });

describe('hot updates of Subscription resources', () => {
  it('a Subscription added, changed and removed at run time', { timeout: 30_000 }, async () => {
    const file = join(sc.resources, 'later.yaml');
    writeFileSync(file, sub('/first'));
    await vi.waitFor(
      async () => {
        await publish();
        expect(app.deliveries.some((d) => d.path === '/first')).toBe(true);
      },
      { timeout: 10_000, interval: 200 },
    );
    writeFileSync(file, sub('/second'));
    await vi.waitFor(
      async () => {
        await publish();
        expect(app.deliveries.some((d) => d.path === '/second')).toBe(true);
      },
      { timeout: 10_000, interval: 200 },
    );
    rmSync(file);
    await vi.waitFor(
      async () => {
        const md = (await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { subscriptions: unknown[] };
        expect(md.subscriptions).toEqual([]);
      },
      { timeout: 10_000, interval: 200 },
    );
    // the manager looked again since (its look once a second): the removal held
    const seen = looks.mock.calls.length;
    await vi.waitFor(() => expect(looks.mock.calls.length).toBeGreaterThan(seen), { timeout: 5000, interval: 50 });
    expect(mem.open('later')).toBe(0);
    const before = app.deliveries.length;
    await publish(); // reaches no subscription: none is open on the component
    await mem.settled();
    expect(mem.open('later')).toBe(0);
    expect(app.deliveries).toHaveLength(before);
  });
});
