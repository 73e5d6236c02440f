/**
 * The one grpc-js server setup (shared/grpc-server.ts) on real sockets: interceptors see every
 * call, the receive limit refuses a larger message, an IPv6 host binds, TLS serves with the
 * given certificate, and close() lets a call finish within the grace period but cuts a stream
 * that never ends, at once with grace 0. The sidecar's GrpcServer takes interceptors before its
 * first connection.
 */
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { grpcBindAddress, startGrpcServer, type StartedGrpcServer } from '../../shared/grpc-server.ts';
import { GrpcServer } from '../../sidecar/src/grpc/server.ts';
import { makeTestCa } from '../services/ca.ts';

const raw = (b: Buffer) => b;
const method = (path: string, responseStream: boolean) => ({
  path,
  requestStream: false,
  responseStream,
  requestSerialize: raw,
  requestDeserialize: raw,
  responseSerialize: raw,
  responseDeserialize: raw,
});
/** Echo answers its request; Hold writes one message, then never ends; Slow answers after 300 ms. */
const definition = { Echo: method('/t.T/Echo', false), Hold: method('/t.T/Hold', true), Slow: method('/t.T/Slow', false) } as unknown as grpc.ServiceDefinition;
const implementation: grpc.UntypedServiceImplementation = {
  Echo: ((call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request)) as grpc.UntypedHandleCall,
  Hold: ((call: grpc.ServerWritableStream<Buffer, Buffer>) => void call.write(Buffer.from('first'))) as grpc.UntypedHandleCall,
  Slow: ((call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => setTimeout(() => cb(null, call.request), 300)) as grpc.UntypedHandleCall,
};
const Client = grpc.makeGenericClientConstructor(definition, 'T');
type TestClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

const log = pino({ level: 'silent' });
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serve(opts: Partial<Parameters<typeof startGrpcServer>[0]> = {}): Promise<StartedGrpcServer> {
  const s = await startGrpcServer({ host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, services: (server) => server.addService(definition, implementation), ...opts });
  cleanup.push(() => s.server.forceShutdown());
  return s;
}

function client(address: string, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): TestClient {
  const c = new Client(address, credentials, { 'grpc.max_send_message_length': -1, ...options }) as unknown as TestClient;
  cleanup.push(() => c.close());
  return c;
}

const echo = (c: TestClient, body: Buffer, name = 'Echo') =>
  new Promise<Buffer>((resolve, reject) => c[name](body, (err: grpc.ServiceError | null, res: Buffer) => (err ? reject(err) : resolve(res))));

function tracer(seen: string[]): grpc.ServerInterceptor {
  return (desc, call) => {
    seen.push(desc.path);
    return new grpc.ServerInterceptingCall(call);
  };
}

describe('shared/grpc-server.ts', () => {
  it('brackets an IPv6 host, and leaves a name or an IPv4 address as it is', () => {
    expect(grpcBindAddress('::1', 50)).toBe('[::1]:50');
    expect(grpcBindAddress('[::1]', 50)).toBe('[::1]:50');
    expect(grpcBindAddress('0.0.0.0', 6500)).toBe('0.0.0.0:6500');
    expect(grpcBindAddress('localhost', 0)).toBe('localhost:0');
  });

  it('serves on a free port, every call through the interceptors given', async () => {
    const seen: string[] = [];
    const s = await serve({ interceptors: [tracer(seen)] });
    expect(s.port).toBeGreaterThan(0);
    expect(s.address).toBe(`127.0.0.1:${s.port}`);
    expect((await echo(client(s.address), Buffer.from('hi'))).toString()).toBe('hi');
    expect(seen).toEqual(['/t.T/Echo']);
  });

  it('binds an IPv6 loopback address', async () => {
    const s = await serve({ host: '::1' });
    expect(s.address).toBe(`[::1]:${s.port}`);
    expect((await echo(client(s.address), Buffer.from('v6'))).toString()).toBe('v6');
  });

  it('refuses a message above maxReceiveBytes with RESOURCE_EXHAUSTED, and takes one at the limit', async () => {
    const s = await serve({ maxReceiveBytes: 1024 });
    const c = client(s.address);
    expect((await echo(c, Buffer.alloc(1024))).length).toBe(1024);
    await expect(echo(c, Buffer.alloc(1025))).rejects.toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
  });

  it('serves TLS with the certificate given, and refuses a client certificate asked for without TLS', async () => {
    const ca = makeTestCa();
    cleanup.push(() => ca.remove());
    const s = await serve({ host: 'localhost', tls: { cert: Buffer.from(ca.cert), key: Buffer.from(ca.key) }, log });
    const c = client(`localhost:${s.port}`, grpc.credentials.createSsl(Buffer.from(ca.caPem)));
    expect((await echo(c, Buffer.from('tls'))).toString()).toBe('tls');
    await expect(serve({ clientCertificate: 'require' })).rejects.toThrow(/only be asked for over TLS/);
  });

  it('close() lets an open call finish within the grace period', async () => {
    const s = await serve({ shutdownGraceMs: 5000 });
    const c = client(s.address);
    await echo(c, Buffer.from('warm'));
    const slow = echo(c, Buffer.from('slow'), 'Slow');
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    await s.close();
    expect((await slow).toString()).toBe('slow');
    expect(Date.now() - t0).toBeLessThan(4000);
  });

  it('close() cuts a stream that never ends after the grace period, and at once with grace 0', async () => {
    for (const graceMs of [400, 0]) {
      const s = await serve({ shutdownGraceMs: graceMs });
      const stream = client(s.address).Hold(Buffer.alloc(0)) as grpc.ClientReadableStream<Buffer>;
      const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
      await new Promise((r) => stream.once('data', r));
      const t0 = Date.now();
      await s.close();
      const took = Date.now() - t0;
      // grpc-js resets the stream (CANCELLED) or the connection goes first (UNAVAILABLE)
      expect([grpc.status.CANCELLED, grpc.status.UNAVAILABLE]).toContain((await ended).code);
      if (graceMs === 0) expect(took).toBeLessThan(200);
      else expect(took).toBeGreaterThanOrEqual(graceMs - 20);
    }
  });
});

describe("the sidecar's GrpcServer", () => {
  it('runs interceptors added before the first connection, and refuses one added after', async () => {
    const seen: string[] = [];
    const server = new GrpcServer(log);
    cleanup.push(() => server.close());
    server.addInterceptor(tracer(seen));
    server.addService(() => ({ definition, implementation }));
    const port = await server.listen('127.0.0.1', 0);
    expect((await echo(client(`127.0.0.1:${port}`), Buffer.from('sidecar'))).toString()).toBe('sidecar');
    expect(seen).toEqual(['/t.T/Echo']);
    expect(() => server.addInterceptor(tracer(seen))).toThrow(/before the port serves its first connection/);
  });
});
