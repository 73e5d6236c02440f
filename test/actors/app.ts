/**
 * An app hosting actors for the actor suites: a plain node:http server that answers the
 * sidecar's actor calls as an SDK's actor host does (GET /dapr/config, PUT .../method/<m>,
 * .../method/timer/<name>, .../method/remind/<name>, DELETE /actors/<type>/<id>) and keeps a
 * log of what it was asked, so a test can check turns, timers, reminders and deactivations.
 *
 * Methods of every type:
 *   echo         answers the body it got
 *   slow         waits 30 ms; counts calls of one actor that overlap
 *   count        reads "n" from the actor's state through the sidecar, adds 1, saves it back
 *   recurse      body {"n": k}: calls itself through the sidecar k more times, passing the
 *                reentrancy id it got (Dapr-Reentrancy-Id), and answers the depth reached
 *   call         body {"type", "id", "method", "body"}: calls that actor through the sidecar,
 *                passing the reentrancy id it got, and answers with that call's status and body
 *   sleep        body {"ms": t}: answers {"slept": t} after t ms
 *   fail         answers 500
 *   hang         never answers
 * Reminders are logged and answered 200, those whose name starts with "fail" 500. A DELETE
 * (deactivation) is answered after `deactivateDelayMs` of the config when it has one.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { redisClient } from '../configuration/helpers.ts';
import type { RedisTarget } from '../services/redis.ts';

/** Removes an app's actor state (keys `<appId>||…`) from the test Redis database after a suite. */
export async function dropActorKeys(redis: RedisTarget, db: number, appId: string): Promise<void> {
  const r = await redisClient(redis, db);
  try {
    const keys = await r.keys(`${appId}||*`);
    if (keys.length) await r.del(...keys);
  } finally {
    r.disconnect();
  }
}

export interface ActorAppLog {
  /** `at`: when the call reached the app (ms since epoch); `done`: when it answered. */
  calls: { type: string; id: string; method: string; reentrancyId?: string; at: number; done?: number }[];
  timers: { type: string; id: string; name: string; body: unknown; at: number }[];
  reminders: { type: string; id: string; name: string; body: unknown; at: number }[];
  /** `at`: when the DELETE came; `done`: when the app answered it (the activation's end). */
  deactivated: { type: string; id: string; at: number; done?: number }[];
  overlaps: number;
  /** The most calls in the app at once, over all actors (reset it to measure a stretch). */
  maxInFlight: number;
}

export interface ActorTestApp {
  port: number;
  log: ActorAppLog;
  /** The sidecar's HTTP port, for calls back (set once it is known). */
  sidecarPort: number;
  close(): Promise<void>;
}

const read = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });

export async function startActorApp(config: Record<string, unknown>): Promise<ActorTestApp> {
  const log: ActorAppLog = { calls: [], timers: [], reminders: [], deactivated: [], overlaps: 0, maxInFlight: 0 };
  let allInFlight = 0;
  const inFlight = new Map<string, number>();
  const app: ActorTestApp = { port: 0, log, sidecarPort: 0, close: async () => undefined };
  const sidecar = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${app.sidecarPort}${path}`, init);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const body = await read(req);
    const json = () => (body.length ? JSON.parse(body.toString()) : undefined);
    const send = (status: number, payload?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(payload === undefined ? '' : JSON.stringify(payload));
    };
    if (req.method === 'GET' && (url.pathname === '/dapr/config' || url.pathname === '/rt/config')) return send(200, config);
    if (req.method === 'GET' && url.pathname === '/healthz') return send(200, 'ok');
    const parts = url.pathname.split('/').slice(1).map(decodeURIComponent);
    if (parts[0] !== 'actors') return send(404);
    const [, type, id] = parts as [string, string, string];
    if (req.method === 'DELETE' && parts.length === 3) {
      const entry: ActorAppLog['deactivated'][number] = { type, id, at: Date.now() };
      log.deactivated.push(entry);
      // an app that takes its time to deactivate (e.g. saving state): config.deactivateDelayMs, not a reference setting
      if (typeof config.deactivateDelayMs === 'number') await new Promise((r) => setTimeout(r, config.deactivateDelayMs as number));
      entry.done = Date.now();
      return send(200);
    }
    if (req.method !== 'PUT' || parts[3] !== 'method') return send(404);
    if (parts[4] === 'timer' && parts.length === 6) {
      log.timers.push({ type, id, name: parts[5]!, body: json(), at: Date.now() });
      return send(200);
    }
    if (parts[4] === 'remind' && parts.length === 6) {
      log.reminders.push({ type, id, name: parts[5]!, body: json(), at: Date.now() });
      return parts[5]!.startsWith('fail') ? send(500, { error: 'the reminder failed' }) : send(200);
    }
    const method = parts[4]!;
    const reentrancyId = req.headers['dapr-reentrancy-id'] as string | undefined;
    const entry: ActorAppLog['calls'][number] = { type, id, method, reentrancyId, at: Date.now() };
    log.calls.push(entry);
    const key = `${type}/${id}`;
    const n = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, n);
    if (n > 1) log.overlaps++;
    log.maxInFlight = Math.max(log.maxInFlight, ++allInFlight);
    try {
      switch (method) {
        case 'echo':
          res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/octet-stream' });
          return res.end(body);
        case 'slow':
          await new Promise((r) => setTimeout(r, 30));
          return send(200, { ok: true });
        case 'count': {
          const got = await sidecar(`/v1.0/actors/${type}/${id}/state/n`);
          const now = got.status === 200 ? ((await got.json()) as number) : 0;
          const saved = await sidecar(`/v1.0/actors/${type}/${id}/state`, { method: 'POST', body: JSON.stringify([{ operation: 'upsert', request: { key: 'n', value: now + 1 } }]) });
          if (saved.status !== 204) return send(500, await saved.text());
          return send(200, now + 1);
        }
        case 'recurse': {
          const left = (json() as { n: number }).n;
          if (left <= 0) return send(200, 1);
          inFlight.set(key, (inFlight.get(key) ?? 1) - 1); // the nested call is this call's own
          const r = await sidecar(`/v1.0/actors/${type}/${id}/method/recurse`, { method: 'POST', body: JSON.stringify({ n: left - 1 }), headers: reentrancyId ? { 'dapr-reentrancy-id': reentrancyId } : {} });
          inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
          if (r.status !== 200) return send(r.status, await r.json());
          return send(200, ((await r.json()) as number) + 1);
        }
        case 'call': {
          const c = json() as { type: string; id: string; method: string; body?: unknown };
          inFlight.set(key, (inFlight.get(key) ?? 1) - 1); // a nested call back into this actor is this call's own
          const r = await sidecar(`/v1.0/actors/${c.type}/${c.id}/method/${c.method}`, {
            method: 'POST',
            body: JSON.stringify(c.body ?? null),
            headers: { 'content-type': 'application/json', ...(reentrancyId ? { 'dapr-reentrancy-id': reentrancyId } : {}) },
          });
          inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
          res.writeHead(r.status, { 'content-type': 'application/json' });
          return res.end(Buffer.from(await r.arrayBuffer()));
        }
        case 'sleep': {
          const ms = (json() as { ms: number }).ms;
          await new Promise((r) => setTimeout(r, ms));
          return send(200, { slept: ms });
        }
        case 'fail':
          return send(500, { error: 'the actor failed' });
        case 'hang':
          return await new Promise<void>(() => undefined);
        default:
          return send(404, { error: `no method ${method}` });
      }
    } finally {
      entry.done = Date.now();
      inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
      allInFlight--;
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  app.port = (server.address() as AddressInfo).port;
  app.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return app;
}
