/**
 * The OTEL_EXPORTER_OTLP_* environment (sidecar/src/tracing/env.ts): its rules against the
 * Configuration, fast-check over the headers' format, and real in-process sidecars started with
 * it: an endpoint alone turns tracing on and spans reach a real Jaeger; headers, the HTTP path and
 * the Configuration's precedence seen by real OTLP receivers (a node:http one, a grpc-js one) that
 * keep what each export brought; a malformed variable stops the start naming it, without its value.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRt } from '../../e2e/rt-process.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';
import { readTracingSpec, type FieldFail } from '../../sidecar/src/tracing/config.ts';
import { parseOtlpHeaders, withOtelEnv } from '../../sidecar/src/tracing/env.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { hex } from './ids.ts';

const fail: FieldFail = (field, message) => {
  throw new Error(`${field} ${message}`);
};
const spec = (raw: unknown) => readTracingSpec(raw, fail);
const E = 'OTEL_EXPORTER_OTLP_';

describe('the rules (withOtelEnv)', () => {
  it('an endpoint alone turns tracing on at samplingRate 1 over gRPC; nothing set leaves it off', () => {
    expect(withOtelEnv(undefined, {})).toBeUndefined();
    expect(withOtelEnv(undefined, { [`${E}ENDPOINT`]: 'http://collector:4317' })).toEqual({ samplingRate: 1, stdout: false, otel: { url: 'http://collector:4317', protocol: 'grpc' }, zipkin: undefined });
    // a Configuration without a rate gets 1 too; with one, its rate; with "0", tracing stays off
    expect(withOtelEnv(spec({ stdout: true }), { [`${E}ENDPOINT`]: 'http://c:4317' })).toMatchObject({ samplingRate: 1, stdout: true });
    expect(withOtelEnv(spec({ samplingRate: '0.25' }), { [`${E}ENDPOINT`]: 'http://c:4317' })).toMatchObject({ samplingRate: 0.25 });
    expect(withOtelEnv(spec({ samplingRate: '0' }), { [`${E}ENDPOINT`]: 'http://c:4317' })).toBeUndefined();
  });

  it("the Configuration's endpoint wins: the env's endpoint, protocol and insecure are not read, its headers and timeout are", () => {
    const env = { [`${E}ENDPOINT`]: 'http://other:4317', [`${E}PROTOCOL`]: 'nonsense', [`${E}INSECURE`]: 'maybe', [`${E}HEADERS`]: 'x-key=abc', [`${E}TIMEOUT`]: '2500' };
    expect(withOtelEnv(spec({ samplingRate: '1', otel: { endpointAddress: 'c:4318', protocol: 'http' } }), env)).toEqual({
      samplingRate: 1,
      stdout: false,
      otel: { url: 'http://c:4318/v1/traces', protocol: 'http', headers: { 'x-key': 'abc' }, timeoutMillis: 2500 },
      zipkin: undefined,
    });
    // and with tracing off nothing of the env is read, however malformed
    expect(withOtelEnv(spec({ samplingRate: '0' }), { [`${E}HEADERS`]: 'garbage' })).toBeUndefined();
    expect(withOtelEnv(spec({ samplingRate: '0' }), { [`${E}ENDPOINT`]: 'ftp://x', [`${E}PROTOCOL`]: 'x', [`${E}INSECURE`]: 'x' })).toBeUndefined();
    expect(withOtelEnv(undefined, { [`${E}HEADERS`]: 'garbage', [`${E}PROTOCOL`]: 'x' })).toBeUndefined();
  });

  it('TRACES_ variables win over the shared ones; the shared endpoint is a base for HTTP, the signal one a whole URL', () => {
    const http = { [`${E}PROTOCOL`]: 'http/protobuf' };
    expect(withOtelEnv(undefined, { ...http, [`${E}ENDPOINT`]: 'http://c:4318' })?.otel?.url).toBe('http://c:4318/v1/traces');
    expect(withOtelEnv(undefined, { ...http, [`${E}ENDPOINT`]: 'http://c:4318/otlp/' })?.otel?.url).toBe('http://c:4318/otlp/v1/traces');
    expect(withOtelEnv(undefined, { ...http, [`${E}ENDPOINT`]: 'http://c:4318', [`${E}TRACES_ENDPOINT`]: 'http://t:4318/custom' })?.otel?.url).toBe('http://t:4318/custom');
    expect(withOtelEnv(undefined, { ...http, [`${E}TRACES_ENDPOINT`]: 'http://t:4318' })?.otel?.url).toBe('http://t:4318/v1/traces');
    expect(withOtelEnv(undefined, { [`${E}ENDPOINT`]: 'http://c:4317', [`${E}PROTOCOL`]: 'http/protobuf', [`${E}TRACES_PROTOCOL`]: 'grpc' })?.otel).toMatchObject({ protocol: 'grpc' });
    expect(withOtelEnv(undefined, { [`${E}ENDPOINT`]: 'http://c:4318', [`${E}PROTOCOL`]: 'http/json' })?.otel).toMatchObject({ protocol: 'http' });
    expect(withOtelEnv(undefined, { [`${E}ENDPOINT`]: 'http://c:4317', [`${E}HEADERS`]: 'a=1,b=2', [`${E}TRACES_HEADERS`]: 'a=3' })?.otel?.headers).toEqual({ a: '3' });
  });

  it('security: no scheme is TLS unless INSECURE is true (the reference\'s default); http:// is plaintext, https:// TLS', () => {
    const url = (env: Record<string, string>) => withOtelEnv(undefined, env)?.otel?.url;
    expect(url({ [`${E}ENDPOINT`]: 'collector:4317' })).toBe('https://collector:4317');
    expect(url({ [`${E}ENDPOINT`]: 'collector:4317', [`${E}INSECURE`]: 'TRUE' })).toBe('http://collector:4317');
    expect(url({ [`${E}ENDPOINT`]: 'collector:4317', [`${E}INSECURE`]: 'false' })).toBe('https://collector:4317');
    expect(url({ [`${E}ENDPOINT`]: 'http://collector:4317' })).toBe('http://collector:4317');
    expect(url({ [`${E}ENDPOINT`]: 'https://collector:4317' })).toBe('https://collector:4317');
    expect(url({ [`${E}ENDPOINT`]: 'https://collector:4317', [`${E}INSECURE`]: 'true' })).toBe('http://collector:4317');
  });

  it('refuses a malformed variable it uses, naming it, and never repeats an endpoint or a header value', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}PROTOCOL`]: 'thrift' }, /^OTEL_EXPORTER_OTLP_PROTOCOL must be grpc, http\/protobuf or http\/json, not "thrift"/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}TRACES_PROTOCOL`]: 'HTTP' }, /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}INSECURE`]: 'yes' }, /^OTEL_EXPORTER_OTLP_INSECURE must be true or false, not "yes"/],
      [{ [`${E}ENDPOINT`]: 'ftp://secret-host:21' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must be host:port or an http\(s\) URL/],
      [{ [`${E}TRACES_ENDPOINT`]: 'http://secret-host:port' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be host:port/],
      [{ [`${E}ENDPOINT`]: 'http://user:secret-pass@c:4317' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must not hold credentials/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}HEADERS`]: 'api-key=secret-1,secret-2' }, /^OTEL_EXPORTER_OTLP_HEADERS must be name=value pairs joined by commas: entry 2 of 2 has no "="/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}HEADERS`]: 'bad name=secret-1' }, /^OTEL_EXPORTER_OTLP_HEADERS entry 1 of 1: the header name/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}HEADERS`]: 'k=secret-%zz' }, /^OTEL_EXPORTER_OTLP_HEADERS entry 1 of 1 \(k\): the value is not valid percent-encoding/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}HEADERS`]: 'k=secret%0d%0ainjected: 1' }, /^OTEL_EXPORTER_OTLP_HEADERS entry 1 of 1 \(k\): the value holds a character other than printable ASCII/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}HEADERS`]: 'token-bin=secret-1' }, /-bin is binary gRPC metadata/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}TIMEOUT`]: '10s' }, /^OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number of milliseconds above 0, not "10s"/],
      [{ [`${E}ENDPOINT`]: 'c:4317', [`${E}TRACES_TIMEOUT`]: '0' }, /^OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be/],
      [{ [`${E}ENDPOINT`]: 'c:4317', OTEL_RESOURCE_ATTRIBUTES: 'team=secret-1,secret-2' }, /^OTEL_RESOURCE_ATTRIBUTES must be name=value pairs joined by commas: entry 2 of 2 has no "="/],
      [{ [`${E}ENDPOINT`]: 'c:4317', OTEL_RESOURCE_ATTRIBUTES: 'a b=secret-1' }, /^OTEL_RESOURCE_ATTRIBUTES entry 1 of 1: an attribute key/],
      [{ [`${E}ENDPOINT`]: 'c:4317', OTEL_SERVICE_NAME: 'secret\n' + 'x' }, /^OTEL_SERVICE_NAME must be printable ASCII/],
    ];
    for (const [env, message] of cases) {
      let err: Error | undefined;
      try {
        withOtelEnv(undefined, env);
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message, JSON.stringify(env)).toMatch(message);
      expect(err?.message).not.toMatch(/secret/);
    }
    // -bin is binary metadata only for gRPC: over HTTP it is a header like another
    expect(withOtelEnv(undefined, { [`${E}ENDPOINT`]: 'c:4318', [`${E}PROTOCOL`]: 'http/protobuf', [`${E}HEADERS`]: 'token-bin=v' })?.otel?.headers).toEqual({ 'token-bin': 'v' });
  });
});

describe('OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES', () => {
  const on = { [`${E}ENDPOINT`]: 'c:4317' };
  it('add to the resource (values percent-decoded, keys kept as written); OTEL_SERVICE_NAME wins over service.name; unset: no resource of ours', () => {
    expect(withOtelEnv(undefined, on)?.resource).toBeUndefined();
    expect(withOtelEnv(undefined, { ...on, OTEL_SERVICE_NAME: ' orders ' })?.resource).toEqual({ 'service.name': 'orders' });
    expect(withOtelEnv(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: 'service.name=a,Team.Name=x%2Cy' })?.resource).toEqual({ 'service.name': 'a', 'Team.Name': 'x,y' });
    expect(withOtelEnv(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: 'service.name=a,k=v', OTEL_SERVICE_NAME: 'b' })?.resource).toEqual({ 'service.name': 'b', k: 'v' });
    // with tracing off neither is read
    expect(withOtelEnv(undefined, { OTEL_RESOURCE_ATTRIBUTES: 'garbage' })).toBeUndefined();
  });

  it('round-trips any key=value map (fast-check)', () => {
    const key = fc.stringMatching(/^[A-Za-z0-9._-]{1,20}$/);
    const value = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,20}[\x21-\x7e])?$/);
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 5 }), (attrs) => {
        const text = Object.entries(attrs).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join(',');
        const got = withOtelEnv(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: text })?.resource;
        expect(got ?? {}).toEqual(attrs);
      }),
    );
  });
});

describe('OTEL_EXPORTER_OTLP_HEADERS (fast-check)', () => {
  const name = fc.stringMatching(/^[a-z0-9!#$%&'*+.^_`|~-]{1,20}$/).filter((n) => !n.endsWith('-bin'));
  const value = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,30}[\x21-\x7e])?$/);

  it('round-trips any name=value map, values percent-encoded, blank entries and spaces around names ignored', () => {
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 6 }), fc.boolean(), (headers, padded) => {
        const text = Object.entries(headers)
          .map(([k, v]) => (padded ? ` ${k.toUpperCase()} =${encodeURIComponent(v)}` : `${k}=${encodeURIComponent(v)}`))
          .join(padded ? ', ,' : ',');
        const lowered = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
        expect(parseOtlpHeaders(text, 'V', 'grpc')).toEqual(lowered);
      }),
    );
  });

  it('refuses a mangled list with the variable and the entry position, never a value', () => {
    const secret = fc.stringMatching(/^[A-Za-z0-9]{8,16}$/).map((s) => `SECRET${s}`);
    fc.assert(
      fc.property(fc.array(fc.tuple(name, secret), { minLength: 1, maxLength: 5 }), fc.nat(), fc.constantFrom('drop=', 'bad-name', 'bad-percent', 'control'), (pairs, at, how) => {
        const i = at % pairs.length;
        const entries = pairs.map(([k, v]) => `${k}=${v}`);
        const [k, v] = pairs[i];
        entries[i] = { 'drop=': `${k}${v}`, 'bad-name': `${k} x=${v}`, 'bad-percent': `${k}=${v}%g1`, control: `${k}=${v}%0Ax` }[how];
        let message = '';
        try {
          parseOtlpHeaders(entries.join(','), 'OTEL_EXPORTER_OTLP_HEADERS', 'grpc');
        } catch (e) {
          message = (e as Error).message;
        }
        expect(message).toMatch(new RegExp(`^OTEL_EXPORTER_OTLP_HEADERS .*entry ${i + 1} of ${pairs.length}`));
        expect(message).not.toContain('SECRET');
      }),
    );
  });
});

/** A real OTLP receiver over HTTP and one over gRPC, keeping each export's path and headers. */
interface Receivers {
  http: { port: number; seen: { path: string; headers: IncomingHttpHeaders }[] };
  grpc: { port: number; seen: grpc.Metadata[] };
  close(): Promise<void>;
}

async function startReceivers(): Promise<Receivers> {
  const httpSeen: Receivers['http']['seen'] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      httpSeen.push({ path: req.url ?? '', headers: req.headers });
      // an empty ExportTraceServiceResponse
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const grpcSeen: grpc.Metadata[] = [];
  const g = new grpc.Server();
  const bytes = (b: Buffer) => b;
  const definition = { Export: { path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export', requestStream: false, responseStream: false, requestSerialize: bytes, requestDeserialize: bytes, responseSerialize: bytes, responseDeserialize: bytes } };
  g.addService(definition, {
    Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      grpcSeen.push(call.metadata);
      done(null, Buffer.alloc(0));
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) => g.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return {
    http: { port: (server.address() as { port: number }).port, seen: httpSeen },
    grpc: { port: grpcPort, seen: grpcSeen },
    close: async () => {
      g.forceShutdown();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('real sidecars started with the environment', () => {
  let dir: string;
  let receivers: Receivers;
  const started: Sidecar[] = [];
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-trace-env-'));
    process.env.RT_HOME = join(dir, 'home');
    receivers = await startReceivers();
  });

  afterAll(async () => {
    await Promise.allSettled(started.map((s) => s.close()));
    await receivers?.close();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Starts an in-process sidecar with exactly these OTEL_EXPORTER_OTLP_* set (the block reads them at start). */
  async function startWith(env: Record<string, string>, opts: Partial<StartOptions> = {}): Promise<Sidecar> {
    const saved = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, process.env[k]]));
    for (const k of Object.keys(saved)) delete process.env[k];
    Object.assign(process.env, env);
    try {
      const s = await startSidecar({ appId: `env-${hex(3)}`, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, `data-${hex(3)}`), logger: pino({ level: 'silent' }), ...opts });
      started.push(s);
      return s;
    } finally {
      for (const k of Object.keys(env)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  }

  /** One API call with a sampled context; the sidecar is then closed, which exports what it holds. */
  async function oneCallThenClose(s: Sidecar): Promise<{ traceId: string; answer: string | null }> {
    const traceId = hex(16);
    const res = await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/metadata`, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
    await res.arrayBuffer();
    await s.close();
    return { traceId, answer: res.headers.get('traceparent') };
  }

  it('OTLP/HTTP from the environment: the shared endpoint gets /v1/traces, the headers go with each export, percent-decoded', async () => {
    const before = receivers.http.seen.length;
    const s = await startWith({ [`${E}ENDPOINT`]: `http://127.0.0.1:${receivers.http.port}`, [`${E}PROTOCOL`]: 'http/protobuf', [`${E}HEADERS`]: 'x-api-key=k%2C1%3D2, x-team=observability' });
    const { answer } = await oneCallThenClose(s);
    expect(answer).toMatch(/^00-/);
    const exports = receivers.http.seen.slice(before);
    expect(exports.length).toBeGreaterThan(0);
    expect(exports[0].path).toBe('/v1/traces');
    expect(exports[0].headers).toMatchObject({ 'x-api-key': 'k,1=2', 'x-team': 'observability', 'content-type': 'application/x-protobuf' });
  });

  it("the Configuration's endpoint wins over the environment's, which still gives the headers (gRPC metadata)", async () => {
    await writeFile(join(dir, 'config.yaml'), `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: tracing\nspec:\n  tracing:\n    samplingRate: "1"\n    otel:\n      endpointAddress: 127.0.0.1:${receivers.grpc.port}\n      isSecure: false\n      protocol: grpc\n`);
    const before = { grpc: receivers.grpc.seen.length, http: receivers.http.seen.length };
    const s = await startWith({ [`${E}ENDPOINT`]: `http://127.0.0.1:${receivers.http.port}`, [`${E}PROTOCOL`]: 'http/protobuf', [`${E}TRACES_HEADERS`]: 'authorization=Bearer%20t0k3n' }, { configFile: join(dir, 'config.yaml') });
    await oneCallThenClose(s);
    const exports = receivers.grpc.seen.slice(before.grpc);
    expect(exports.length).toBeGreaterThan(0);
    expect(exports[0].get('authorization')).toEqual(['Bearer t0k3n']);
    expect(receivers.http.seen.length).toBe(before.http);
  });

  it("the Configuration's otel.headers (a list) and timeout reach the receiver, over the environment's headers", async () => {
    await writeFile(join(dir, 'headers.yaml'), `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: tracing\nspec:\n  tracing:\n    samplingRate: "1"\n    otel:\n      endpointAddress: 127.0.0.1:${receivers.http.port}\n      isSecure: false\n      protocol: http\n      timeout: 5s\n      headers:\n        - name: X-Api-Key\n          value: from-config\n        - name: x-team\n          value: obs\n`);
    const before = receivers.http.seen.length;
    const s = await startWith({ [`${E}HEADERS`]: 'x-api-key=from-env' }, { configFile: join(dir, 'headers.yaml') });
    await oneCallThenClose(s);
    const exports = receivers.http.seen.slice(before);
    expect(exports.length).toBeGreaterThan(0);
    expect(exports[0].headers).toMatchObject({ 'x-api-key': 'from-config', 'x-team': 'obs' });
  });

  it('samplingRate "0" in the Configuration keeps tracing off whatever the environment says', async () => {
    await writeFile(join(dir, 'zero.yaml'), `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: tracing\nspec:\n  tracing:\n    samplingRate: "0"\n`);
    const before = receivers.grpc.seen.length;
    const s = await startWith({ [`${E}ENDPOINT`]: `http://127.0.0.1:${receivers.grpc.port}` }, { configFile: join(dir, 'zero.yaml') });
    const { answer } = await oneCallThenClose(s);
    expect(answer).toBeNull();
    expect(receivers.grpc.seen.length).toBe(before);
  });

  it('a malformed variable stops the start, naming it and not its value', async () => {
    await expect(startWith({ [`${E}ENDPOINT`]: `http://127.0.0.1:${receivers.grpc.port}`, [`${E}PROTOCOL`]: 'zipkin' })).rejects.toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL must be grpc, http\/protobuf or http\/json, not "zipkin"/);
    const err = await startWith({ [`${E}ENDPOINT`]: `http://127.0.0.1:${receivers.grpc.port}`, [`${E}HEADERS`]: 'api-key:SECRETVALUE' }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/OTEL_EXPORTER_OTLP_HEADERS must be name=value pairs/);
    expect((err as Error).message).not.toContain('SECRETVALUE');
  });

  it('`rt sidecar` says so and exits non-zero, without the value', async () => {
    const rt = runRt(['sidecar', '--app-id', `env-cli-${hex(3)}`, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'], {
      RT_HOME: join(dir, 'home'),
      [`${E}ENDPOINT`]: 'http://127.0.0.1:1',
      [`${E}HEADERS`]: 'api-key=SECRETVALUE,broken',
    });
    const code = await Promise.race([rt.exit, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref())]);
    if (code === 'timeout') await rt.stop();
    expect(code).not.toBe(0);
    expect(code).not.toBe('timeout');
    expect(rt.out()).toMatch(/OTEL_EXPORTER_OTLP_HEADERS must be name=value pairs joined by commas: entry 2 of 2 has no "="/);
    expect(rt.out()).not.toContain('SECRETVALUE');
  }, 40_000);
});

const why = jaegerUnavailable();
const jaegerAvailable = requireService('Jaeger', !why, why ?? '');

describe.skipIf(!jaegerAvailable)('an endpoint in the environment alone, against a real Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    jaeger = await startJaeger();
    dir = await mkdtemp(join(tmpdir(), 'rt-trace-env-jaeger-'));
    process.env.RT_HOME = join(dir, 'home');
  }, 60_000);

  afterAll(async () => {
    await jaeger?.stop();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('OTEL_SERVICE_NAME names the service in Jaeger (over OTEL_RESOURCE_ATTRIBUTES, whose other attributes are added)', async () => {
    const name = `svc-${hex(3)}`;
    const env = { [`${E}ENDPOINT`]: `http://${jaeger.otlpGrpcEndpoint}`, OTEL_SERVICE_NAME: name, OTEL_RESOURCE_ATTRIBUTES: 'service.name=not-this,deployment.environment=test%20lab' };
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    let s: Sidecar | undefined;
    try {
      s = await startSidecar({ appId: `env-svc-${hex(3)}`, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data-svc'), logger: pino({ level: 'silent' }) });
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    const traceId = hex(16);
    try {
      await (await fetch(`http://127.0.0.1:${s!.httpPort}/v1.0/metadata`, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } })).arrayBuffer();
      await s!.close();
      const spans = await jaeger.waitForTrace(traceId, 1, 15_000);
      expect(spans[0]).toMatchObject({ serviceName: name, kind: 'server' });
      // the resource's other attributes are the process's tags in Jaeger's JSON
      const raw = (await (await fetch(`${jaeger.queryUrl}/api/traces/${traceId}`)).json()) as { data: { processes: Record<string, { tags: { key: string; value: unknown }[] }> }[] };
      const tags = Object.values(raw.data[0].processes).flatMap((p) => p.tags);
      expect(tags).toContainEqual(expect.objectContaining({ key: 'deployment.environment', value: 'test lab' }));
    } finally {
      await s!.close();
    }
  }, 60_000);

  it('turns tracing on without any Configuration (samplingRate 1, OTLP/gRPC) and the span reaches Jaeger', async () => {
    const appId = `env-jaeger-${hex(3)}`;
    const saved = process.env[`${E}ENDPOINT`];
    process.env[`${E}ENDPOINT`] = `http://${jaeger.otlpGrpcEndpoint}`;
    let s: Sidecar | undefined;
    try {
      s = await startSidecar({ appId, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), logger: pino({ level: 'silent' }) });
    } finally {
      if (saved === undefined) delete process.env[`${E}ENDPOINT`];
      else process.env[`${E}ENDPOINT`] = saved;
    }
    const sidecar = s!;
    const traceId = hex(16);
    try {
      // no traceparent: a new trace at the env's rate of 1, its id read from the answer
      const res = await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/metadata`);
      expect(res.status).toBe(200);
      const answered = res.headers.get('traceparent')!;
      expect(answered).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      const id = answered.split('-')[1];
      const fromCaller = await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/metadata`, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
      await fromCaller.arrayBuffer();
      // closing exports what the batch processor holds
      await sidecar.close();
      for (const t of [id, traceId]) {
        const spans = await jaeger.waitForTrace(t, 1, 15_000);
        expect(spans[0]).toMatchObject({ serviceName: appId, kind: 'server' });
      }
    } finally {
      await sidecar.close();
    }
  }, 60_000);
});
