/**
 * A sidecar without --placement-host-address serves its actor types itself (LocalPlacement) and
 * never loads the placement client, its gRPC proto, nor the calls between hosts; with one it
 * loads them. Each host is its own process (remote-host.ts) recording every module it loads.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlacement, type RunningPlacement } from '../placement/harness.ts';
import { startHost, type Host } from './hosts.ts';

const CONFIG = { entities: ['Counter'] };
const REMOTE_ONLY = [/\/placement\/src\//, /\/actors\/placement\/remote\.ts$/, /\/actors\/peer-calls\.ts$/];

let dir: string;
let placement: RunningPlacement;
const hosts: Host[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-lazy-'));
  await mkdir(join(dir, 'resources'));
  placement = await startPlacement();
});

afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  await placement?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 30_000);

const start = async (name: string, addresses?: string[]) => {
  const h = await startHost(name, { appId: `lazy-${randomUUID().slice(0, 8)}`, placement: addresses, resourcesPath: join(dir, 'resources'), dataDir: join(dir, `data-${name}`), config: CONFIG, modules: true });
  hosts.push(h);
  return h;
};

/** An actor call that succeeds once the host knows its types (and, with placement, has its table). */
async function echo(h: Host): Promise<Response> {
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await fetch(`${h.base}/v1.0/actors/Counter/one/method/echo`, { method: 'PUT', body: 'hi', headers: { 'content-type': 'text/plain' } });
    if (r.status === 200 || Date.now() > end) return r;
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe('placement is loaded only when an address is given', () => {
  it('without one: actors are served locally and no placement code is loaded', async () => {
    const h = await start('local');
    const r = await echo(h);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('hi');
    const loaded = await h.modules();
    expect(loaded.some((u) => u.endsWith('/actors/placement/local.ts'))).toBe(true);
    for (const re of REMOTE_ONLY) expect(loaded.filter((u) => re.test(u)), String(re)).toEqual([]);
  }, 90_000);

  it('with one: the placement client and the calls between hosts are loaded and used', async () => {
    const h = await start('remote', [placement.address]);
    const r = await echo(h);
    expect(r.status).toBe(200);
    const loaded = await h.modules();
    for (const re of REMOTE_ONLY) expect(loaded.some((u) => re.test(u)), String(re)).toBe(true);
    expect(placement.service.snapshot().hosts).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
