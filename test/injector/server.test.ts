/**
 * The webhook's HTTPS server as a caller sees it: AdmissionReviews in and out, /healthz, the
 * certificate reloaded when its files change, and malformed input (fast-check) that always gets
 * an AdmissionReview denial or a 4xx — never a 5xx, never a crash.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { Pod as PodModel } from 'kubernetes-models/v1';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StaticComponents, type ComponentLister } from '../../injector/src/components.ts';
import { InjectorUsageError, parseInjectorArgs } from '../../injector/src/main.ts';
import { startInjectorServer, type InjectorServer } from '../../injector/src/server.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { freePort } from '../services/net.ts';
import { component, pod, SETTINGS } from './fixtures.ts';

let ca: TestCa;
let dir: string;
let server: InjectorServer;
let components: ComponentLister & { synced: boolean };

beforeAll(async () => {
  ca = makeTestCa();
  dir = mkdtempSync(join(tmpdir(), 'rt-injector-test-'));
  writeFileSync(join(dir, 'tls.crt'), ca.cert);
  writeFileSync(join(dir, 'tls.key'), ca.key);
  const fixed = new StaticComponents([
    component('a', { container: { name: 'a', image: 'a:1' } }),
    component('b', { container: { name: 'b', image: 'b:1' } }),
    component('c', { container: { name: 'c', image: 'c:1' }, scopes: ['someone-else'] }),
  ]);
  // a lister whose readiness the test can switch, around a fixed set of Components
  components = { synced: true, list: (ns) => fixed.list(ns) };
  server = await startInjectorServer({
    port: 0,
    listenAddress: '127.0.0.1',
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    settings: SETTINGS,
    components,
    log: pino({ level: 'silent' }),
    certPollMs: 100,
  });
});

afterAll(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  ca?.remove();
});

function call(method: string, path: string, body?: string | Buffer): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, method, path, ca: ca.caPem, servername: 'localhost', headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
        } catch (e) {
          reject(e as Error);
        }
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const reviewOf = (object: unknown, o: { uid?: string; operation?: string; kind?: string } = {}) =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: o.uid ?? 'u-1', kind: { group: '', version: 'v1', kind: o.kind ?? 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: o.operation ?? 'CREATE', namespace: 'ns1', object },
  });

interface Response {
  uid: string;
  allowed: boolean;
  patchType?: string;
  patch?: string;
  warnings?: string[];
  status?: { code: number; message: string };
}

describe('rt injector over HTTPS', () => {
  it('answers a Pod CREATE with a JSONPatch that yields a valid injected Pod, and the warnings', async () => {
    const p = pod({ 'rt.io/inject-pluggable-components': 'true', 'rt.io/app-port': '8080' });
    const r = await call('POST', '/mutate?timeout=10s', reviewOf(p, { uid: 'abc' }));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' });
    const res = r.json.response as Response;
    expect(res).toMatchObject({ uid: 'abc', allowed: true, patchType: 'JSONPatch' });
    expect(res.warnings).toEqual([expect.stringContaining('Component ns1/c')]);
    const ops = JSON.parse(Buffer.from(res.patch!, 'base64').toString('utf8')) as fastJsonPatch.Operation[];
    const out = fastJsonPatch.applyPatch(structuredClone(p), ops, true, false).newDocument;
    new PodModel(out as never).validate();
    expect(out.spec.initContainers?.map((c) => c.name)).toEqual(['a', 'b', 'rt-sidecar']);
  });

  it('passes other kinds, other operations and pods without the annotation unchanged', async () => {
    for (const body of [reviewOf(pod(), { operation: 'UPDATE' }), reviewOf({}, { kind: 'Service' }), reviewOf(pod({ 'rt.io/enabled': 'false' }))]) {
      const r = await call('POST', '/mutate', body);
      expect(r.status).toBe(200);
      expect(r.json.response).toEqual({ uid: 'u-1', allowed: true });
    }
  });

  it('denies a bad annotation with a message naming it', async () => {
    const r = await call('POST', '/mutate', reviewOf(pod({ 'rt.io/app-port': 'http' })));
    expect(r.status).toBe(200);
    expect(r.json.response).toMatchObject({ uid: 'u-1', allowed: false, status: { code: 400, message: expect.stringContaining('rt.io/app-port') } });
  });

  it('/healthz is 200 once the Components are listed, 503 before', async () => {
    expect((await call('GET', '/healthz')).status).toBe(200);
    components.synced = false;
    try {
      const r = await call('GET', '/healthz');
      expect(r.status).toBe(503);
      expect(r.json.message).toMatch(/not listed yet/);
      // and a pod asking for component containers gets no answer of the injector's own: the call
      // fails (503), so the API server applies the failurePolicy, as for an injector that is down
      const d = await call('POST', '/mutate', reviewOf(pod({ 'rt.io/inject-pluggable-components': 'true' })));
      expect(d.status).toBe(503);
      expect(d.json).toMatchObject({ errorCode: 'ERR_NOT_READY', message: expect.stringContaining('not listed yet') });
      // a pod that needs no Components is injected as usual
      const plain = await call('POST', '/mutate', reviewOf(pod({})));
      expect(plain.status).toBe(200);
      expect(plain.json.response).toMatchObject({ allowed: true });
    } finally {
      components.synced = true;
    }
  });

  it('answers unknown paths 404, wrong methods 405, with JSON errors', async () => {
    expect(await call('GET', '/nope')).toMatchObject({ status: 404, json: { errorCode: 'ERR_NOT_FOUND' } });
    expect(await call('GET', '/mutate')).toMatchObject({ status: 405, json: { errorCode: 'ERR_METHOD_NOT_ALLOWED' } });
    expect(await call('POST', '/healthz')).toMatchObject({ status: 405 });
  });

  it('refuses a body over 8 MiB with 413', async () => {
    const r = await call('POST', '/mutate', Buffer.alloc(9 * 1024 * 1024, 0x20));
    expect(r.status).toBe(413);
  });

  it('reloads its certificate when the files change', async () => {
    const fingerprint = () =>
      new Promise<string>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: server.port, servername: 'localhost', rejectUnauthorized: false }, () => {
          resolve(s.getPeerX509Certificate()!.fingerprint256);
          s.end();
        });
        s.on('error', reject);
      });
    const before = await fingerprint();
    const next = makeTestCa();
    try {
      // a torn write (new cert, old key) is ignored; the matching pair is taken
      writeFileSync(join(dir, 'tls.crt'), next.cert);
      writeFileSync(join(dir, 'tls.key'), next.key);
      await vi.waitFor(async () => expect(await fingerprint()).not.toBe(before), { timeout: 10_000, interval: 100 });
      next.trust();
      const r = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: server.port, path: '/healthz', ca: next.caPem, servername: 'localhost' }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      expect(r).toBe(200);
    } finally {
      // back to the first pair, so the other tests keep verifying with the first CA
      writeFileSync(join(dir, 'tls.crt'), ca.cert);
      writeFileSync(join(dir, 'tls.key'), ca.key);
      await vi.waitFor(async () => expect(await fingerprint()).toBe(before), { timeout: 10_000, interval: 100 });
      next.remove();
    }
  });
});

describe('malformed AdmissionReviews (fast-check)', () => {
  const expectDenial = (r: { status: number; json: Record<string, unknown> }) => {
    expect(r.status).toBe(200);
    const res = r.json.response as Response;
    expect(res.allowed === true || (res.allowed === false && typeof res.status?.message === 'string' && res.status.message.startsWith('rt injector'))).toBe(true);
  };

  it('arbitrary bodies get an AdmissionReview, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string(), fc.json(), fc.jsonValue().map((v) => JSON.stringify(v))), async (body) => {
        expectDenial(await call('POST', '/mutate', body));
      }),
      { numRuns: 150 },
    );
  });

  it('reviews with a mangled pod get an allow or a clear denial, and an allowed patch always applies', async () => {
    const anything = fc.oneof(fc.jsonValue(), fc.constant(undefined));
    const mangledPod = fc.record({
      metadata: fc.oneof(anything, fc.record({ annotations: fc.oneof(anything, fc.dictionary(fc.constantFrom('rt.io/enabled', 'rt.io/app-port', 'rt.io/env', 'rt.io/pluggable-components', 'dapr.io/app-id', 'rt.io/inject-pluggable-components'), fc.oneof(fc.string(), fc.constant('true'), anything))), generateName: anything, name: anything })),
      spec: fc.oneof(anything, fc.record({ containers: fc.oneof(anything, fc.array(fc.oneof(anything, fc.record({ name: fc.oneof(fc.string(), anything), env: anything, image: fc.string() })))), initContainers: anything, volumes: anything })),
    });
    await fc.assert(
      fc.asyncProperty(mangledPod, fc.oneof(fc.constant('ns1'), fc.jsonValue()), async (p, namespace) => {
        const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'x', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace, object: p } });
        const r = await call('POST', '/mutate', body);
        expectDenial(r);
        const res = r.json.response as Response;
        if (res.patch) {
          const ops = JSON.parse(Buffer.from(res.patch, 'base64').toString('utf8')) as fastJsonPatch.Operation[];
          fastJsonPatch.applyPatch(structuredClone(JSON.parse(JSON.stringify(p))), ops, true, false);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('rt injector (the command)', () => {
  it('parses its flags and env, and refuses a start without TLS files', () => {
    const o = parseInjectorArgs(['--tls-cert-file', 'c', '--tls-key-file', 'k', '--native-sidecar', 'false', '--sidecar-image', 'img:1'], {});
    expect(o).toMatchObject({ port: 4443, listenAddress: '0.0.0.0', certFile: 'c', keyFile: 'k', settings: { nativeSidecar: false, sidecarImage: 'img:1' } });
    expect(parseInjectorArgs([], { RT_INJECTOR_TLS_CERT_FILE: 'c', RT_INJECTOR_TLS_KEY_FILE: 'k', RT_INJECTOR_PORT: '9443' })).toMatchObject({ port: 9443 });
    expect(() => parseInjectorArgs([], {})).toThrow(/--tls-cert-file and --tls-key-file are required/);
    expect(() => parseInjectorArgs(['--tls-cert-file', 'c', '--tls-key-file', 'k', '--native-sidecar', 'maybe'], {})).toThrow(/--native-sidecar must be true or false/);
    expect(() => parseInjectorArgs(['--bogus'], {})).toThrow(InjectorUsageError);
  });

  it('parses the identity flags: --mtls needs the trust anchors; the issuer defaults to the control-plane address', () => {
    const tls = ['--tls-cert-file', 'c', '--tls-key-file', 'k'];
    expect(parseInjectorArgs(tls, {})).toMatchObject({ settings: { identity: undefined } });
    const o = parseInjectorArgs([...tls, '--mtls', 'true', '--trust-anchors-file', ca.caFile, '--control-plane-address', 'op:6500'], {});
    expect(o !== 'help' && o.settings.identity).toEqual({ trustDomain: 'cluster.local', issuerAddress: 'op:6500', trustAnchorsPem: ca.caPem });
    const e = parseInjectorArgs(tls, { RT_MTLS_ENABLED: 'true', RT_TRUST_ANCHORS_FILE: ca.caFile, RT_TRUST_DOMAIN: 'example.org', RT_IDENTITY_ISSUER_ADDRESS: 'issuer:6500' });
    expect(e !== 'help' && e.settings.identity).toMatchObject({ trustDomain: 'example.org', issuerAddress: 'issuer:6500' });
    expect(() => parseInjectorArgs([...tls, '--mtls', 'true'], {})).toThrow(/--mtls true needs --trust-anchors-file/);
    expect(() => parseInjectorArgs([...tls, '--mtls', 'yes'], {})).toThrow(/--mtls must be true or false/);
    expect(() => parseInjectorArgs([...tls, '--mtls', 'true', '--trust-anchors-file', '/nope.pem'], {})).toThrow(/--trust-anchors-file \/nope\.pem: ENOENT/);
    expect(() => parseInjectorArgs([...tls, '--mtls', 'true', '--trust-anchors-file', ca.caFile, '--trust-domain', 'A B'], {})).toThrow(/--trust-domain: trust domain "A B"/);
  });

  it('runs as `rt injector` and answers /healthz over HTTPS', async () => {
    const port = await freePort();
    const proc = spawn(process.execPath, [join(import.meta.dirname, '../../cli/rt.ts'), 'injector', '--port', String(port), '--listen-address', '127.0.0.1', '--tls-cert-file', join(dir, 'tls.crt'), '--tls-key-file', join(dir, 'tls.key')], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' },
    });
    try {
      const status = await vi.waitFor(
        () =>
          new Promise<number>((resolve, reject) => {
            const req = request({ host: '127.0.0.1', port, path: '/healthz', ca: ca.caPem, servername: 'localhost' }, (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            });
            req.on('error', reject);
            req.end();
          }),
        { timeout: 20_000, interval: 200 },
      );
      expect(status).toBe(200);
    } finally {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
