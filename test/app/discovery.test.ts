/**
 * App discovery (GET /rt/subscribe then /dapr/subscribe, /rt/config then /dapr/config): the
 * ecosystem's path counts whenever the rt path gives no declaration, not only when it answers 404.
 * Apps with a catch-all route (a fallback handler, a server mounted on `/`, an auth layer) answer
 * the rt path with 200 {}, 401 or text.
 */
import { createServer, type Server } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AppChannel } from '../../sidecar/src/app/channel.ts';
import { discoverConfig, discoverSubscriptions } from '../../sidecar/src/app/discovery.ts';
import type { SidecarOptions } from '../../sidecar/src/options.ts';
import { DEFAULT_OPTIONS } from '../../sidecar/src/sidecar.ts';

type Route = { status: number; body: string; type?: string };
const json = (v: unknown): Route => ({ status: 200, body: JSON.stringify(v), type: 'application/json' });
const SUB = { pubsubname: 'pubsub', topic: 't1', route: '/onmsg' };

const open: { server: Server; channel: AppChannel }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.channel.close();
    o.server.closeAllConnections();
    await new Promise((r) => o.server.close(r));
  }
});

/** An app answering `routes` by path and `otherwise` to every other path. */
async function appWith(routes: Record<string, Route>, otherwise: Route): Promise<AppChannel> {
  const server = createServer((req, res) => {
    const r = routes[req.url ?? ''] ?? otherwise;
    res.writeHead(r.status, { 'content-type': r.type ?? 'text/plain' }).end(r.body);
  });
  const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
  const channel = new AppChannel({ ...DEFAULT_OPTIONS, appId: 'discovery-test', appPort: port } as SidecarOptions, pino({ level: 'silent' }));
  open.push({ server, channel });
  return channel;
}

describe('app discovery falls back to the ecosystem paths', () => {
  const ecosystem = { '/dapr/subscribe': json([SUB]), '/dapr/config': json({ entities: ['Cart'] }) };

  it.each([
    ['200 {} to anything', json({})],
    ['200 [] to anything', json([])],
    ['401 to anything', { status: 401, body: 'who are you' }],
    ['200 text to anything', { status: 200, body: '<html>app</html>', type: 'text/html' }],
    ['404 to anything', { status: 404, body: '' }],
  ])('an app answering %s still has its /dapr/subscribe and /dapr/config read', async (_what, otherwise) => {
    const app = await appWith(ecosystem, otherwise);
    expect(await discoverSubscriptions(app)).toEqual([expect.objectContaining({ pubsubname: 'pubsub', topic: 't1' })]);
    expect((await discoverConfig(app)).entities).toEqual(['Cart']);
  });

  it('the rt paths win when they declare something', async () => {
    const app = await appWith({ ...ecosystem, '/rt/subscribe': json([{ ...SUB, topic: 'from-rt' }]), '/rt/config': json({ entities: ['Order'] }) }, { status: 404, body: '' });
    expect((await discoverSubscriptions(app)).map((s) => s.topic)).toEqual(['from-rt']);
    expect((await discoverConfig(app)).entities).toEqual(['Order']);
  });

  it('an app that declares nothing anywhere has no subscriptions and no actor types', async () => {
    const app = await appWith({}, json({}));
    expect(await discoverSubscriptions(app)).toEqual([]);
    expect((await discoverConfig(app)).entities).toEqual([]);
  });
});
