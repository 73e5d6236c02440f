/**
 * Service invocation between real `rt run` processes (standalone): the local registry under a
 * private RT_HOME, the internal port between sidecars (HTTP/1.1 over its Unix socket), streamed bodies, the errors users
 * of this API expect, a target that is down or restarted, and the @dapr/dapr client's invoker.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommunicationProtocolEnum, DaprClient, HttpMethod, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';
import { runRt, until, type RtProcess } from '../rt-process.ts';

const APP = join(import.meta.dirname, 'fixtures', 'app.mjs');

interface App {
  id: string;
  run: RtProcess;
  httpPort: number;
  grpcPort: number;
  appPort: number;
}

describe('service invocation between rt run apps', () => {
  let home: string;
  const apps: App[] = [];

  async function start(id: string, opts: { command?: boolean; appPort?: number; extra?: string[] } = {}): Promise<App> {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const appPort = opts.appPort ?? (await freePort());
    const args = ['run', '--app-id', id, '--app-port', String(appPort), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--disable-metrics', '--data-dir', join(home, id), ...(opts.extra ?? [])];
    if (opts.command !== false) args.push('--', process.execPath, APP);
    const run = runRt(args, { RT_HOME: home, HOME: home });
    const app = { id, run, httpPort, grpcPort, appPort };
    apps.push(app);
    await until(run, () => run.out().includes('rt sidecar ready') && (opts.command === false || run.out().includes(`[${id}] listening`)), 60_000);
    return app;
  }

  const invoke = (from: App, path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${from.httpPort}${path}`, init);

  /**
   * One call through node:http, which sends a body with any verb (fetch refuses one on a GET). A body
   * given as parts is sent chunked (the headers must say so), 300 ms between parts.
   */
  const send = (from: App, method: string, path: string, headers: Record<string, string>, body?: string | string[]) =>
    new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: from.httpPort, method, path, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      });
      req.on('error', reject);
      if (!Array.isArray(body)) return void req.end(body);
      const [first, ...rest] = body;
      req.write(first);
      const next = () => (rest.length > 1 ? (req.write(rest.shift()), setTimeout(next, 300)) : req.end(rest.shift()));
      setTimeout(next, 300);
    });
  /** Both forms of a call of the target's `/echo/get?q=1`: the invoke path, and the dapr-app-id header. */
  const forms = (to: string): { form: string; path: string; headers: Record<string, string> }[] => [
    { form: 'invoke path', path: `/v1.0/invoke/${to}/method/echo/get?q=1`, headers: {} },
    { form: 'dapr-app-id header', path: '/echo/get?q=1', headers: { 'dapr-app-id': to } },
  ];
  interface Echo {
    app: string;
    method: string;
    url: string;
    headers: Record<string, string>;
    body: string;
  }

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'rt-invoke-'));
    await Promise.all([start('alpha'), start('beta'), start('gamma')]);
  }, 150_000);
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.run.stop()));
    await rm(home, { recursive: true, force: true });
  });
  const app = (id: string) => apps.filter((a) => a.id === id).at(-1)!;

  it('passes method, path, query, headers and body to the target app, and its status and headers back', async () => {
    const res = await invoke(app('alpha'), '/v1.0/invoke/beta/method/echo/a%2Fb?x=1&y=two', { method: 'PUT', headers: { 'content-type': 'text/plain', 'x-custom': 'hello' }, body: 'payload' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-app')).toBe('beta');
    const got = (await res.json()) as { app: string; method: string; url: string; headers: Record<string, string>; body: string };
    expect(got).toMatchObject({ app: 'beta', method: 'PUT', url: '/echo/a%2Fb?x=1&y=two', body: 'payload' });
    expect(got.headers).toMatchObject({ 'x-custom': 'hello', 'content-type': 'text/plain', 'rt-caller-app-id': 'alpha', 'dapr-caller-app-id': 'alpha', 'dapr-callee-app-id': 'beta' });
  });

  it('routes a plain request with an rt-app-id or dapr-app-id header the same way', async () => {
    for (const h of ['rt-app-id', 'dapr-app-id']) {
      const res = await invoke(app('alpha'), '/echo?via=header', { method: 'POST', headers: { [h]: 'gamma' }, body: 'x' });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ app: 'gamma', url: '/echo?via=header', body: 'x' });
    }
    // without the header an unknown path stays a 404 of the sidecar's own API
    const plain = await invoke(app('alpha'), '/echo');
    expect(plain.status).toBe(404);
  });

  // the Python SDK sends GET when no verb is given, with its data as the body
  it('passes the body of a GET or a HEAD on, with its length or chunked encoding and type, on both forms, to its own app and across sidecars', async () => {
    for (const to of ['alpha', 'beta']) {
      for (const { form, path, headers } of forms(to)) {
        const what = `${form} → ${to}`;
        const sized = await send(app('alpha'), 'GET', path, { ...headers, 'content-type': 'text/plain', 'content-length': '7' }, 'message');
        expect(sized.status, what).toBe(200);
        const got = JSON.parse(sized.text) as Echo;
        expect(got, what).toMatchObject({ app: to, method: 'GET', url: '/echo/get?q=1', body: 'message' });
        expect(got.headers, what).toMatchObject({ 'content-type': 'text/plain', 'content-length': '7', 'rt-caller-app-id': 'alpha' });
        expect(got.headers['transfer-encoding'], what).toBeUndefined();

        // a chunked body still arriving goes on chunked, as it comes
        const chunked = await send(app('alpha'), 'GET', path, { ...headers, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, ['{"data":', '"mess', 'age"}']);
        expect(chunked.status, what).toBe(200);
        const gotChunked = JSON.parse(chunked.text) as Echo;
        expect(gotChunked, what).toMatchObject({ app: to, method: 'GET', body: '{"data":"message"}' });
        expect(gotChunked.headers, what).toMatchObject({ 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
        expect(gotChunked.headers['content-length'], what).toBeUndefined();
        // one that has arrived whole may go on with its length instead (transfer-encoding is per hop), as a POST's does
        const whole = JSON.parse((await send(app('alpha'), 'GET', path, { ...headers, 'transfer-encoding': 'chunked' }, 'whole')).text) as Echo;
        expect(whole.body, what).toBe('whole');
        expect(whole.headers['transfer-encoding'] ?? `length ${whole.headers['content-length']}`, what).toMatch(/^(chunked|length 5)$/);

        // the answer to a HEAD has no body: the app says in a header how many bytes it got
        const head = await send(app('alpha'), 'HEAD', path, { ...headers, 'content-type': 'text/plain', 'content-length': '7' }, 'message');
        expect(head.status, what).toBe(200);
        expect(head.headers['x-body-bytes'], what).toBe('7');
        expect(head.text, what).toBe('');
      }
    }
  });

  it('passes a GET or HEAD without a body on without one: no content-length nor chunked encoding added', async () => {
    for (const to of ['alpha', 'beta']) {
      for (const { form, path, headers } of forms(to)) {
        const what = `${form} → ${to}`;
        const res = await send(app('alpha'), 'GET', path, headers);
        expect(res.status, what).toBe(200);
        const got = JSON.parse(res.text) as Echo;
        expect(got, what).toMatchObject({ app: to, method: 'GET', body: '' });
        expect(got.headers['content-length'], what).toBeUndefined();
        expect(got.headers['transfer-encoding'], what).toBeUndefined();
        // a declared empty body is no body either
        const empty = JSON.parse((await send(app('alpha'), 'GET', path, { ...headers, 'content-length': '0' }, '')).text) as Echo;
        expect(empty.body, what).toBe('');
        expect(empty.headers['transfer-encoding'], what).toBeUndefined();
        const head = await send(app('alpha'), 'HEAD', path, headers);
        expect(head.status, what).toBe(200);
        expect(head.headers['x-body-bytes'], what).toBe('0');
      }
    }
  });

  it("passes the target app's own 4xx and 5xx through unchanged", async () => {
    for (const status of [404, 418, 500, 503]) {
      const res = await invoke(app('alpha'), `/v1.0/invoke/beta/method/status/${status}`);
      expect(res.status).toBe(status);
      expect(await res.text()).toBe(`beta answered ${status}`);
      expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    }
  });

  it('answers 500 ERR_DIRECT_INVOKE for an unknown app id, saying what was tried', async () => {
    const res = await invoke(app('alpha'), '/v1.0/invoke/nosuchapp/method/echo');
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_DIRECT_INVOKE');
    expect(body.message).toContain('nosuchapp');
    expect(body.message).toContain(join(home, 'registry'));
    expect(body.message).toMatch(/running apps: .*alpha/);
    const other = await invoke(app('alpha'), '/v1.0/invoke/beta.otherns/method/echo');
    expect(other.status).toBe(500);
    expect(((await other.json()) as { message: string }).message).toContain('namespace "otherns"');
  });

  it('refuses a malformed invoke path with 400', async () => {
    for (const p of ['/v1.0/invoke/beta/method/', '/v1.0/invoke/beta/nomethod/x', '/v1.0/invoke/be%ZZta/method/x']) {
      const res = await invoke(app('alpha'), p);
      expect(res.status, p).toBe(400);
      expect(((await res.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    }
  });

  it('chains three apps: alpha → beta, whose app calls gamma through its own sidecar', async () => {
    const res = await invoke(app('alpha'), '/v1.0/invoke/beta/method/relay?to=gamma');
    expect(res.status).toBe(200);
    const got = (await res.json()) as { via: string; answer: { app: string; body: string; headers: Record<string, string> } };
    expect(got.via).toBe('beta');
    expect(got.answer).toMatchObject({ app: 'gamma', body: 'from beta' });
    expect(got.answer.headers['rt-caller-app-id']).toBe('beta');
  });

  it('streams a 100 MB body each way without buffering it whole', async () => {
    const size = 100 * 1024 * 1024;
    const block = Buffer.alloc(1024 * 1024, 'xyz');
    const hash = createHash('sha256');
    for (let i = 0; i < size / block.length; i++) hash.update(block);
    let sent = 0;
    const upload = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent++ < size / block.length) c.enqueue(block);
        else c.close();
      },
    });
    const up = await invoke(app('alpha'), '/v1.0/invoke/beta/method/digest', { method: 'POST', body: upload, duplex: 'half', headers: { 'content-type': 'application/octet-stream' } } as RequestInit);
    expect(up.status).toBe(200);
    expect(await up.json()).toMatchObject({ bytes: size, sha256: hash.digest('hex') });

    const down = await invoke(app('alpha'), `/v1.0/invoke/beta/method/bytes?n=${size}`);
    expect(down.status).toBe(200);
    let n = 0;
    for await (const c of down.body!) n += c.length;
    expect(n).toBe(size);
  }, 60_000);

  it('hands the first bytes of an answer on before the app has finished it', async () => {
    const res = await invoke(app('alpha'), '/v1.0/invoke/beta/method/slow');
    const reader = res.body!.getReader();
    // the app finishes its answer only when told to, after these bytes have come
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe('first;');
    const finish = await invoke(app('alpha'), '/v1.0/invoke/beta/method/slow/finish');
    expect(finish.status).toBe(200);
    await finish.arrayBuffer();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += Buffer.from(r.value).toString();
    expect(rest).toBe('second');
  });

  it('works with the @dapr/dapr client invoker over HTTP', async () => {
    const client = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(app('alpha').httpPort), communicationProtocol: CommunicationProtocolEnum.HTTP, logger: { level: LogLevel.Error } });
    const got = (await client.invoker.invoke('gamma', 'echo', HttpMethod.POST, { hello: 'world' })) as { app: string; body: string; method: string };
    expect(got.app).toBe('gamma');
    expect(got.method).toBe('POST');
    expect(JSON.parse(got.body)).toEqual({ hello: 'world' });
  });

  it('works with the @dapr/dapr client invoker over gRPC (InvokeService), errors as gRPC statuses', async () => {
    const client = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(app('alpha').grpcPort), communicationProtocol: CommunicationProtocolEnum.GRPC, logger: { level: LogLevel.Error } });
    try {
      const got = (await client.invoker.invoke('beta', 'echo/x?ignored', HttpMethod.PUT, { over: 'grpc' })) as { app: string; body: string; method: string; headers: Record<string, string> };
      expect(got).toMatchObject({ app: 'beta', method: 'PUT' });
      expect(JSON.parse(got.body)).toEqual({ over: 'grpc' });
      expect(got.headers['rt-caller-app-id']).toBe('alpha');
      await expect(client.invoker.invoke('beta', 'status/404', HttpMethod.GET)).rejects.toThrow(/NOT_FOUND|beta answered HTTP 404/);
      await expect(client.invoker.invoke('nosuchapp', 'echo', HttpMethod.GET)).rejects.toThrow(/failed to invoke, id: nosuchapp/);
    } finally {
      await client.stop();
    }
  });

  it('rt list shows the running apps from the same registry', async () => {
    const json = runRt(['list', '-o', 'json'], { RT_HOME: home });
    expect(await json.exit).toBe(0);
    const rows = JSON.parse(json.out()) as { appId: string; httpPort: number; grpcPort: number; appPort: number; command: string; cliPid: number }[];
    for (const id of ['alpha', 'beta', 'gamma']) {
      const a = app(id);
      expect(rows.find((r) => r.appId === id)).toMatchObject({ httpPort: a.httpPort, grpcPort: a.grpcPort, appPort: a.appPort, cliPid: a.run.proc.pid, command: `${process.execPath} ${APP}` });
    }
    const table = runRt(['list'], { RT_HOME: home });
    expect(await table.exit).toBe(0);
    expect(table.out()).toMatch(/APP ID\s+HTTP PORT\s+GRPC PORT\s+APP PORT\s+COMMAND\s+AGE\s+CREATED\s+PID/);
    expect(table.out()).toMatch(new RegExp(`alpha\\s+${app('alpha').httpPort}\\s+${app('alpha').grpcPort}`));
    const empty = runRt(['list'], { RT_HOME: join(home, 'nobody') });
    expect(await empty.exit).toBe(0);
    expect(empty.out()).toContain('No rt instances found.');
  }, 120_000); // three CLI starts from the sources: ~6 s on a quiet machine, 30 s was too short beside load 16

  it('answers a clear 500 at once when the target app is down, and reaches it again once it is back', async () => {
    // a sidecar whose app port has nothing listening
    const appPort = await freePort();
    await start('delta', { command: false, appPort });
    const t0 = Date.now();
    const res = await invoke(app('alpha'), '/v1.0/invoke/delta/method/echo');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_DIRECT_INVOKE');
    expect(body.message).toMatch(/app "delta" did not answer/);

    // beta stops: the call fails clearly; beta restarts on new ports: the call reaches it
    await app('beta').run.stop();
    const gone = await invoke(app('alpha'), '/v1.0/invoke/beta/method/echo');
    expect(gone.status).toBe(500);
    expect(((await gone.json()) as { errorCode: string }).errorCode).toBe('ERR_DIRECT_INVOKE');
    await start('beta');
    const back = await invoke(app('alpha'), '/v1.0/invoke/beta/method/echo');
    expect(back.status).toBe(200);
    expect(await back.json()).toMatchObject({ app: 'beta' });
  }, 60_000);
});
