/**
 * Properties of what a caller can send to the invoke routes: any target text, method path, query
 * and header value gets a JSON answer — the target app's, 400 for a malformed path, or 500
 * ERR_DIRECT_INVOKE for a target that is not there — never a crash, a hang or ERR_INTERNAL.
 * The target app echoes, so what reached it is checked too.
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { pino } from 'pino';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAppTarget } from '../../sidecar/src/invoke/target.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('invoke routes: properties', () => {
  let dir: string;
  let app: Server;
  let caller: Sidecar;
  let target: Sidecar;
  let pool: Pool;
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-prop-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ url: req.url, method: req.method, x: req.headers['x-value'] ?? null }));
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    target = await startSidecar({ ...common, appId: 'echo', appPort });
    caller = await startSidecar({ ...common, appId: 'caller' });
    pool = new Pool(`http://127.0.0.1:${caller.httpPort}`, { connections: 8 });
  });
  afterAll(async () => {
    await pool?.close();
    await caller?.close();
    await target?.close();
    app?.close();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  const segment = fc.string({ unit: fc.constantFrom(...'abcXYZ019-_.~%20/?#&=:@!$\'()*+,;é'.split('')), maxLength: 24 });

  it('any target and path: the app’s answer with the path as sent, 400, or 500 ERR_DIRECT_INVOKE', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constant('echo'), segment), segment, fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'), fc.string({ maxLength: 40 }).filter((s) => /^[\x20-\x7e]*$/.test(s)), async (t, p, method, headerValue) => {
        const path = `/v1.0/invoke/${encodeURIComponent(t)}/method/${encodeURI(p)}`;
        const res = await pool.request({ method, path, headers: { 'x-value': headerValue }, body: method === 'GET' ? undefined : 'b' });
        const text = await res.body.text();
        const where = `${method} ${path} → ${res.statusCode} ${text.slice(0, 200)}`;
        const json = JSON.parse(text) as { errorCode?: string; url?: string; x?: string };
        if (res.statusCode === 200) {
          expect(json.url, where).toBe(path.slice(path.indexOf('/method/') + '/method'.length));
          expect(json.x, where).toBe(headerValue.trim()); // HTTP drops a value's surrounding whitespace
        } else if (res.statusCode === 400) expect(json.errorCode, where).toBe('ERR_MALFORMED_REQUEST');
        else {
          expect(res.statusCode, where).toBe(500);
          expect(json.errorCode, where).toBe('ERR_DIRECT_INVOKE');
        }
      }),
      { numRuns: 120 },
    );
  });

  it('parseAppTarget: an id and namespace come back as given, anything else is refused', () => {
    const id = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$/);
    fc.assert(
      fc.property(id, id, (a, ns) => {
        expect(parseAppTarget(a, 'default')).toEqual({ appId: a, namespace: 'default' });
        expect(parseAppTarget(`${a}.${ns}`, 'default')).toEqual({ appId: a, namespace: ns });
      }),
    );
    fc.assert(fc.property(fc.string(), (s) => void parseAppTarget(s, 'default')));
    for (const bad of ['', '.', 'a.', '.ns', 'a b', 'a/b', 'a.NS']) expect(parseAppTarget(bad, 'default'), bad).toBeUndefined();
  });
});
