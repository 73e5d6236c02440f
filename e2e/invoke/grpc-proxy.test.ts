/**
 * gRPC proxying between real `rt run --app-protocol grpc` apps: a client calls a method no rt
 * service has (test.Greeter, JSON messages the sidecars never parse) on alpha's sidecar with the
 * rt-app-id metadata, and beta's gRPC app answers — unary, server- and client-streaming, an error
 * status with its trailers, and the target's app or sidecar down.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';
import { runRt, until, type RtProcess } from '../rt-process.ts';

const APP = join(import.meta.dirname, 'fixtures', 'grpc-app.mjs');
const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const parse = (b: Buffer) => JSON.parse(b.toString()) as Record<string, unknown>;

interface App {
  id: string;
  run: RtProcess;
  grpcPort: number;
}

describe('gRPC proxying between rt run apps (--app-protocol grpc)', () => {
  let home: string;
  const apps: App[] = [];
  let client: grpc.Client;

  async function start(id: string, opts: { command?: boolean; extra?: string[] } = {}): Promise<App> {
    const [httpPort, grpcPort, appPort] = [await freePort(), await freePort(), await freePort()];
    const args = ['run', '--app-id', id, '--app-port', String(appPort), '--app-protocol', 'grpc', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--disable-metrics', '--data-dir', join(home, id), ...(opts.extra ?? [])];
    if (opts.command !== false) args.push('--', process.execPath, APP);
    const run = runRt(args, { RT_HOME: home, HOME: home });
    const app = { id, run, grpcPort };
    apps.push(app);
    await until(run, () => run.out().includes('rt sidecar ready') && (opts.command === false || run.out().includes(`[${id}] gRPC listening`)), 60_000);
    return app;
  }

  const md = (to: string, extra: Record<string, string> = {}, header = 'rt-app-id') => {
    const m = new grpc.Metadata();
    m.set(header, to);
    for (const [k, v] of Object.entries(extra)) m.set(k, v);
    return m;
  };
  const deadline = () => ({ deadline: Date.now() + 10_000 });

  /** A unary call; the answer, or the error, with the headers and trailers that came back. */
  const unary = (method: string, req: unknown, meta: grpc.Metadata) =>
    new Promise<{ err: grpc.ServiceError | null; res?: Record<string, unknown>; headers?: grpc.Metadata; trailers?: grpc.Metadata }>((resolve) => {
      let headers: grpc.Metadata | undefined;
      let trailers: grpc.Metadata | undefined;
      const call = client.makeUnaryRequest(`/test.Greeter/${method}`, json, parse, req, meta, deadline(), (err, res) => {
        // the status (and its trailers) may follow the callback by a tick
        setImmediate(() => resolve({ err, res, headers, trailers }));
      });
      call.on('metadata', (m) => (headers = m));
      call.on('status', (s) => (trailers = s.metadata));
    });

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'rt-grpc-proxy-'));
    const [alpha] = await Promise.all([start('alpha'), start('beta'), start('one-at-a-time', { extra: ['--app-max-concurrency', '1'] })]);
    client = new grpc.Client(`127.0.0.1:${alpha.grpcPort}`, grpc.credentials.createInsecure());
  }, 150_000);
  afterAll(async () => {
    client?.close();
    await Promise.all(apps.map((a) => a.run.stop()));
    await rm(home, { recursive: true, force: true });
  });
  const app = (id: string) => apps.filter((a) => a.id === id).at(-1)!;

  it('proxies a unary call with its metadata, and brings back the answer, headers and trailers', async () => {
    for (const header of ['rt-app-id', 'dapr-app-id']) {
      // an app cannot pose as another caller through the hop's own metadata
      const { err, res, headers, trailers } = await unary('Greet', { name: 'world' }, md('beta', { 'x-custom': 'hi', 'rt-invoke-caller-app-id': 'admin', 'rt-invoke-caller-trust-domain': 'evil' }, header));
      expect(err).toBeNull();
      // the routing metadata stays with the sidecars; the caller's id arrives as the sidecars exchanged it
      expect(res).toEqual({ hello: 'world', app: 'beta', caller: 'alpha', custom: 'hi', routed: 0 });
      expect(headers?.get('x-app')).toEqual(['beta']);
      expect(trailers?.get('x-trailer')).toEqual(['done']);
    }
  });

  it('proxies server-streaming and client-streaming calls message by message', async () => {
    const got: unknown[] = [];
    const stream = client.makeServerStreamRequest('/test.Greeter/Count', json, parse, { n: 5 }, md('beta'), deadline());
    for await (const m of stream) got.push(m);
    expect(got).toEqual([1, 2, 3, 4, 5].map((i) => ({ i, app: 'beta' })));

    const total = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const call = client.makeClientStreamRequest('/test.Greeter/Sum', json, parse, md('beta'), deadline(), (err, res) => (err ? reject(err) : resolve(res!)));
      for (const n of [1, 2, 3, 4]) call.write({ n });
      call.end();
    });
    expect(total).toEqual({ total: 10, app: 'beta' });
  });

  it("holds the target's --app-max-concurrency for proxied calls", async () => {
    const t0 = Date.now();
    const answers = await Promise.all([1, 2, 3, 4].map(() => unary('Slow', {}, md('one-at-a-time'))));
    expect(answers.map((a) => a.err)).toEqual([null, null, null, null]);
    expect(Math.max(...answers.map((a) => a.res!.most as number))).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4 * 150 - 20);
  });

  it("passes the target app's error status, message and trailers through unchanged", async () => {
    const { err, trailers } = await unary('Fail', { name: 'thing' }, md('beta'));
    expect(err?.code).toBe(grpc.status.NOT_FOUND);
    expect(err?.details).toBe('beta has no thing');
    expect(trailers?.get('x-reason')).toEqual(['missing']);
  });

  it('answers UNIMPLEMENTED without rt-app-id, and UNAVAILABLE saying what was tried for an unknown app', async () => {
    const none = await unary('Greet', { name: 'x' }, new grpc.Metadata());
    expect(none.err?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(none.err?.details).toMatch(/rt-app-id/);
    const unknown = await unary('Greet', { name: 'x' }, md('nobody'));
    expect(unknown.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(unknown.err?.details).toMatch(/no running app "nobody".*running apps: alpha, beta, one-at-a-time/);
  });

  it('fails clearly and at once when the target app or its sidecar is down, and reaches it once it is back', async () => {
    await start('gamma', { command: false }); // a sidecar whose app never listens
    let t0 = Date.now();
    const appDown = await unary('Greet', { name: 'x' }, md('gamma'));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(appDown.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(appDown.err?.details).toMatch(/app "gamma" at 127\.0\.0\.1:\d+ did not answer/);

    await app('beta').run.stop();
    t0 = Date.now();
    const gone = await unary('Greet', { name: 'x' }, md('beta'));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(gone.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(gone.err?.details).toMatch(/beta/);
    await start('beta');
    const back = await unary('Greet', { name: 'again' }, md('beta'));
    expect(back.err).toBeNull();
    expect(back.res).toMatchObject({ hello: 'again', app: 'beta' });
  }, 90_000);
});
