/**
 * Input direction through a real sidecar: event subscription management against the ARM
 * stand-in, the validation handshake, token checks and delivery to a real app.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startAzureStandIns, type AzureStandIns } from '../../services/azure-standins.ts';
import { capturingLogger, ENDPOINT, q, startInputBinding, startTestApp, startWith, topicScope, type StartedInput, type TestApp } from './helpers.ts';

function ce(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { specversion: '1.0', id, source: '/subscriptions/x/resourceGroups/rg1/providers/Microsoft.Storage/storageAccounts/s1', type: 'Microsoft.Storage.BlobCreated', subject: `/blobs/${id}`, data: { n: id }, ...extra };
}

describe('event-routing input binding (loopback stand-in for Azure)', () => {
  let az: AzureStandIns;
  let app: TestApp;

  beforeAll(async () => {
    az = await startAzureStandIns();
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
    await az?.close();
  });

  const scope = () => topicScope(az);
  const storedKey = (name: string) => `${scope()}/providers/Microsoft.EventGrid/eventSubscriptions/${name}`.toLowerCase();
  type Input = StartedInput;
  const startInput = (name: string, extra: Record<string, string> = {}, logger?: Parameters<typeof startWith>[2]) => startInputBinding(az, app, name, extra, logger);

  describe('event subscription', () => {
    it('is created at start, after the webhook answered the validation handshake', async () => {
      const callsBefore = az.arm.calls.length;
      const s = await startInput('orders-in');
      try {
        expect(s.binding.subscriptionStatus).toBe('created');
        expect(az.arm.subscriptions.get(storedKey('ordersin'))).toMatchObject({
          name: 'ordersin',
          endpointUrl: ENDPOINT,
          tenantId: az.entra.tenantId,
          applicationIdOrUri: az.clientId,
          eventDeliverySchema: 'CloudEventSchemaV1_0',
          provisioningState: 'Succeeded',
        });
        expect(az.arm.handshakes.at(-1)).toEqual({ status: 200, allowedOrigin: 'eventgrid.azure.net' });
        // the SDK followed the long-running-operation protocol: PUT, poll the async operation, GET the result
        const methods = az.arm.calls.slice(callsBefore).map((c) => `${c.method} ${c.path.includes('operationsStatus') ? 'op' : 'sub'}`);
        expect(methods).toEqual(['GET sub', 'PUT sub', 'GET op', 'GET sub']);
        expect(az.entra.tokenRequests.some((r) => r.clientId === az.clientId && r.scope === `${az.arm.url}/.default`)).toBe(true);
      } finally {
        await s.stop();
      }
    });

    it('is left alone when it already matches', async () => {
      az.arm.seed(scope(), 'unchanged1', { endpointUrl: ENDPOINT, tenantId: az.entra.tenantId, applicationIdOrUri: az.clientId, eventDeliverySchema: 'CloudEventSchemaV1_0' });
      const callsBefore = az.arm.calls.length;
      const s = await startInput('unchanged1');
      try {
        expect(s.binding.subscriptionStatus).toBe('unchanged');
        expect(az.arm.calls.slice(callsBefore).map((c) => c.method)).toEqual(['GET']);
      } finally {
        await s.stop();
      }
    });

    it('is updated when the configuration changed', async () => {
      az.arm.seed(scope(), 'changed1', { endpointUrl: 'https://old.example.test/hook', tenantId: az.entra.tenantId, applicationIdOrUri: az.clientId, eventDeliverySchema: 'EventGridSchema' });
      const s = await startInput('changed1');
      try {
        expect(s.binding.subscriptionStatus).toBe('updated');
        expect(az.arm.subscriptions.get(storedKey('changed1'))).toMatchObject({ endpointUrl: ENDPOINT, eventDeliverySchema: 'CloudEventSchemaV1_0', provisioningState: 'Succeeded' });
      } finally {
        await s.stop();
      }
    });

    it('is written again when its last provisioning failed', async () => {
      az.arm.seed(scope(), 'failedbefore', { endpointUrl: ENDPOINT, tenantId: az.entra.tenantId, applicationIdOrUri: az.clientId, eventDeliverySchema: 'CloudEventSchemaV1_0' });
      az.arm.subscriptions.get(storedKey('failedbefore'))!.provisioningState = 'Failed';
      const s = await startInput('failedbefore');
      try {
        expect(s.binding.subscriptionStatus).toBe('updated');
        expect(az.arm.subscriptions.get(storedKey('failedbefore'))!.provisioningState).toBe('Succeeded');
      } finally {
        await s.stop();
      }
    });

    it('fails to start when the service cannot complete the validation handshake', async () => {
      const cap = capturingLogger();
      const s = await startInputBinding(az, app, 'nohandshake', {}, cap.logger, undefined, 'http://127.0.0.1:1/');
      try {
        expect(s.binding.subscriptionStatus).toBe('failed');
        expect(az.arm.subscriptions.get(storedKey('nohandshake'))!.provisioningState).toBe('Failed');
        expect(cap.text()).toMatch(/Webhook validation handshake failed/);
      } finally {
        await s.stop();
      }
    });

    it('compares the full endpoint URL (with its query) through getFullUrl', async () => {
      const url = `${ENDPOINT}?code=abc`;
      az.arm.seed(scope(), 'withquery', { endpointUrl: url, tenantId: az.entra.tenantId, applicationIdOrUri: az.clientId, eventDeliverySchema: 'CloudEventSchemaV1_0' });
      const callsBefore = az.arm.calls.length;
      const s = await startInput('with-query', { subscriberEndpoint: q(url), eventSubscriptionName: q('withquery') });
      try {
        expect(s.binding.subscriptionStatus).toBe('unchanged');
        expect(az.arm.calls.slice(callsBefore).map((c) => c.method)).toEqual(['GET', 'POST']);
      } finally {
        await s.stop();
      }
    });

    it('takes the client secret from a secret store (secretKeyRef) and never logs it', async () => {
      process.env.EGIN_CLIENT_SECRET = az.clientSecret;
      const cap = capturingLogger();
      const s = await startInputBinding(az, app, 'fromstore', {}, cap.logger, { store: 'envsecrets', prefix: 'EGIN_' });
      try {
        expect(s.binding.subscriptionStatus).toBe('created');
        expect(cap.text()).not.toContain(az.clientSecret);
      } finally {
        await s.stop();
        delete process.env.EGIN_CLIENT_SECRET;
      }
    });

    it('reports a failure to authenticate without logging the secret', async () => {
      const cap = capturingLogger();
      const secret = 'wrong-secret-value-0123456789';
      const s = await startInput('badsecret', { cloudClientSecret: q(secret) }, cap.logger);
      try {
        expect(s.binding.subscriptionStatus).toBe('failed');
        expect(cap.text()).toMatch(/creating or updating event subscription \\"badsecret\\" at .* failed/);
        expect(cap.text()).not.toContain(secret);
        expect(az.arm.subscriptions.has(storedKey('badsecret'))).toBe(false);
      } finally {
        await s.stop();
      }
    });
  });

  describe('webhook', () => {
    let s: Input;
    let hook: string;
    let cap: ReturnType<typeof capturingLogger>;

    beforeAll(async () => {
      cap = capturingLogger();
      s = await startInput('hook1', {}, cap.logger);
      hook = `http://127.0.0.1:${s.port}/api/events`;
    });
    afterAll(async () => {
      await s?.stop();
    });
    beforeEach(() => {
      app.received.length = 0;
      app.status = 200;
    });

    const post = (body: unknown, headers: Record<string, string>) =>
      fetch(hook, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json; charset=utf-8', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    const bearer = async (o: Parameters<AzureStandIns['entra']['mint']>[0]) => ({ authorization: `Bearer ${await az.entra.mint(o)}` });

    it('answers the validation handshake (OPTIONS) with the allowed origin and rate', async () => {
      const res = await fetch(hook, { method: 'OPTIONS', headers: { 'WebHook-Request-Origin': 'eventgrid.azure.net' } });
      expect(res.status).toBe(200);
      expect(res.headers.get('webhook-allowed-origin')).toBe('eventgrid.azure.net');
      expect(res.headers.get('webhook-allowed-rate')).toBe('*');
      const bad = await fetch(hook, { method: 'OPTIONS' });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST' });
    });

    it('delivers an event with a valid token to the app at POST /<binding-name>', async () => {
      const res = await post(ce('e1'), await bearer({ aud: az.clientId }));
      expect(res.status).toBe(200);
      expect(app.received).toHaveLength(1);
      const d = app.received[0];
      expect(d.path).toBe('/hook1');
      expect(d.headers['content-type']).toBe('application/cloudevents+json');
      expect(d.headers['metadata.ce-id']).toBe('e1');
      expect(d.headers['metadata.ce-type']).toBe('Microsoft.Storage.BlobCreated');
      expect(JSON.parse(d.body)).toEqual(ce('e1'));
    });

    it('accepts the v1 issuer and the api:// and endpoint audiences', async () => {
      for (const o of [
        { aud: az.clientId, iss: az.entra.issuerV1 },
        { aud: `api://${az.clientId}` },
        { aud: ENDPOINT },
      ]) {
        expect((await post(ce('a'), await bearer(o))).status).toBe(200);
      }
      expect(app.received).toHaveLength(3);
    });

    it.each([
      ['missing token', async () => ({}) as Record<string, string>, /missing/],
      ['not a bearer header', async () => ({ authorization: 'Basic dXNlcjpwdw==' }), /Bearer/],
      ['expired token', () => bearer({ aud: az.clientId, expiresIn: -600 }), /expired/],
      ['wrong audience', () => bearer({ aud: 'some-other-app' }), /audience/],
      ['wrong issuer', () => bearer({ aud: az.clientId, iss: 'https://sts.windows.net/00000000-0000-0000-0000-000000000000/' }), /issuer/],
      ['signature by a foreign key', () => bearer({ aud: az.clientId, foreignKey: true }), /key set|signature/],
      ['forged signature under a known key id', async () => {
        const t = await az.entra.mint({ aud: az.clientId });
        const [h, p] = t.split('.');
        const forged = await az.entra.mint({ aud: az.clientId, foreignKey: true });
        return { authorization: `Bearer ${h}.${p}.${forged.split('.')[2]}` };
      }, /signature/],
      ['garbage token', async () => ({ authorization: 'Bearer not.a.jwt' }), /malformed/],
    ])('rejects a delivery with %s: 401 and nothing delivered', async (_what, headers, why) => {
      const res = await post(ce('x'), await headers());
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      const body = (await res.json()) as { errorCode: string; message: string };
      expect(body.errorCode).toBe('ERR_WEBHOOK_UNAUTHORIZED');
      expect(body.message).toMatch(why);
      expect(app.received).toHaveLength(0);
    });

    it('delivers each event of a batch, in order', async () => {
      const events = [ce('b1'), ce('b2'), ce('b3')];
      const res = await post(events, { ...(await bearer({ aud: az.clientId })), 'content-type': 'application/cloudevents-batch+json; charset=utf-8' });
      expect(res.status).toBe(200);
      expect(app.received.map((d) => JSON.parse(d.body).id)).toEqual(['b1', 'b2', 'b3']);
      expect(app.received.every((d) => d.path === '/hook1')).toBe(true);
    });

    it("answers the app's failure with a 5xx so that the service retries", async () => {
      app.status = 500;
      const auth = await bearer({ aud: az.clientId });
      const res = await post(ce('f1'), auth);
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({ errorCode: 'ERR_INPUT_BINDING_APP_FAILED' });
      // the retry succeeds once the app is healthy again
      app.status = 204;
      expect((await post(ce('f1'), auth)).status).toBe(200);
      expect(app.received.map((d) => JSON.parse(d.body).id)).toEqual(['f1', 'f1']);
    });

    it('stops a batch at the first event the app fails', async () => {
      app.status = 503;
      const res = await post([ce('s1'), ce('s2')], { ...(await bearer({ aud: az.clientId })), 'content-type': 'application/cloudevents-batch+json' });
      expect(res.status).toBe(500);
      expect(app.received.map((d) => JSON.parse(d.body).id)).toEqual(['s1']);
    });

    it('picks up rotated signing keys from the JWKS', async () => {
      const before = az.entra.jwksRequests;
      await az.entra.rotateKeys(true);
      await new Promise((r) => setTimeout(r, 60)); // past the test's refresh cooldown
      const res = await post(ce('r1'), await bearer({ aud: az.clientId }));
      expect(res.status).toBe(200);
      expect(az.entra.jwksRequests).toBeGreaterThan(before);
      expect(app.received).toHaveLength(1);
    });

    it('rejects bad bodies from an authenticated sender with 4xx and delivers nothing', async () => {
      const auth = await bearer({ aud: az.clientId });
      expect((await post('{not json', auth)).status).toBe(400);
      expect((await post({ id: 'x', source: 's', type: 't' }, auth)).status).toBe(400); // no specversion
      expect((await post({ ...ce('v'), specversion: '0.3' }, auth)).status).toBe(400);
      expect((await post([], { ...auth, 'content-type': 'application/cloudevents-batch+json' })).status).toBe(400);
      expect((await post(ce('c'), { ...auth, 'content-type': 'text/plain' })).status).toBe(415);
      expect((await post(JSON.stringify({ ...ce('big'), data: 'x'.repeat(5 * 1024 * 1024) }), auth)).status).toBe(413);
      expect((await fetch(hook, { method: 'GET' })).status).toBe(405);
      expect(app.received).toHaveLength(0);
    });

    it('never logs the client secret or a token', async () => {
      const token = await az.entra.mint({ aud: 'wrong' });
      await post(ce('l1'), { authorization: `Bearer ${token}` });
      const logs = cap.text();
      expect(logs).toContain('bearer token not accepted');
      expect(logs).not.toContain(az.clientSecret);
      expect(logs).not.toContain(token.split('.')[2]);
    });
  });
});
