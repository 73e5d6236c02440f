/**
 * The HTTP workflow API against a real sidecar (no worker connected, so instances stay
 * PENDING until one would pick them up), plus fast-check properties over its inputs.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getInstance, sidecarForTest, type TestSidecar } from '../../e2e/workflows/harness.ts';

let sc: TestSidecar;
beforeAll(async () => {
  sc = await sidecarForTest('wf-http');
});
afterAll(async () => {
  await sc?.stop();
});

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function post(path: string, body?: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${sc.base}${path}`, { method: 'POST', body, headers });
  const text = await res.text();
  return { status: res.status, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

describe('workflow HTTP API', () => {
  it('starts an instance with the body as raw input; it stays PENDING without a worker', async () => {
    const r = await post('/v1.0/workflows/rt/OrderFlow/start?instanceID=order-1', 'plain text, not JSON', { 'content-type': 'text/plain' });
    expect(r.status).toBe(202);
    expect(r.json).toEqual({ instanceID: 'order-1' });
    const i = await getInstance(sc.base, 'order-1');
    expect(i).toMatchObject({ instanceID: 'order-1', workflowName: 'OrderFlow', runtimeStatus: 'PENDING' });
    expect(i?.properties['rt.workflow.input']).toBe('plain text, not JSON');
    expect(i?.createdAt).toMatch(RFC3339_UTC);
    expect(i?.lastUpdatedAt).toMatch(RFC3339_UTC);
  });

  it('generates an instance id when none is given, and answers under beta1/alpha1 and the dapr alias', async () => {
    for (const prefix of ['/v1.0/workflows/rt', '/v1.0-beta1/workflows/rt', '/v1.0-alpha1/workflows/dapr']) {
      const r = await post(`${prefix}/Any/start`, '{"a":1}', { 'content-type': 'application/json' });
      expect(r.status).toBe(202);
      const id = r.json?.instanceID as string;
      expect(id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
      const res = await fetch(`${sc.base}${prefix}/${id}`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { properties: Record<string, string> }).properties['rt.workflow.input']).toBe('{"a":1}');
    }
  });

  it('refuses to start an id that is still running (409) and bad ids (400)', async () => {
    expect((await post('/v1.0/workflows/rt/W/start?instanceID=dup')).status).toBe(202);
    const again = await post('/v1.0/workflows/rt/W/start?instanceID=dup');
    expect(again.status).toBe(409);
    expect(again.json?.message).toContain('PENDING');
    for (const bad of ['has space', 'slash%2Fid', 'dot.id', 'x'.repeat(65), 'ümlaut']) {
      const r = await post(`/v1.0/workflows/rt/W/start?instanceID=${encodeURIComponent(bad)}`);
      expect(r.status, bad).toBe(400);
      // the reference runtime's codes, which client code checks
      expect(r.json?.errorCode).toBe(bad.length > 64 ? 'ERR_INSTANCE_ID_TOO_LONG' : 'ERR_INSTANCE_ID_INVALID');
    }
    const twice = await post('/v1.0/workflows/rt/W/start?instanceID=a&instanceID=b');
    expect(twice.status).toBe(400);
  });

  it('answers 404 ERR_INSTANCE_ID_NOT_FOUND for unknown instances and 400 for unknown components', async () => {
    const res = await fetch(`${sc.base}/v1.0/workflows/rt/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { errorCode: string }).errorCode).toBe('ERR_INSTANCE_ID_NOT_FOUND');
    for (const op of ['terminate', 'pause', 'resume', 'purge', 'raiseEvent/ev']) {
      const r = await post(`/v1.0/workflows/rt/nope/${op}`);
      expect(r.status, op).toBe(404);
      expect(r.json?.errorCode).toBe('ERR_INSTANCE_ID_NOT_FOUND');
    }
    const c = await fetch(`${sc.base}/v1.0/workflows/other/x`);
    expect(c.status).toBe(400);
    expect(((await c.json()) as { errorCode: string }).errorCode).toBe('ERR_WORKFLOW_COMPONENT_NOT_FOUND');
  });

  it('pauses, resumes, terminates and purges; purge only of finished instances', async () => {
    expect((await post('/v1.0/workflows/rt/W/start?instanceID=life')).status).toBe(202);
    expect((await post('/v1.0/workflows/rt/life/raiseEvent/early', 'kept')).status).toBe(202);
    expect((await post('/v1.0/workflows/rt/life/pause')).status).toBe(202);
    expect((await getInstance(sc.base, 'life'))?.runtimeStatus).toBe('SUSPENDED');
    expect((await post('/v1.0/workflows/rt/life/resume')).status).toBe(202);
    expect((await getInstance(sc.base, 'life'))?.runtimeStatus).toBe('PENDING');
    const early = await post('/v1.0/workflows/rt/life/purge');
    expect(early.status).toBe(409);
    expect(early.json?.message).toContain('PENDING');
    expect((await post('/v1.0/workflows/rt/life/terminate')).status).toBe(202);
    expect((await getInstance(sc.base, 'life'))?.runtimeStatus).toBe('TERMINATED');
    // terminate again is harmless; pause of a finished instance is a conflict
    expect((await post('/v1.0/workflows/rt/life/terminate')).status).toBe(202);
    expect((await post('/v1.0/workflows/rt/life/pause')).status).toBe(409);
    expect((await post('/v1.0/workflows/rt/life/purge')).status).toBe(202);
    expect(await getInstance(sc.base, 'life')).toBeUndefined();
    // a purged id can be used again
    expect((await post('/v1.0/workflows/rt/W/start?instanceID=life')).status).toBe(202);
  });

  it('property: any body is kept byte-exact as the input; any id is 202 or a 4xx JSON error, never 5xx', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.string({ maxLength: 80 }), async (body, rawId) => {
        const id = `p${n++}`;
        const r = await post(`/v1.0/workflows/rt/Prop/start?instanceID=${id}`, body, { 'content-type': 'application/octet-stream' });
        expect(r.status).toBe(202);
        const i = await getInstance(sc.base, id);
        expect(i?.properties['rt.workflow.input']).toBe(body === '' ? undefined : body);

        const q = await post(`/v1.0/workflows/rt/Prop/start?instanceID=${encodeURIComponent(rawId)}`, body);
        expect(q.status === 202 || q.status === 409 || q.status === 400, `${q.status} ${q.text}`).toBe(true);
        if (q.status !== 202) expect(q.json).toMatchObject({ errorCode: expect.any(String), message: expect.any(String) });
        if (q.status === 202) expect(/^[A-Za-z0-9_-]{1,64}$/.test(rawId) || rawId === '').toBe(true);
        if (q.status === 400) expect(/^[A-Za-z0-9_-]{1,64}$/.test(rawId)).toBe(false);
      }),
      { numRuns: 150 },
    );
  });

  it('property: arbitrary paths, methods and bodies under /workflows never yield a 5xx', async () => {
    const seg = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('rt', 'dapr', 'start', 'terminate', 'raiseEvent', 'pause', 'resume', 'purge', 'order-1'));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('v1.0', 'v1.0-beta1', 'v1.0-alpha1'),
        fc.array(seg, { minLength: 1, maxLength: 5 }),
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE'),
        fc.option(fc.uint8Array({ maxLength: 300 })),
        fc.constantFrom('application/json', 'text/plain', 'application/octet-stream'),
        async (v, segs, method, body, ct) => {
          const path = `/${v}/workflows/${segs.map(encodeURIComponent).join('/')}`;
          const res = await fetch(`${sc.base}${path}`, { method, body: method === 'GET' || body === null ? undefined : Buffer.from(body), headers: { 'content-type': ct } });
          const text = await res.text();
          expect(res.status, `${method} ${path} → ${res.status} ${text}`).toBeLessThan(500);
          if (res.status >= 400) expect(JSON.parse(text)).toMatchObject({ errorCode: expect.any(String), message: expect.any(String) });
        },
      ),
      { numRuns: 300 },
    );
  });
});
