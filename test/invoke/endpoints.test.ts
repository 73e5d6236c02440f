/**
 * HTTPEndpoint resources and URL targets: a real sidecar calls loopback HTTP and HTTPS servers
 * with the endpoint's headers (a secretKeyRef one from a real secret store) and its clientTLS root CA.
 */
import { createServer as createHttps } from 'node:https';
import { createServer as createHttp, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';

async function echo(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url?.includes('/status/')) {
    res.writeHead(Number(req.url.split('/status/')[1]), { 'x-upstream': 'yes' });
    res.end('upstream says no');
    return;
  }
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() }));
}

const listen = (s: Server) => new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as { port: number }).port)));

describe('invocation of HTTPEndpoints and URLs', () => {
  let dir: string;
  let ca: TestCa;
  let https: Server;
  let http: Server;
  let httpsPort: number;
  let httpPort: number;
  let s: Sidecar;
  const prevHome = process.env.RT_HOME;
  const base = () => `http://127.0.0.1:${s.httpPort}`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-ep-'));
    process.env.RT_HOME = join(dir, 'home');
    ca = makeTestCa();
    https = createHttps({ key: ca.key, cert: ca.cert }, (q, r) => void echo(q, r));
    http = createHttp((q, r) => void echo(q, r));
    [httpsPort, httpPort] = [await listen(https), await listen(http)];
    await mkdir(join(dir, 'res'));
    await writeFile(join(dir, 'secrets.json'), JSON.stringify({ 'api-token': 'Bearer s3cret' }));
    const docs = [
      { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'vault' }, spec: { type: 'secretstores.local.file', version: 'v1', metadata: [{ name: 'secretsFile', value: join(dir, 'secrets.json') }] } },
      {
        apiVersion: 'rt.io/v1alpha1',
        kind: 'HTTPEndpoint',
        metadata: { name: 'partner' },
        spec: {
          baseUrl: `https://127.0.0.1:${httpsPort}/api/v2`,
          headers: [{ name: 'X-Fixed', value: 'from-endpoint' }, { name: 'Authorization', secretKeyRef: { name: 'api-token', key: 'api-token' } }],
          clientTLS: { rootCA: { value: ca.caPem } },
        },
        auth: { secretStore: 'vault' },
      },
    ];
    await writeFile(join(dir, 'res', 'resources.yaml'), docs.map((d) => JSON.stringify(d)).join('\n---\n'));
    s = await startSidecar({ appId: 'caller', httpPort: 0, grpcPort: 0, enableMetrics: false, resourcesPaths: [join(dir, 'res')], dataDir: dir, logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    await s?.close();
    https?.close();
    http?.close();
    ca?.remove();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  it("calls an HTTPEndpoint by name under its base URL, with its headers (secretKeyRef too) over TLS with its root CA", async () => {
    const res = await fetch(`${base()}/v1.0/invoke/partner/method/orders/7?full=1`, { method: 'POST', headers: { 'content-type': 'text/plain', 'x-mine': 'kept' }, body: 'hello' });
    expect(res.status).toBe(200);
    const got = (await res.json()) as { method: string; url: string; headers: Record<string, string>; body: string };
    expect(got).toMatchObject({ method: 'POST', url: '/api/v2/orders/7?full=1', body: 'hello' });
    expect(got.headers).toMatchObject({ 'x-fixed': 'from-endpoint', authorization: 'Bearer s3cret', 'x-mine': 'kept', host: `127.0.0.1:${httpsPort}` });
  });

  it('calls a URL given as the target', async () => {
    const res = await fetch(`${base()}/v1.0/invoke/${encodeURIComponent(`http://127.0.0.1:${httpPort}`)}/method/ping?x=1`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ method: 'GET', url: '/ping?x=1' });
  });

  it("passes the endpoint's own error status through, and answers ERR_DIRECT_INVOKE when it cannot be reached or trusted", async () => {
    const no = await fetch(`${base()}/v1.0/invoke/partner/method/status/503`);
    expect(no.status).toBe(503);
    expect(no.headers.get('x-upstream')).toBe('yes');
    expect(await no.text()).toBe('upstream says no');
    // the same HTTPS server as a bare URL: no clientTLS, so its certificate is not trusted
    const untrusted = await fetch(`${base()}/v1.0/invoke/${encodeURIComponent(`https://127.0.0.1:${httpsPort}`)}/method/x`);
    expect(untrusted.status).toBe(500);
    const body = (await untrusted.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_DIRECT_INVOKE');
    expect(body.message).toMatch(/certificate/i);
    const closed = await fetch(`${base()}/v1.0/invoke/${encodeURIComponent('http://127.0.0.1:1')}/method/x`);
    expect(closed.status).toBe(500);
    expect(((await closed.json()) as { errorCode: string }).errorCode).toBe('ERR_DIRECT_INVOKE');
  });
});
