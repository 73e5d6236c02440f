/**
 * AppChannel.post, the call every HTTP job trigger makes: the app's status comes back, an app
 * that does not answer is an AppUnavailableError naming the call, the app's token goes along, and
 * --app-max-concurrency holds the calls past the limit until a slot frees (also when calls fail).
 * The app is a real node:http server on loopback.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppChannel, AppUnavailableError } from '../../sidecar/src/app/channel.ts';
import type { SidecarOptions } from '../../sidecar/src/options.ts';
import { DEFAULT_OPTIONS } from '../../sidecar/src/sidecar.ts';
import { freePort } from '../services/net.ts';

const silent = pino({ level: 'silent' });
const channels: AppChannel[] = [];
let server: Server;
let port = 0;
/** Requests the app holds unanswered, and what each one saw. */
const held: ServerResponse[] = [];
const seen: { path: string; token?: string; body: string }[] = [];

function channel(extra: Partial<SidecarOptions> = {}, appPort = port): AppChannel {
  const c = new AppChannel({ ...DEFAULT_OPTIONS, appId: 'post-test', appPort, appChannelAddress: '127.0.0.1', ...extra } as SidecarOptions, silent);
  channels.push(c);
  return c;
}

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', token: req.headers['rt-api-token'] as string | undefined, body });
      if (req.url?.startsWith('/hold')) held.push(res);
      else if (req.url?.startsWith('/reset')) req.socket.destroy();
      else res.writeHead(req.url === '/missing' ? 404 : 201).end('ignored body');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const r of held) r.end();
  for (const c of channels) await c.close();
  await new Promise((r) => server.close(r));
});

describe('AppChannel.post', () => {
  it("answers with the app's status and sends the body, headers and the app token", async () => {
    const c = channel({ appApiToken: 'secret-token' });
    expect(await c.post('/job/a', '{"x":1}', { 'content-type': 'application/json' })).toBe(201);
    expect(await c.post('/missing', '', {})).toBe(404);
    expect(seen.find((s) => s.path === '/job/a')).toEqual({ path: '/job/a', token: 'secret-token', body: '{"x":1}' });
  });

  it('fails with an AppUnavailableError naming the call when nothing listens or the app drops it', async () => {
    const down = channel({}, await freePort());
    const e = await down.post('/job/b', '', {}).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AppUnavailableError);
    expect((e as Error).message).toMatch(/did not answer POST \/job\/b/);
    const dropped = await channel().post('/reset', '', {}).catch((x: unknown) => x);
    expect(dropped).toBeInstanceOf(AppUnavailableError);
  });

  it('holds calls past --app-max-concurrency until a slot frees, also after a failed call', async () => {
    const c = channel({ appMaxConcurrency: 1 });
    await expect(c.post('/reset', '', {})).rejects.toBeInstanceOf(AppUnavailableError); // its slot is freed
    const first = c.post('/hold-1', '', {});
    const second = c.post('/job/after-hold', '', {});
    await waitUntil(() => held.length === 1);
    // the second call waits in the channel for the only slot, which the first holds: it was not sent
    expect((c as unknown as { waiting: unknown[] }).waiting).toHaveLength(1);
    expect(seen.some((s) => s.path === '/job/after-hold')).toBe(false);
    held[0].writeHead(200).end();
    expect(await first).toBe(200);
    expect(await second).toBe(201);
  });
});

async function waitUntil(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
