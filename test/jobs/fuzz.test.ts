import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sidecarFor, tempDir } from './helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

/** Property tests of the jobs endpoint: whatever arrives, a JSON 2xx/4xx and nothing lost. */
describe('jobs endpoint fuzz', () => {
  let sc: Sidecar & { base: string };
  const dir = tempDir();
  beforeAll(async () => {
    sc = await sidecarFor({ dataDir: dir.path, appId: 'fuzz' });
  });
  afterAll(async () => {
    await sc?.close();
    dir.remove();
  });

  const timeText = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('1s', '500ms', '1h30m', 'PT5S', 'P1D', 'R2/PT1S', '-3s', '0s', '2030-01-01T00:00:00Z', '2030-01-01T00:00:00', '2030-02-30T00:00:00Z', '100000000000h', '3000000000h', '9999-12-31T23:59:59Z'),
  );
  const scheduleText = fc.oneof(
    fc.string({ maxLength: 16 }),
    fc.constantFrom('@every 1h', '@every', '@daily', '@nope', '0 0 * * * *', '* * * * *', '0 0 0 31 2 *', '*/5 * * * * mon-fri', '60 * * * * *', '@every 100000000000h', '@every 3000000000h', '@every 60000000h'),
  );
  const anyJson = fc.jsonValue({ maxDepth: 3 });
  // mostly valid bodies, so that accepted jobs (and their read-back) are exercised too
  const validish = fc
    .record(
      {
        schedule: fc.constantFrom('@every 1h', '@daily', '0 0 * * * *', '*/5 * * * * mon-fri', '0 30 9 1 jan-jun *'),
        dueTime: fc.constantFrom('1h', 'PT2H', '2099-01-01T00:00:00Z', '2099-01-01T00:00:00+05:30'),
        ttl: fc.constant('2100-01-01T00:00:00Z'),
        repeats: fc.integer({ min: 1, max: 1000 }),
        data: anyJson,
        overwrite: fc.constant(true),
      },
      { requiredKeys: ['schedule'] },
    )
    .map((o) => JSON.stringify(o));
  const body = fc.oneof(
    validish,
    fc.record(
      {
        schedule: fc.oneof(scheduleText, anyJson),
        dueTime: fc.oneof(timeText, anyJson),
        ttl: fc.oneof(timeText, anyJson),
        repeats: fc.oneof(fc.integer({ min: -3, max: 10 }), fc.double(), fc.string({ maxLength: 3 })),
        data: anyJson,
        overwrite: fc.oneof(fc.boolean(), anyJson),
        failurePolicy: fc.oneof(anyJson, fc.constant({ drop: {} }), fc.record({ constant: fc.record({ interval: fc.oneof(timeText, anyJson), maxRetries: fc.oneof(fc.integer({ min: -2, max: 5 }), anyJson) }, { requiredKeys: [] }) })),
      },
      { requiredKeys: [] },
    ).map((o) => JSON.stringify(o)),
    anyJson.map((v) => JSON.stringify(v)),
    fc.string({ maxLength: 40 }),
  );
  const name = fc.oneof(fc.string({ minLength: 0, maxLength: 20 }), fc.string({ minLength: 500, maxLength: 530 }), fc.constantFrom('a/b', 'a#b', 'a?b', 'a\\b', 'tab\there', '..', '%', 'ünï'));

  it('answers every POST with 204, 400 or 409 and a JSON error; accepted jobs read back as sent', async () => {
    let i = 0;
    await fc.assert(
      fc.asyncProperty(name, body, async (n, b) => {
        const path = `${sc.base}/v1.0-alpha1/jobs/${encodeURIComponent(n)}`;
        const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b });
        const text = await res.text();
        expect([204, 400, 409, 404], `${res.status} ${text}`).toContain(res.status);
        if (res.status === 404) {
          // only an empty name routes nowhere else
          expect(n === '' || /^\.\.?$/.test(n)).toBe(true);
          return;
        }
        if (res.status !== 204) {
          const err = JSON.parse(text) as { errorCode: string; message: string; details: unknown[] };
          expect(typeof err.errorCode).toBe('string');
          expect(err.message.length).toBeGreaterThan(0);
          expect(Array.isArray(err.details)).toBe(true);
          return;
        }
        const sent = JSON.parse(b) as Record<string, unknown>;
        const get = await fetch(path);
        expect(get.status).toBe(200);
        const got = (await get.json()) as Record<string, unknown>;
        expect(got.name).toBe(n);
        if (sent.data !== undefined) expect(got.data).toEqual(sent.data);
        await fetch(path, { method: 'DELETE' });
        i++;
      }),
      { numRuns: 400 },
    );
    // the generators do produce accepted jobs, so the read-back branch ran
    expect(i).toBeGreaterThan(0);
    // whatever was accepted can be listed (a too-far period once made this a 500)
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs`)).status).toBe(200);
  });

  it('answers GET and DELETE of any name with 200/204/400/500 JSON, never a crash', async () => {
    await fc.assert(
      fc.asyncProperty(name, fc.constantFrom('GET', 'DELETE'), async (n, method) => {
        const res = await fetch(`${sc.base}/v1.0/jobs/${encodeURIComponent(n)}`, { method });
        expect([200, 204, 400, 404, 500]).toContain(res.status);
        if (res.status >= 400) {
          const err = (await res.json()) as { errorCode: string; message: string };
          if (res.status === 500) expect(err.message).toMatch(/not found/);
        } else await res.arrayBuffer();
      }),
      { numRuns: 200 },
    );
    expect((await fetch(`${sc.base}/v1.0/healthz`)).status).toBe(204);
  });
});
