/**
 * Requests Node's HTTP parser refuses before routing, over raw TCP: an HTTP method outside Node's
 * list (the Java SDK's HttpExtension.NONE sends `NONE`), a malformed header, headers over the
 * limit, a body that never arrives. Each is answered in the API's JSON error shape with a debug
 * log line, on the HTTP API port, the internal invocation port and the metrics port.
 */
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientErrorAnswer } from '../../sidecar/src/http/client-error.ts';
import { createHttpServer } from '../../sidecar/src/http/server.ts';
import { type Sidecar, startSidecar } from '../../sidecar/src/sidecar.ts';
import { freePort } from '../services/net.ts';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: { errorCode: string; message: string; details: { '@type': string; reason: string }[] };
}

/** Sends the bytes as they are and reads until the server closes the connection. */
function raw(port: number, bytes: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = connect(port, '127.0.0.1', () => s.write(bytes));
    s.on('data', (c) => chunks.push(c));
    s.on('error', reject);
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`still open after 10 s: ${Buffer.concat(chunks).toString()}`));
    }, 10_000);
    s.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString();
      const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
      const [status, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      try {
        resolve({ status: Number(status.split(' ')[1]), headers, body: JSON.parse(body) as Answer['body'] });
      } catch {
        reject(new Error(`not a JSON answer: ${text}`));
      }
    });
  });
}

const lines: { level: number; msg: string; errorCode?: string }[] = [];
const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) });

let dir: string;
let sidecar: Sidecar;
let internalPort: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-client-error-'));
  internalPort = await freePort();
  sidecar = await startSidecar({ appId: 'client-error', httpPort: 0, grpcPort: 0, metricsPort: await freePort(), internalGrpcPort: internalPort, dataDir: dir, logger: log });
});

afterAll(async () => {
  await sidecar?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('requests the HTTP parser refuses', () => {
  it("an unknown method on the API port: 400 ERR_MALFORMED_REQUEST naming it and the accepted ones, a debug line", async () => {
    for (const path of ['/v1.0/metadata', '/v1.0/invoke/someapp/method/echo']) {
      const before = lines.length;
      const a = await raw(sidecar.httpPort, `NONE ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`);
      expect(a.status).toBe(400);
      expect(a.headers['content-type']).toBe('application/json');
      expect(a.headers.connection).toBe('close');
      expect(a.body.errorCode).toBe('ERR_MALFORMED_REQUEST');
      expect(a.body.message).toMatch(/^HTTP method "NONE" is not supported: Node's HTTP parser accepts only ACL, .*\bGET\b.*\bPOST\b.*\bPUT\b/);
      expect(a.body.details).toEqual([{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'ERR_MALFORMED_REQUEST', domain: 'rt.io', metadata: {} }]);
      const logged = lines.slice(before).find((l) => l.errorCode === 'ERR_MALFORMED_REQUEST');
      expect(logged).toMatchObject({ level: 20, msg: a.body.message });
    }
  });

  it('a lower-case method is refused too (methods are case-sensitive)', async () => {
    const a = await raw(sidecar.httpPort, 'get /v1.0/metadata HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(a.status).toBe(400);
    expect(a.body.message).toMatch(/^HTTP method "get" is not supported/);
  });

  it('a malformed header, headers over the limit: the same shape', async () => {
    const bad = await raw(sidecar.httpPort, 'GET /v1.0/metadata HTTP/1.1\r\nHost: x\r\nNo Colon Here\r\n\r\n');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST', message: expect.stringMatching(/^malformed HTTP request: .*\(HPE_INVALID_HEADER_TOKEN\)$/) });
    const big = await raw(sidecar.httpPort, `GET /v1.0/metadata HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big.status).toBe(431);
    expect(big.body).toMatchObject({ errorCode: 'ERR_REQUEST_HEADERS_TOO_LARGE', message: expect.stringMatching(/headers are larger than the limit of \d+ bytes/) });
  });

  it('the internal invocation port and the metrics port answer the same way', async () => {
    expect(sidecar.ctx.metrics?.port).toBeGreaterThan(0);
    for (const port of [internalPort, sidecar.ctx.metrics!.port]) {
      const a = await raw(port, 'NONE /x HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(a.status, String(port)).toBe(400);
      expect(a.body).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST', message: expect.stringMatching(/^HTTP method "NONE" is not supported/) });
    }
  });

  it('a body that never arrives: 408 ERR_REQUEST_TIMEOUT', async () => {
    const app = createHttpServer({ log: pino({ level: 'silent' }), bodyLimit: 1024, requestTimeoutMs: 1000 });
    app.post('/echo', async (req) => req.body);
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const a = await raw((app.server.address() as { port: number }).port, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
      expect(a.status).toBe(408);
      expect(a.body.errorCode).toBe('ERR_REQUEST_TIMEOUT');
    } finally {
      await app.close();
    }
  });

  it('the method named is the refused request line\'s, after pipelined requests; cut and made printable', () => {
    const packet = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\nFROB / HTTP/1.1\r\n\r\n');
    expect(clientErrorAnswer(Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD', rawPacket: packet, bytesParsed: 28 })).message).toMatch(/^HTTP method "FROB" is not supported/);
    const long = Buffer.from(`${'X'.repeat(100)}\u0001 / HTTP/1.1\r\n`);
    expect(clientErrorAnswer(Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD', rawPacket: long, bytesParsed: 1 })).message).toMatch(/^HTTP method "X{40}" is not/);
    const ctl = Buffer.from('A\u0001B / HTTP/1.1\r\n');
    expect(clientErrorAnswer(Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD', rawPacket: ctl, bytesParsed: 1 })).message).toMatch(/^HTTP method "A\?B" is not/);
    expect(clientErrorAnswer(Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD' })).message).toMatch(/^HTTP method of the request is not supported/);
  });
});
