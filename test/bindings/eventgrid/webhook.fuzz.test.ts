/**
 * Property tests of the webhook through a real sidecar: whatever arrives, the answer is a
 * deliberate 2xx/4xx (never a 5xx while the app is healthy), and nothing reaches the app
 * without a valid token.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAzureStandIns, type AzureStandIns } from '../../services/azure-standins.ts';
import { startInputBinding, startTestApp, type StartedInput, type TestApp } from './helpers.ts';

describe('event-routing webhook fuzz (loopback stand-in for Azure)', () => {
  let az: AzureStandIns;
  let app: TestApp;
  let s: StartedInput;
  let hook: string;
  let token: string;

  beforeAll(async () => {
    az = await startAzureStandIns();
    app = await startTestApp();
    s = await startInputBinding(az, app, 'fuzzhook');
    hook = `http://127.0.0.1:${s.port}/hook`;
    token = await az.entra.mint({ aud: az.clientId });
  });
  afterAll(async () => {
    await s?.stop();
    await app?.close();
    await az?.close();
  });

  const contentTypes = fc.constantFrom(
    'application/cloudevents+json',
    'application/cloudevents-batch+json; charset=utf-8',
    'application/json',
    'text/plain',
    '',
    'application/cloudevents+json; charset=utf-8',
  );
  const cloudEvent = fc.record(
    {
      specversion: fc.constantFrom('1.0', '1.0', '0.3', ''),
      id: fc.string(),
      source: fc.string(),
      type: fc.string(),
      subject: fc.string(),
      time: fc.constantFrom('2026-01-01T00:00:00Z', 'yesterday'),
      data: fc.jsonValue(),
    },
    { requiredKeys: [] },
  );
  const body = fc.oneof(
    fc.string(),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    cloudEvent.map((e) => JSON.stringify(e)),
    fc.array(cloudEvent, { maxLength: 4 }).map((a) => JSON.stringify(a)),
  );

  it('answers authenticated deliveries with 200 or a 4xx, delivering exactly the accepted events', async () => {
    await fc.assert(
      fc.asyncProperty(body, contentTypes, async (payload, ct) => {
        app.received.length = 0;
        const headers: Record<string, string> = { authorization: `Bearer ${token}` };
        if (ct) headers['content-type'] = ct;
        const res = await fetch(hook, { method: 'POST', headers, body: payload });
        const text = await res.text();
        expect([200, 400, 415]).toContain(res.status);
        if (res.status === 200) {
          const parsed = JSON.parse(payload) as unknown;
          const events = Array.isArray(parsed) ? parsed : [parsed];
          expect(app.received.map((d) => JSON.parse(d.body))).toEqual(events);
        } else {
          expect(JSON.parse(text)).toHaveProperty('errorCode');
          expect(app.received).toHaveLength(0);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('delivers nothing without a valid token, whatever the request', async () => {
    const authorization = fc.oneof(
      fc.constant(undefined),
      fc.string(),
      fc.string().map((t) => `Bearer ${t}`),
      // a valid token with one character changed
      fc.nat({ max: 2000 }).map((i) => {
        const at = i % token.length;
        const c = token[at] === 'A' ? 'B' : 'A';
        return `Bearer ${token.slice(0, at)}${c}${token.slice(at + 1)}`;
      }),
    );
    const method = fc.constantFrom('POST', 'POST', 'PUT', 'GET', 'DELETE', 'PATCH', 'OPTIONS');
    await fc.assert(
      fc.asyncProperty(method, authorization, body, contentTypes, async (m, auth, payload, ct) => {
        app.received.length = 0;
        const headers: Record<string, string> = {};
        if (auth !== undefined && /^[\x20-\x7e]*$/.test(auth)) headers.authorization = auth;
        if (ct) headers['content-type'] = ct;
        const res = await fetch(hook, { method: m, headers, body: m === 'GET' ? undefined : payload });
        await res.arrayBuffer();
        expect(res.status).toBeLessThan(500);
        if (m === 'POST') {
          // a one-character change can land in a part that decodes to the same bytes (base64url
          // padding bits); only then may it pass, and only then is something delivered
          if (res.status !== 401) expect(headers.authorization).toBeDefined();
          else expect(app.received).toHaveLength(0);
        } else {
          expect(app.received).toHaveLength(0);
        }
      }),
      { numRuns: 200 },
    );
  });
});
