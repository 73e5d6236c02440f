/**
 * Mutual TLS between sidecars, with real sidecars in this process (found through a private
 * registry, RT_HOME), certificates from a test issuer (a real CA gRPC server signing with
 * issueFor), real sockets and real TLS:
 * - HTTP/1.1 and gRPC (CallStream) invocation both ways over mTLS, and gRPC proxying to a gRPC app;
 * - the receiving sidecar takes the caller from the certificate: a forged caller header with a
 *   valid certificate of another app is refused, a missing one is filled in;
 * - a plain-TCP client, a TLS client without a certificate and one with a certificate of another
 *   root are refused at the handshake;
 * - the calling sidecar checks the callee's SPIFFE ID (a registry entry pointing at another app);
 * - accessControl allows and denies by the verified identity.
 */
import { createServer, type Server } from 'node:http';
import { connect as netConnect } from 'node:net';
import { request as httpsRequest } from 'node:https';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCsr, createRootCa, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';
import { issueFor } from '../../sidecar/src/identity/issue.ts';
import { listEntries, register, registryDir } from '../../sidecar/src/invoke/registry/local.ts';
import { internalClient, type InvokeChunk } from '../../sidecar/src/invoke/proto.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { startTestIssuer, type TestIssuer } from './test-issuer.ts';

const HOUR = 3_600_000;
const raw = (b: Buffer) => b;

/** A unary call of /test.Echo/Say with raw bytes; the answer's text or the error. */
function say(client: grpc.Client, md: grpc.Metadata): Promise<{ text?: string; code?: number; details?: string }> {
  return new Promise((resolve) => client.makeUnaryRequest('/test.Echo/Say', raw, raw, Buffer.from('hi'), md, (err, res) => resolve(err ? { code: err.code, details: err.details } : { text: res!.toString() })));
}

describe('mutual TLS between sidecars', () => {
  let dir: string;
  let issuer: TestIssuer;
  let app: Server;
  let grpcApp: grpc.Server;
  const sidecars: Record<string, Sidecar> = {};
  const prev = { home: process.env.RT_HOME, transport: process.env.RT_INVOKE_TRANSPORT };
  let targetPort = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-mtls-'));
    process.env.RT_HOME = join(dir, 'home');
    issuer = await startTestIssuer({ ttlMs: HOUR });
    app = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ url: req.url, caller: req.headers['rt-caller-app-id'] }));
      });
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    await writeFile(
      join(dir, 'config.yaml'),
      'apiVersion: rt.io/v1alpha1\nkind: Configuration\nmetadata: { name: guarded }\nspec:\n  accessControl:\n    defaultAction: deny\n    policies:\n      - { appId: frontend, namespace: default, defaultAction: allow }\n',
    );
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }), mtls: { issuerAddress: issuer.address } };
    sidecars.target = await startSidecar({ ...common, appId: 'target', appPort });
    sidecars.frontend = await startSidecar({ ...common, appId: 'frontend', appPort });
    sidecars.guarded = await startSidecar({ ...common, appId: 'guarded', appPort, configFile: join(dir, 'config.yaml') });
    sidecars.intruder = await startSidecar({ ...common, appId: 'intruder' });
    // a gRPC app whose one method answers with the caller its sidecar handed it
    grpcApp = new grpc.Server();
    grpcApp.addService({ Say: { path: '/test.Echo/Say', requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw } } as unknown as grpc.ServiceDefinition, {
      Say: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(String(call.metadata.get('dapr-caller-app-id')[0]))),
    });
    const grpcAppPort = await new Promise<number>((res, rej) => grpcApp.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    sidecars.grpcTarget = await startSidecar({ ...common, appId: 'grpc-target', appPort: grpcAppPort, appProtocol: 'grpc' });
    process.env.RT_INVOKE_TRANSPORT = 'grpc';
    sidecars.overGrpc = await startSidecar({ ...common, appId: 'caller-grpc', appPort });
    delete process.env.RT_INVOKE_TRANSPORT;
    targetPort = listEntries(registryDir()).find((e) => e.appId === 'target')!.internalGrpcPort;
  });
  afterAll(async () => {
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    app?.close();
    grpcApp?.forceShutdown();
    await issuer?.stop();
    for (const [k, v] of [['RT_HOME', prev.home], ['RT_INVOKE_TRANSPORT', prev.transport]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await rm(dir, { recursive: true, force: true });
  });

  const invoke = (from: Sidecar, to: string, path = 'hello') => fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/${to}/method/${path}`, { method: 'POST', body: 'x' });

  /** A workload certificate of the test root for any app, as a peer that is not a sidecar would hold. */
  const certificateOf = async (appId: string) => {
    const key = newWorkloadKey();
    const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'default', appId });
    const issued = await issueFor(issuer.settings, { namespace: 'default', appId }, { id: appId, namespace: 'default', trustDomain: 'cluster.local', csrPem });
    return { key: key.keyPem, cert: issued.certPem, ca: issuer.ca.certPem };
  };

  /** One HTTP/1.1 request over TLS straight to the target sidecar's internal port (no ALPN offered: HTTP/1.1). */
  const direct = (tls: { key?: string; cert?: string; ca: string }, headers: Record<string, string>) =>
    new Promise<{ status?: number; body?: string; error?: string }>((resolve) => {
      const req = httpsRequest({ host: '127.0.0.1', port: targetPort, path: '/hello', method: 'GET', headers, agent: false, ...tls, checkServerIdentity: () => undefined }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
      req.on('error', (e) => resolve({ error: e.message }));
      req.end();
    });

  it('gets every sidecar a certificate naming its app, and serves only TLS on the internal port', async () => {
    const id = sidecars.target.ctx.identity!;
    expect(id.current?.id).toEqual({ trustDomain: 'cluster.local', namespace: 'default', appId: 'target' });
    expect((await fetch(`http://127.0.0.1:${sidecars.target.httpPort}/v1.0/healthz`)).status).toBe(204);
    expect(issuer.signed).toBeGreaterThanOrEqual(5);
  });

  it('invokes over mutual TLS both ways, on HTTP/1.1 and on the gRPC stream; the app gets the caller from the certificate', async () => {
    for (const [from, to, caller] of [
      [sidecars.frontend, 'target', 'frontend'],
      [sidecars.target, 'frontend', 'target'],
      [sidecars.overGrpc, 'target', 'caller-grpc'],
      [sidecars.frontend, 'caller-grpc', 'frontend'],
    ] as const) {
      const res = await invoke(from, to);
      expect(res.status, `${caller} -> ${to}`).toBe(200);
      expect(await res.json()).toEqual({ url: '/hello', caller });
    }
  });

  it("proxies a gRPC call to another sidecar's gRPC app over mTLS; a proxied call with a forged caller is refused", async () => {
    const client = new grpc.Client(`127.0.0.1:${sidecars.frontend.grpcPort}`, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('rt-app-id', 'grpc-target');
    try {
      expect(await say(client, md)).toEqual({ text: 'frontend' });
    } finally {
      client.close();
    }
    const intruder = await certificateOf('intruder');
    const port = listEntries(registryDir()).find((e) => e.appId === 'grpc-target')!.internalGrpcPort;
    const direct = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createSsl(Buffer.from(intruder.ca), Buffer.from(intruder.key), Buffer.from(intruder.cert), { checkServerIdentity: () => undefined }), { 'grpc.ssl_target_name_override': 'rt-internal' });
    try {
      const forged = new grpc.Metadata();
      forged.set('rt-invoke-target', 'grpc-target');
      forged.set('rt-invoke-caller-app-id', 'frontend');
      expect(await say(direct, forged)).toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: expect.stringContaining('spiffe://cluster.local/ns/default/intruder') });
      const plain = new grpc.Metadata();
      plain.set('rt-invoke-target', 'grpc-target');
      expect(await say(direct, plain)).toEqual({ text: 'intruder' });
    } finally {
      direct.close();
    }
  });

  it('refuses a caller header that disagrees with the certificate, and fills in a missing one', async () => {
    const intruder = await certificateOf('intruder');
    const forged = await direct(intruder, { 'rt-invoke-target': 'target', 'rt-invoke-caller-app-id': 'frontend', 'rt-invoke-caller-namespace': 'default' });
    expect(forged.status).toBe(403);
    expect(JSON.parse(forged.body!)).toMatchObject({ errorCode: 'ERR_DIRECT_INVOKE', message: expect.stringContaining('caller\'s app id "frontend", but the caller\'s certificate is spiffe://cluster.local/ns/default/intruder') });
    const otherNs = await direct(intruder, { 'rt-invoke-target': 'target', 'rt-invoke-caller-namespace': 'kube-system' });
    expect(otherNs.status).toBe(403);
    const none = await direct(intruder, { 'rt-invoke-target': 'target' });
    expect(none.status).toBe(200);
    expect(JSON.parse(none.body!)).toEqual({ url: '/hello', caller: 'intruder' });
    // the gRPC stream's head likewise
    const creds = grpc.credentials.createSsl(Buffer.from(intruder.ca), Buffer.from(intruder.key), Buffer.from(intruder.cert), { checkServerIdentity: () => undefined });
    const Ctor = internalClient();
    const client = new Ctor(`127.0.0.1:${targetPort}`, creds, { 'grpc.ssl_target_name_override': 'rt-internal' });
    try {
      const answer = await new Promise<InvokeChunk>((resolve, reject) => {
        const call = (client as unknown as { CallStream(md: grpc.Metadata): grpc.ClientDuplexStream<InvokeChunk, InvokeChunk> }).CallStream(new grpc.Metadata());
        call.on('data', (m: InvokeChunk) => resolve(m));
        call.on('error', reject);
        call.end({ request: { method: 'GET', path: '/hello', query: '', headers: [], caller: { app_id: 'frontend', namespace: 'default', trust_domain: '' }, target_app_id: 'target', has_body: false } });
      });
      expect(answer.response).toMatchObject({ status: 403, error_code: 'ERR_DIRECT_INVOKE', message: expect.stringContaining('spiffe://cluster.local/ns/default/intruder') });
    } finally {
      client.close();
    }
  });

  it('refuses a plain-TCP client, a TLS client without a certificate and one with a certificate of another root, at the handshake', async () => {
    const plain = await new Promise<string>((resolve) => {
      const s = netConnect(targetPort, '127.0.0.1', () => s.write('GET /hello HTTP/1.1\r\nhost: x\r\nrt-invoke-target: target\r\n\r\n'));
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      s.on('error', () => undefined);
      s.on('close', () => resolve(text));
    });
    expect(plain).not.toMatch(/^HTTP\/1.1 200/);
    expect(plain).not.toContain('/hello');
    const anonymous = await direct({ ca: issuer.ca.certPem }, { 'rt-invoke-target': 'target' });
    expect(anonymous.status).toBeUndefined();
    expect(anonymous.error).toBeDefined();
    const otherRoot = await createRootCa({ ttlMs: HOUR });
    const key = newWorkloadKey();
    const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'default', appId: 'frontend' });
    const stranger = await issueFor({ ...issuer.settings, ca: otherRoot, trustBundlePem: otherRoot.certPem }, { namespace: 'default', appId: 'frontend' }, { id: 'frontend', namespace: 'default', trustDomain: 'cluster.local', csrPem });
    const foreign = await direct({ key: key.keyPem, cert: stranger.certPem, ca: issuer.ca.certPem }, { 'rt-invoke-target': 'target' });
    expect(foreign.status).toBeUndefined();
  });

  it('checks that the callee is the app meant: a registry entry of "ghost" pointing at target\'s port is refused', async () => {
    const entry = listEntries(registryDir()).find((e) => e.appId === 'target')!;
    const ghost = register({ ...entry, appId: 'ghost', internalSocket: undefined, startedAt: new Date().toISOString() }, registryDir());
    try {
      let res: Response | undefined;
      for (let i = 0; i < 50; i++) {
        res = await invoke(sidecars.frontend, 'ghost');
        const body = (await res.json()) as { message: string };
        if (!/no running app/.test(body.message)) {
          expect(res.status).toBe(500);
          expect(body.message).toMatch(/spiffe:\/\/cluster.local\/ns\/default\/target, not spiffe:\/\/cluster.local\/ns\/default\/ghost/);
          return;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('the ghost entry was never found');
    } finally {
      ghost.remove();
    }
  });

  it('applies accessControl to the identity the certificate proves', async () => {
    const allowed = await invoke(sidecars.frontend, 'guarded');
    expect(allowed.status).toBe(200);
    const denied = await invoke(sidecars.intruder, 'guarded');
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { message: string }).message).toContain('spiffe://cluster.local/ns/default/intruder');
  });
});
