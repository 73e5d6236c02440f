/**
 * Where an application written against the reference runtime broke on rt (issues 16 and 22),
 * through the @dapr/dapr client as that application calls it, over HTTP and gRPC, plus the raw
 * answers its error handling reads: Redis etag rules, request metadata precedence, the workflow
 * error codes, the rich error model's ErrorInfo and 501 for a building block rt does not have.
 */
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorInfos } from '../../sidecar/src/pluggable/errors.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../../test/grpc/harness.ts';
import { requireService } from '../../test/services/ci.ts';
import { redisMetadata, redisTarget } from '../../test/services/redis.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const prefix = `sdk-compat-${randomBytes(4).toString('hex')}`;
const noop = () => undefined;
const quiet = { error: noop, warn: noop, info: noop, verbose: noop, debug: noop };

let s: RuntimeSidecar;
let http: DaprClient;
let base: string;
beforeAll(async () => {
  s = await startRuntimeSidecar({ extraComponents: haveRedis ? [componentYaml('redis', 'state.redis', { ...redisMetadata(redis), keyPrefix: prefix })] : [] });
  base = `http://127.0.0.1:${s.sidecar.httpPort}`;
  http = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(s.sidecar.httpPort), communicationProtocol: CommunicationProtocolEnum.HTTP, logger: { level: LogLevel.Error, service: quiet } });
});
afterAll(async () => {
  if (s && haveRedis) {
    const keys = ['e-http', 'e-grpc', 'gone-http', 'gone-grpc'].map((k) => ({ key: `${prefix}||${k}` }));
    await s.sidecar.ctx.components.stateStore('redis')?.bulkDelete(keys).catch(() => undefined);
  }
  await http?.stop().catch(() => undefined);
  await s?.stop();
});

describe.runIf(haveRedis)('state.redis etags as the reference Redis store has them, through the SDK', () => {
  for (const proto of ['http', 'grpc'] as const) {
    it(`${proto}: a save with an etag for a key that does not exist writes it; a delete of a missing key with an etag succeeds`, async () => {
      const c = proto === 'http' ? http : s.sdk();
      const saved = await c.state.save('redis', [{ key: `e-${proto}`, value: { v: 1 }, etag: '7' }]);
      expect(saved.error).toBeUndefined();
      expect(await c.state.get('redis', `e-${proto}`)).toEqual({ v: 1 });
      // the key now has a version: a stale etag is refused (the SDK returns the error over HTTP, throws it over gRPC)
      const stale = c.state.save('redis', [{ key: `e-${proto}`, value: { v: 2 }, etag: '7' }]);
      if (proto === 'http') expect((await stale).error).toBeDefined();
      else await expect(stale).rejects.toThrow(/etag mismatch/);
      const deleted = await c.state.delete('redis', `gone-${proto}`, { etag: '3' });
      expect(deleted.error).toBeUndefined();
    });
  }
});

describe('request metadata wins over item metadata', () => {
  it('the SDK save options metadata (query parameters) override the item ttlInSeconds', async () => {
    const saved = await http.state.save('mem', [{ key: 'ttl-wins', value: 1, metadata: { ttlInSeconds: '1' } }], { metadata: { ttlInSeconds: '300' } });
    expect(saved.error).toBeUndefined();
    const expiry = Date.parse((await fetch(`${base}/v1.0/state/mem/ttl-wins`)).headers.get('metadata.ttlexpiretime') ?? '');
    expect(expiry - Date.now()).toBeGreaterThan(290_000);
  });
});

describe('workflow error codes that client code checks', () => {
  it('a 65-character instance id is ERR_INSTANCE_ID_TOO_LONG (SDK over HTTP, and gRPC)', async () => {
    const long = 'x'.repeat(65);
    await expect(http.workflow.start('greet', 'in', long)).rejects.toThrow(/ERR_INSTANCE_ID_TOO_LONG/);
    const r = await fetch(`${base}/v1.0-beta1/workflows/dapr/greet/start?instanceID=${long}`, { method: 'POST', body: '"in"' });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { errorCode: string }).errorCode).toBe('ERR_INSTANCE_ID_TOO_LONG');
    const e = await s.fail('StartWorkflowBeta1', { instance_id: long, workflow_component: 'dapr', workflow_name: 'greet' });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.metadata.get('rt-error-code')).toEqual(['ERR_INSTANCE_ID_TOO_LONG']);
  });

  it('raiseEvent without an event name is ERR_WORKFLOW_EVENT_NAME_MISSING', async () => {
    await http.workflow.start('greet', 'in', 'raise-me');
    const e = await s.fail('RaiseEventWorkflowBeta1', { instance_id: 'raise-me', workflow_component: 'dapr', event_name: '' });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.metadata.get('rt-error-code')).toEqual(['ERR_WORKFLOW_EVENT_NAME_MISSING']);
    expect(errorInfos(e).map((i) => i.reason)).toEqual(['ERR_WORKFLOW_EVENT_NAME_MISSING']);
  });
});

describe('the rich error model', () => {
  it('HTTP error bodies carry a google.rpc.ErrorInfo in details; gRPC errors carry it in grpc-status-details-bin', async () => {
    const r = await fetch(`${base}/v1.0/state/nosuchstore/k`);
    expect(r.status).toBe(400);
    const body = (await r.json()) as { errorCode: string; details: unknown[] };
    expect(body.errorCode).toBe('ERR_STATE_STORE_NOT_FOUND');
    // what the error had to say already (the loaded stores), then the ErrorInfo
    expect(body.details[0]).toMatchObject({ loaded: expect.arrayContaining(['mem']) });
    expect(body.details[1]).toEqual({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'ERR_STATE_STORE_NOT_FOUND', domain: 'rt.io', metadata: {} });
    const e = await s.fail('GetState', { store_name: 'nosuchstore', key: 'k' });
    expect(errorInfos(e)).toEqual([{ reason: 'ERR_STATE_STORE_NOT_FOUND', domain: 'rt.io', metadata: {} }]);
  });

  it('a building block rt does not have is 501 ERR_API_UNIMPLEMENTED naming it (HTTP), UNIMPLEMENTED with the same reason (gRPC)', async () => {
    const published = await http.pubsub.publish('pubsub', 'orders', { id: 1 });
    expect(published.error).toBeDefined();
    for (const [path, block] of [['/v1.0-alpha2/conversation/c/converse', 'conversation']]) {
      const r = await fetch(base + path, { method: 'POST', body: '{}' });
      expect(r.status, path).toBe(501);
      const body = (await r.json()) as { errorCode: string; message: string };
      expect(body.errorCode).toBe('ERR_API_UNIMPLEMENTED');
      expect(body.message).toContain(`rt has no ${block} building block`);
    }
    expect((await fetch(`${base}/v1.0/nothing-here`)).status).toBe(404);
    // not in our protos: a raw call
    const e = (await s.raw('ConverseAlpha1', Buffer.alloc(0)).then(
      () => undefined,
      (err: grpc.ServiceError) => err,
    ))!;
    expect(e.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(errorInfos(e).map((i) => i.reason)).toEqual(['ERR_API_UNIMPLEMENTED']);
  });
});
