/**
 * The receiving sidecar's rules: a Configuration's accessControl (by the caller's app id, the
 * operation and the verb), the app API token toward its app, and --app-max-concurrency.
 * Three real sidecars in this process, found through a private registry (RT_HOME).
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkAccess, parseAccessControl } from '../../sidecar/src/invoke/access-control.ts';
import { DispatchedAnswer } from '../../sidecar/src/invoke/answer.ts';
import type { RequestHead } from '../../sidecar/src/invoke/proto.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

const CONFIG = {
  apiVersion: 'rt.io/v1alpha1',
  kind: 'Configuration',
  metadata: { name: 'acl' },
  spec: {
    accessControl: {
      defaultAction: 'deny',
      trustDomain: 'public',
      policies: [
        {
          appId: 'frontend',
          defaultAction: 'deny',
          namespace: 'default',
          operations: [
            { name: '/orders/*', httpVerb: ['GET'], action: 'allow' },
            { name: '/public/**', httpVerb: ['*'], action: 'allow' },
          ],
        },
      ],
    },
  },
};

describe('access control, app token and concurrency on the receiving side', () => {
  let dir: string;
  let app: Server;
  const seen: { path: string; token?: string }[] = [];
  let active = 0;
  let maxActive = 0;
  /** '/public/held' waits for release() (a timer would let the slot go on its own on a loaded machine). */
  let release = () => {};
  /** Answers of '/public/slow…' calls, held until the test lets each go. */
  const slow: (() => void)[] = [];
  const sidecars: Record<string, Sidecar> = {};
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-acl-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      seen.push({ path: req.url!, token: req.headers['rt-api-token'] as string | undefined });
      active++;
      maxActive = Math.max(maxActive, active);
      const done = () => {
        active--;
        res.end(`ok ${req.url}`);
      };
      if (req.url === '/public/held') release = done;
      else if (req.url!.startsWith('/public/slow')) slow.push(done);
      else done();
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    await writeFile(join(dir, 'config.yaml'), JSON.stringify(CONFIG));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    sidecars.backend = await startSidecar({ ...common, appId: 'backend', appPort, configFile: join(dir, 'config.yaml'), appApiToken: 'app-secret', appMaxConcurrency: 1 });
    sidecars.frontend = await startSidecar({ ...common, appId: 'frontend' });
    sidecars.intruder = await startSidecar({ ...common, appId: 'intruder' });
  });
  afterAll(async () => {
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    app?.close();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  const call = (from: string, method: string, path: string) => fetch(`http://127.0.0.1:${sidecars[from].httpPort}/v1.0/invoke/backend/method${path}`, { method });

  it('allows what the caller’s policy allows, and refuses the rest with 403 ERR_DIRECT_INVOKE', async () => {
    for (const [from, method, path, status] of [
      ['frontend', 'GET', '/orders/1', 200],
      ['frontend', 'POST', '/orders/1', 403], // the operation matches, the verb does not
      ['frontend', 'GET', '/orders/1/items', 403], // * is one segment
      ['frontend', 'DELETE', '/public/a/b', 200], // ** is any number
      ['frontend', 'GET', '/admin', 403], // no operation: the policy's default
      ['intruder', 'GET', '/orders/1', 403], // no policy: the global default
      ['backend', 'GET', '/public/x', 403], // itself has no policy either
    ] as const) {
      const res = await call(from, method, path);
      expect(res.status, `${from} ${method} ${path}`).toBe(status);
      if (status === 403) {
        const body = (await res.json()) as { errorCode: string; message: string };
        expect(body.errorCode).toBe('ERR_DIRECT_INVOKE');
        expect(body.message).toContain(`access control policy has denied access to id: spiffe://public/ns/default/${from} operation: ${path} verb: ${method}`);
      } else await res.text();
    }
    expect(seen.map((s) => s.path).filter((p) => !p.startsWith('/rt/') && !p.startsWith('/dapr/'))).toEqual(['/orders/1', '/public/a/b']);
  });

  /** Calls the backend's app channel holds for its one slot (--app-max-concurrency 1). */
  const queued = () => (sidecars.backend.ctx.app as unknown as { waiting: unknown[] }).waiting.length;
  /** Answers the held slow calls one at a time, each once the rest wait for the slot in the backend. */
  const answerSlow = async (n: number) => {
    for (let left = n; left > 0; left--) {
      await vi.waitFor(() => expect([slow.length, queued()]).toEqual([1, left - 1]), { timeout: 10_000, interval: 10 });
      slow.shift()!();
    }
  };

  it('sends the app its API token and holds --app-max-concurrency', async () => {
    const calls = Promise.all([1, 2, 3, 4].map((i) => call('frontend', 'GET', `/public/slow${i}`)));
    await answerSlow(4);
    const all = await calls;
    expect(all.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(maxActive).toBe(1);
    expect(seen.every((s) => s.token === 'app-secret')).toBe(true);
  });

  it('lets a caller leave while its call waits for the concurrency slot, and frees that slot once', async () => {
    const before = seen.length;
    // the app holds the one slot until the waiting caller has left
    const held = call('frontend', 'GET', '/public/held');
    await vi.waitFor(() => expect(seen.at(-1)?.path).toBe('/public/held'), { timeout: 10_000 });
    const gone = new AbortController();
    const waiting = fetch(`http://127.0.0.1:${sidecars.frontend.httpPort}/v1.0/invoke/backend/method/public/never`, { signal: gone.signal });
    await vi.waitFor(() => expect(queued()).toBe(1), { timeout: 10_000, interval: 10 }); // it waits for the slot
    const aborts = vi.spyOn(DispatchedAnswer.prototype, 'abort');
    gone.abort();
    await expect(waiting).rejects.toThrow();
    // the caller's leaving travels on to the target's sidecar (two hops: the caller's sidecar's
    // call, then the target's) before the slot frees
    await vi.waitFor(() => expect(aborts.mock.calls.length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 10 });
    aborts.mockRestore();
    release();
    expect((await held).status).toBe(200);
    // the slot is free again, and only one call at a time still reaches the app
    const afterCalls = Promise.all([1, 2].map((i) => call('frontend', 'GET', `/public/slow-after${i}`)));
    await answerSlow(2);
    const after = await afterCalls;
    expect(after.map((r) => r.status)).toEqual([200, 200]);
    expect(maxActive).toBe(1);
    expect(seen.slice(before).map((s) => s.path)).not.toContain('/public/never');
  });

  it('reads policies as written and refuses wrong ones with the field named', () => {
    const head = (app_id: string, method: string, path: string): RequestHead => ({ method, path, query: '', headers: [], caller: { app_id, namespace: 'default', trust_domain: '' }, target_app_id: 'x', has_body: false });
    expect(parseAccessControl({})).toBeUndefined();
    expect(checkAccess(undefined, head('a', 'GET', '/x'))).toBeUndefined();
    // no defaultAction anywhere: allow
    expect(checkAccess(parseAccessControl({ accessControl: { policies: [{ appId: 'a', operations: [{ name: '/x', httpVerb: ['GET'], action: 'deny' }] }] } }), head('a', 'POST', '/x'))).toBeUndefined();
    expect(checkAccess(parseAccessControl({ accessControl: { policies: [{ appId: 'a', operations: [{ name: '/x', httpVerb: ['get'], action: 'deny' }] }] } }), head('a', 'GET', '/x'))).toMatch(/denied/);
    // a policy in another namespace is not the caller's
    expect(checkAccess(parseAccessControl({ accessControl: { defaultAction: 'deny', policies: [{ appId: 'a', namespace: 'prod', defaultAction: 'allow' }] } }), head('a', 'GET', '/x'))).toMatch(/denied/);
    expect(() => parseAccessControl({ accessControl: { defaultAction: 'maybe' } })).toThrow('spec.accessControl.defaultAction must be allow or deny');
    expect(() => parseAccessControl({ accessControl: { policies: [{ operations: [] }] } })).toThrow('spec.accessControl.policies[0].appId is required');
  });
});
