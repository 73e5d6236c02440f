/**
 * Admission latency and throughput of `rt injector` for a pod with 3 pluggable components
 * (injected from Components in the informer's cache), beside its anchor: a bare HTTPS echo of
 * the same AdmissionReview body. Both servers run in a child process of their own; the load
 * generator runs here. Target: p99 < 5 ms.
 *
 *   node bench/injector.bench.ts            the benchmark
 *   node bench/injector.bench.ts --serve injector|echo CERT KEY   (the child)
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import pino from 'pino';
import { StaticComponents } from '../injector/src/components.ts';
import { review } from '../injector/src/review.ts';
import { startInjectorServer } from '../injector/src/server.ts';
import { makeTestCa } from '../test/services/ca.ts';
import { freePort } from '../test/services/net.ts';
import { load, percentile, printTable, ratio, startChild, type Row } from './lib.ts';

const NAMESPACE = 'bench';

function components() {
  return new StaticComponents(
    ['store', 'queue', 'secrets'].map((name, i) => ({
      apiVersion: 'rt.io/v1alpha1',
      kind: 'Component',
      metadata: { name, namespace: NAMESPACE, annotations: { 'rt.io/component-container': JSON.stringify({ name, image: `registry.local/${name}:1`, env: [{ name: 'LOG', value: 'info' }] }) } },
      spec: { type: `${['state', 'pubsub', 'secretstores'][i]}.${name}` },
      scopes: ['orders'],
    })),
  );
}

function reviewBody(): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      operation: 'CREATE',
      namespace: NAMESPACE,
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          generateName: 'orders-6d4cf56db6-',
          namespace: NAMESPACE,
          labels: { app: 'orders', 'pod-template-hash': '6d4cf56db6' },
          annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': 'orders', 'rt.io/app-port': '8080', 'rt.io/inject-pluggable-components': 'true', 'rt.io/log-level': 'info' },
        },
        spec: {
          serviceAccountName: 'default',
          containers: [{ name: 'app', image: 'registry.local/orders:1', ports: [{ containerPort: 8080 }], env: [{ name: 'MODE', value: 'prod' }], resources: { requests: { cpu: '100m', memory: '128Mi' } } }],
          volumes: [{ name: 'kube-api-access-x', projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 3607 } }] } }],
        },
      },
    },
  });
}

async function serve(kind: string, certFile: string, keyFile: string, port: number): Promise<void> {
  if (kind === 'injector') {
    await startInjectorServer({
      port,
      listenAddress: '127.0.0.1',
      certFile,
      keyFile,
      settings: { sidecarImage: 'rt:dev', controlPlaneAddress: 'rt-operator.rt-system.svc:6500', nativeSidecar: true },
      components: components(),
      log: pino({ level: 'silent' }),
    });
    return;
  }
  const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
}

async function bench(): Promise<void> {
  const ca = makeTestCa();
  ca.trust();
  const body = reviewBody();
  const rows: Row[] = [];
  try {
    // check the injector's answer once: a patch, no denial
    const results: Record<string, Record<number, { rps: number; p50Ms: number; p99Ms: number; errors: number }>> = {};
    for (const kind of ['echo', 'injector']) {
      const port = await freePort();
      const child = await startChild(process.execPath, [import.meta.filename, '--serve', kind, `${ca.dir}/server.crt`, `${ca.dir}/server.key`, String(port)], {
        readyUrl: `https://localhost:${port}/healthz`,
      });
      try {
        if (kind === 'injector') {
          const r = await fetch(`https://localhost:${port}/mutate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
          const review = (await r.json()) as { response: { allowed: boolean; patch?: string } };
          const ops = JSON.parse(Buffer.from(review.response.patch ?? 'W10=', 'base64').toString()) as unknown[];
          if (!review.response.allowed || ops.length === 0) throw new Error(`the injector did not inject: ${JSON.stringify(review)}`);
        }
        results[kind] = {};
        for (const concurrency of [1, 16]) {
          await load({ url: `https://localhost:${port}/mutate`, method: 'POST', body, headers: { 'content-type': 'application/json' }, concurrency, durationMs: 1000 }); // warm-up
          results[kind][concurrency] = await load({ url: `https://localhost:${port}/mutate`, method: 'POST', body, headers: { 'content-type': 'application/json' }, concurrency, durationMs: 5000 });
        }
      } finally {
        await child.stop();
      }
    }
    for (const concurrency of [1, 16]) {
      const e = results.echo[concurrency];
      const i = results.injector[concurrency];
      rows.push({ case: `HTTPS echo (anchor), ${concurrency} in flight`, 'req/s': e.rps, 'p50 ms': e.p50Ms, 'p99 ms': e.p99Ms, errors: e.errors, 'req/s vs anchor': '1.00×' });
      rows.push({ case: `rt injector, 3 components, ${concurrency} in flight`, 'req/s': i.rps, 'p50 ms': i.p50Ms, 'p99 ms': i.p99Ms, errors: i.errors, 'req/s vs anchor': ratio(i.rps, e.rps) });
    }
    // the admission decision alone (parse, copy, edit, compare, encode), without HTTPS
    const settings = { sidecarImage: 'rt:dev', controlPlaneAddress: 'rt-operator.rt-system.svc:6500', nativeSidecar: true };
    const comps = components();
    for (let n = 0; n < 2000; n++) review(body, settings, comps);
    const lat: number[] = [];
    const t0 = performance.now();
    for (let n = 0; n < 20_000; n++) {
      const t = performance.now();
      review(body, settings, comps);
      lat.push(performance.now() - t);
    }
    const elapsed = (performance.now() - t0) / 1000;
    lat.sort((a, b) => a - b);
    rows.push({ case: 'the admission decision alone, in-process (no HTTPS)', 'req/s': lat.length / elapsed, 'p50 ms': percentile(lat, 50), 'p99 ms': percentile(lat, 99), errors: 0, 'req/s vs anchor': '' });
    printTable(`admission of a pod with 3 pluggable components (${body.length} B AdmissionReview); target p99 < 5 ms`, rows);
  } finally {
    ca.remove();
  }
}

const i = process.argv.indexOf('--serve');
if (i >= 0) {
  const [kind, cert, key, port] = process.argv.slice(i + 1);
  await serve(kind, cert, key, Number(port));
} else {
  await bench();
}
