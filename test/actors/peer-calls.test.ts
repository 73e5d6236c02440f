/**
 * The internal port's actor calls (actors/peer-calls.ts) as another sidecar, or anything else
 * that reaches the port, sends them: a real sidecar with a placement address (so it serves
 * them), its app hosting Counter, and requests made by fast-check: any method, path and body
 * gets an answer within a few seconds, and every answer that is not a success is the API's JSON
 * error with an errorCode (a 5xx only for the runtime's documented ones); what is malformed is a
 * 4xx.
 */
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { startPlacement, type RunningPlacement } from '../placement/harness.ts';
import { startActorApp, type ActorTestApp } from './app.ts';

const appId = 'peer-calls';
let dir: string;
let placement: RunningPlacement;
let app: ActorTestApp;
let sc: Sidecar;
let port: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-peer-'));
  placement = await startPlacement();
  app = await startActorApp({ entities: ['Counter'] });
  sc = await startSidecar({ appId, appPort: app.port, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, placementAddresses: [placement.address], logger: pino({ level: 'silent' }) });
  app.sidecarPort = sc.httpPort;
  port = (await sc.ctx.services.internalPort!.listening).port;
  const end = Date.now() + 30_000;
  while ((await send('PUT', '/Counter/one/method/echo', 'hi')).status !== 200) {
    if (Date.now() > end) throw new Error('the sidecar never served its actors');
    await new Promise((r) => setTimeout(r, 50));
  }
}, 60_000);

afterAll(async () => {
  await sc?.close();
  await app?.close();
  await placement?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** One request to the internal port as a sidecar's actor call; its status and body. */
function send(method: string, path: string, body: string | undefined, extra: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { 'rt-invoke-target': appId, 'rt-invoke-actor': '1', ...extra } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path} in 10 s`)));
    req.end(body);
  });
}

const errorOf = (body: string) => JSON.parse(body) as { errorCode: string; message: string };

describe('forwarded actor calls on the internal port', () => {
  it('serves the documented operations', async () => {
    const echo = await send('PUT', '/Counter/a%2Fb/method/echo', 'bytes', { 'content-type': 'text/x-mine' });
    expect(echo).toEqual({ status: 200, body: 'bytes' });
    // no actor state store here: the runtime's own error, with its code
    const state = await send('GET', '/Counter/one/state/k', undefined);
    expect(state.status).toBe(500);
    expect(errorOf(state.body).errorCode).toBe('ERR_ACTOR_RUNTIME_NOT_FOUND');
    const timer = await send('PUT', '/Counter/one/timers/t', JSON.stringify({ dueTime: '1h' }));
    expect(timer.status).toBe(204);
    expect((await send('DELETE', '/Counter/one/timers/t', undefined)).status).toBe(204);
    // a call for another app id, or one not marked as an actor call, is not the actor runtime's
    expect(errorOf((await send('PUT', '/Counter/one/method/echo', 'x', { 'rt-invoke-target': 'someone-else' })).body).errorCode).toBe('ERR_DIRECT_INVOKE');
  });

  it('refuses what is malformed with a 4xx JSON error', async () => {
    for (const [method, path, body] of [
      ['PUT', '/Counter/one/remind/r', '{not json'],
      ['PUT', '/Counter/one/remind/r', JSON.stringify({ actorType: 'Counter', actorId: 'other', name: 'r' })],
      ['POST', '/Counter/one/state', JSON.stringify([{ operation: 1 }])],
      ['PATCH', '/Counter/one/method/echo', ''],
      ['PUT', '/Counter/%zz/method/echo', ''],
      ['GET', '/too/few', ''],
    ] as const) {
      const r = await send(method, path, body);
      expect(r.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(r.status, `${method} ${path}`).toBeLessThan(500);
      expect(errorOf(r.body).errorCode).toMatch(/^ERR_/);
    }
  });

  it('property: any method, path and body gets an answer, and every failure is a JSON error with a code', async () => {
    const segment = fc.oneof(fc.constantFrom('Counter', 'Other', 'one', 'method', 'state', 'timers', 'remind', 'echo', 'fail', '%zz', '%2F', ''), fc.stringMatching(/^[A-Za-z0-9._~%-]{0,12}$/));
    const body = fc.oneof(fc.constant(undefined), fc.string({ maxLength: 40 }), fc.json({ maxDepth: 3 }));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'PUT', 'POST', 'DELETE', 'PATCH'), fc.array(segment, { minLength: 0, maxLength: 6 }), body, async (method, segments, b) => {
        const r = await send(method, `/${segments.join('/')}`, b);
        if (r.status < 300) return;
        const e = errorOf(r.body) as { errorCode?: string; error?: string };
        if (e.error !== undefined && e.errorCode === undefined) return; // the app's own answer to a method call, passed on
        const what = `${method} /${segments.join('/')} → ${r.status} ${r.body}`;
        expect(e.errorCode, what).toMatch(/^ERR_/);
        // a 5xx only for what the runtime documents: no host of a type, no actor state store
        if (r.status >= 500) expect(['ERR_ACTOR_INVOKE_METHOD', 'ERR_ACTOR_RUNTIME_NOT_FOUND'], what).toContain(e.errorCode);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
