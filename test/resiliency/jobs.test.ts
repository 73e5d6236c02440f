/**
 * Job triggers to a real app under the app's own resiliency policy (targets.apps.<its id>), with
 * the sidecar's embedded scheduler:
 * - an app that fails 3 times then takes the trigger gets it on the 4th try, the policy's waits
 *   apart, with the job's failure policy `drop` (so every try is the policy's, none the scheduler's);
 * - the policy's tries and the scheduler's failure policy combine as documented: 2 tries per
 *   scheduler attempt × 2 attempts = 4 calls;
 * - a circuit that opens on a failing app: the triggers after it reach nothing, and the refusal is
 *   counted by policy;
 * - a timeout aborts the request to the app (the app sees it closed) and counts as a failed try;
 * - a gRPC app (AppCallback.OnJobEvent): UNAVAILABLE retried as `matching.gRPCStatusCodes` lists
 *   it until the app takes the trigger; INTERNAL, not listed, not retried.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { postJob, sidecarFor, startRecordingApp, waitJobDone, type RecordingApp } from '../jobs/helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

const resiliency = (spec: string) => `apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata:\n  name: job-policies\nspec:\n${spec}`;

describe('job triggers under the app\'s resiliency policy', () => {
  let app: RecordingApp | undefined;
  let sc: (Sidecar & { base: string }) | undefined;
  let dir = '';
  let extra: Server | undefined;
  afterEach(async () => {
    await sc?.close();
    sc = undefined;
    await app?.close();
    app = undefined;
    if (extra) {
      extra.closeAllConnections();
      await new Promise((r) => extra!.close(r));
      extra = undefined;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = '';
  });

  const start = async (policy: string, appPort?: number) => {
    dir = mkdtempSync(join(tmpdir(), 'rt-resiliency-jobs-'));
    const resources = join(dir, 'resources');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(resources);
    writeFileSync(join(resources, 'resiliency.yaml'), resiliency(policy));
    if (appPort === undefined) app = await startRecordingApp();
    sc = await sidecarFor({ appPort: appPort ?? app!.port, dataDir: join(dir, 'data'), resourcesPaths: [resources] });
    return sc;
  };
  const count = (name: string) => app!.received.filter((r) => r.name === name).length;

  it('an app that fails 3 times then takes the trigger gets it on the 4th try, the policy\'s waits apart', async () => {
    const s = await start(`  policies:
    retries:
      fast: { policy: constant, duration: 40ms, maxRetries: 5 }
  targets:
    apps:
      jobs-test: { retry: fast }
`);
    app!.status = (_name, n) => (n <= 3 ? 503 : 200);
    expect((await postJob(s.base, 'flaky', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    await waitJobDone(s.base, 'flaky');
    expect(count('flaky')).toBe(4);
    const at = app!.received.map((r) => r.at);
    expect(at.slice(1).every((t, i) => t - at[i] >= 35)).toBe(true);
    // every try carries the fire's due time: the app's idempotency key is the same on each
    expect(new Set(app!.received.map((r) => r.dueTime)).size).toBe(1);
    const service = s.ctx.services.resiliency!;
    expect(service.outcomes()).toEqual(
      expect.arrayContaining([
        { target: 'app:jobs-test', policy: 'fast', outcome: 'retry', count: 3 },
        { target: 'app:jobs-test', policy: 'fast', outcome: 'success', count: 1 },
      ]),
    );
  });

  it('the policy runs again on each of the scheduler\'s attempts: 2 tries × 2 attempts', async () => {
    const s = await start(`  policies:
    retries:
      DefaultAppRetryPolicy: { policy: constant, duration: 10ms, maxRetries: 1 }
`);
    app!.status = () => 500;
    expect((await postJob(s.base, 'always500', { dueTime: '0s', failurePolicy: { constant: { interval: '50ms', maxRetries: 1 } } })).status).toBe(204);
    await waitJobDone(s.base, 'always500');
    expect(count('always500')).toBe(4);
    expect(s.ctx.services.resiliency!.outcomes()).toContainEqual({ target: 'app:jobs-test', policy: 'DefaultAppRetryPolicy', outcome: 'failure', count: 2 });
  });

  it('an open circuit delivers nothing until its timeout, and says so in the counts and the metadata', async () => {
    const s = await start(`  policies:
    retries:
      fast: { policy: constant, duration: 10ms, maxRetries: 10 }
    circuitBreakers:
      cb: { maxRequests: 1, timeout: 60s, trip: consecutiveFailures >= 2 }
  targets:
    apps:
      jobs-test: { retry: fast, circuitBreaker: cb }
`);
    app!.status = () => 500;
    expect((await postJob(s.base, 'down', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    await waitJobDone(s.base, 'down');
    expect(count('down')).toBe(2);
    // a second job meets the open circuit: refused without a call
    app!.status = () => 200;
    expect((await postJob(s.base, 'later', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    await waitJobDone(s.base, 'later');
    expect(count('later')).toBe(0);
    const service = s.ctx.services.resiliency!;
    expect(service.outcomes()).toContainEqual({ target: 'app:jobs-test', policy: 'cb', outcome: 'circuit-open', count: 2 });
    const md = (await (await fetch(`${s.base}/v1.0/metadata`)).json()) as { resiliency?: { circuitBreakers: unknown[] } };
    expect(md.resiliency?.circuitBreakers).toEqual([{ target: 'app:jobs-test', policy: 'cb', state: 'open' }]);
  });

  it('a timeout aborts the request to the app and counts as a failed try', async () => {
    // an app that never answers: each request stays open until the sidecar aborts it
    let opened = 0;
    let closed = 0;
    extra = createServer((req, res) => {
      if (!req.url?.startsWith('/job/')) {
        res.statusCode = 404;
        res.end();
        return;
      }
      opened++;
      req.resume();
      res.on('close', () => closed++);
    });
    await new Promise<void>((r) => extra!.listen(0, '127.0.0.1', r));
    const s = await start(
      `  policies:
    timeouts:
      short: 200ms
    retries:
      once: { policy: constant, duration: 10ms, maxRetries: 1 }
  targets:
    apps:
      jobs-test: { timeout: short, retry: once }
`,
      (extra.address() as { port: number }).port,
    );
    const t0 = Date.now();
    expect((await postJob(s.base, 'hang', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    await waitJobDone(s.base, 'hang');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(opened).toBe(2);
    await vi.waitFor(() => expect(closed).toBe(2));
    expect(s.ctx.services.resiliency!.outcomes()).toContainEqual({ target: 'app:jobs-test', policy: 'short', outcome: 'timeout', count: 2 });
  });
});

describe('job triggers to a gRPC app under the app\'s policy', () => {
  it('retries the codes matching lists until the app takes the trigger, and not the others', async () => {
    const calls: string[] = [];
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '../../sidecar/src/app/proto'), PROTO_DIR] });
    const app = new grpc.Server();
    app.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, {
      OnJobEvent: (call: grpc.ServerUnaryCall<{ name: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        const name = call.request.name;
        calls.push(name);
        const n = calls.filter((c) => c === name).length;
        if (name === 'unavailable' && n <= 2) return cb({ code: grpc.status.UNAVAILABLE, details: 'not yet' });
        if (name === 'internal') return cb({ code: grpc.status.INTERNAL, details: 'broken' });
        cb(null, {});
      },
    });
    const port = await new Promise<number>((res, rej) => app.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    const dir = mkdtempSync(join(tmpdir(), 'rt-resiliency-jobs-grpc-'));
    const resources = join(dir, 'resources');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(resources);
    writeFileSync(join(resources, 'resiliency.yaml'), resiliency(`  policies:
    retries:
      unavailableOnly: { policy: constant, duration: 20ms, maxRetries: 5, matching: { gRPCStatusCodes: "14" } }
  targets:
    apps:
      jobs-test: { retry: unavailableOnly }
`));
    const s = await sidecarFor({ appPort: port, appProtocol: 'grpc', dataDir: join(dir, 'data'), resourcesPaths: [resources] });
    try {
      for (const name of ['unavailable', 'internal']) expect((await postJob(s.base, name, { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
      await waitJobDone(s.base, 'unavailable');
      await waitJobDone(s.base, 'internal');
      expect(calls.filter((c) => c === 'unavailable')).toHaveLength(3);
      expect(calls.filter((c) => c === 'internal')).toHaveLength(1);
      expect(s.ctx.services.resiliency!.outcomes()).toEqual(
        expect.arrayContaining([
          { target: 'app:jobs-test', policy: 'unavailableOnly', outcome: 'retry', count: 2 },
          { target: 'app:jobs-test', policy: 'unavailableOnly', outcome: 'success', count: 1 },
          { target: 'app:jobs-test', policy: 'unavailableOnly', outcome: 'failure', count: 1 },
        ]),
      );
    } finally {
      await s.close();
      await new Promise<void>((r) => app.tryShutdown(() => r()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('job triggers without a Resiliency resource', () => {
  it('keep the metadata answer without a resiliency field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-resiliency-none-'));
    const s = await sidecarFor({ dataDir: join(dir, 'data') });
    try {
      const md = (await (await fetch(`${s.base}/v1.0/metadata`)).json()) as Record<string, unknown>;
      expect(md.id).toBe('jobs-test');
      expect('resiliency' in md).toBe(false);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
