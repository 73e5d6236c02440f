/**
 * Event-routing input binding: webhook deliveries per second that reach the app, with bearer
 * JWT validation on (RS256, keys from the tenant's JWKS), and their p99 latency.
 *
 * Processes: this one drives the load and plays the cloud (Entra ID and ARM stand-ins over
 * HTTPS with a test CA); the sidecar (`rt sidecar`) and the app (a bare node:http server that
 * answers 200) each run in a child process. Anchor: the same load sent straight to the app,
 * and the issue's target of 2,000 events/s.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { load, machineLine, percentile, printTable, ratio, startChild, type Row } from './lib.ts';
import { startAzureStandIns } from '../test/services/azure-standins.ts';
import { freePort, waitForPort } from '../test/services/net.ts';

const TARGET = 2000;
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5000);
const CONCURRENCY = 32;
const root = resolve(import.meta.dirname, '..');

const APP = `
  const http = require('node:http');
  http.createServer((req, res) => { req.resume(); req.on('end', () => { res.statusCode = req.method === 'POST' ? 200 : 404; res.end(); }); })
    .listen(Number(process.argv[1]), '127.0.0.1');
`;

async function main(): Promise<void> {
  console.log(machineLine());
  const az = await startAzureStandIns();
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-eg-'));
  const appPort = await freePort();
  const hookPort = await freePort();
  const httpPort = await freePort();
  az.arm.handshakeTarget = `http://127.0.0.1:${hookPort}/`;
  const q = JSON.stringify;
  const md: Record<string, string> = {
    direction: 'input',
    cloudTenantId: az.entra.tenantId,
    cloudSubscriptionId: az.subscriptionId,
    cloudClientId: az.clientId,
    cloudClientSecret: az.clientSecret,
    subscriberEndpoint: 'https://events.example.test/api/events',
    handshakePort: String(hookPort),
    handshakeAddress: '127.0.0.1',
    scope: `/subscriptions/${az.subscriptionId}/resourceGroups/rg1/providers/Microsoft.EventGrid/topics/bench`,
    azureAuthorityHost: az.entra.url,
    armEndpoint: az.arm.url,
    armPollInterval: '20ms',
  };
  writeFileSync(
    join(dir, 'eg.yaml'),
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: orders\nspec:\n  type: bindings.cloud.eventrouter\n  version: v1\n  initTimeout: 30s\n  metadata:\n${Object.entries(md)
      .map(([k, v]) => `    - name: ${k}\n      value: ${q(v)}`)
      .join('\n')}\n`,
  );

  const app = await startChild(process.execPath, ['-e', APP, String(appPort)]);
  await waitForPort('127.0.0.1', appPort);
  const sidecar = await startChild(
    process.execPath,
    [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', 'bench', '--app-port', String(appPort), '--http-port', String(httpPort), '--grpc-port', String(await freePort()),
      '--resources-path', dir, '--data-dir', join(dir, 'data'), '--log-level', 'warn'],
    { env: { NODE_EXTRA_CA_CERTS: az.ca.caFile }, readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz` },
  );
  const rows: Row[] = [];
  try {
    await waitForPort('127.0.0.1', hookPort, 30_000);
    const deadline = Date.now() + 30_000;
    while (![...az.arm.subscriptions.values()].some((s) => s.provisioningState === 'Succeeded')) {
      if (Date.now() > deadline) throw new Error('the event subscription was not created');
      await new Promise((r) => setTimeout(r, 50));
    }

    const event = (i: number) => JSON.stringify({ specversion: '1.0', id: `e${i}`, source: '/bench', type: 'bench.created', data: { i, pad: 'x'.repeat(200) } });
    const batch = (i: number) => `[${Array.from({ length: 10 }, (_, k) => event(i * 10 + k)).join(',')}]`;
    const single = { 'content-type': 'application/cloudevents+json; charset=utf-8' };
    const token = await az.entra.mint({ aud: az.clientId });
    // distinct tokens, more than the validator remembers, so that every request is verified
    const fresh: string[] = [];
    for (let i = 0; i < 1500; i++) fresh.push(await az.entra.mint({ aud: az.clientId, claims: { n: i } }));

    const warm = { url: `http://127.0.0.1:${hookPort}/`, method: 'POST' as const, headers: { ...single, authorization: `Bearer ${token}` }, body: event, durationMs: 1000, concurrency: CONCURRENCY };
    await load(warm);

    const direct = await load({ url: `http://127.0.0.1:${appPort}/orders`, method: 'POST', headers: single, body: event, durationMs: DURATION_MS, concurrency: CONCURRENCY });
    const cached = await load({ ...warm, durationMs: DURATION_MS });
    const perRequest = await loadWithTokens(`http://127.0.0.1:${hookPort}/`, fresh, event);
    const batched = await load({
      url: `http://127.0.0.1:${hookPort}/`,
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents-batch+json', authorization: `Bearer ${token}` },
      body: batch,
      durationMs: DURATION_MS,
      concurrency: CONCURRENCY,
    });

    const row = (scenario: string, r: { rps: number; p50Ms: number; p99Ms: number; errors: number }, perRequestEvents = 1): Row => ({
      scenario,
      'events/s': Math.round(r.rps * perRequestEvents),
      'p50 ms': r.p50Ms,
      'p99 ms': r.p99Ms,
      errors: r.errors,
      'target events/s': TARGET,
      'vs target': ratio(r.rps * perRequestEvents, TARGET),
      'vs app alone': ratio(r.rps * perRequestEvents, direct.rps),
    });
    rows.push(row('anchor: POST straight to the app (no sidecar, no JWT)', direct));
    rows.push(row('webhook → sidecar → app, JWT checked (token reused, as the service does)', cached));
    rows.push(row('webhook → sidecar → app, JWT RS256-verified on every request', perRequest));
    rows.push(row('webhook → sidecar → app, batches of 10, JWT checked', batched, 10));
  } finally {
    await sidecar.stop();
    await app.stop();
    await az.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(`event-routing webhook deliveries to the app (concurrency ${CONCURRENCY}, ${DURATION_MS / 1000} s each)`, rows);
}

/** Closed-loop load where request i carries token i mod n (lib's load() sends fixed headers). */
async function loadWithTokens(url: string, tokens: string[], body: (i: number) => string) {
  const { Pool } = await import('undici');
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: CONCURRENCY });
  const lat: number[] = [];
  let errors = 0;
  let n = 0;
  const start = performance.now();
  const end = start + DURATION_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const i = n++;
        const t0 = performance.now();
        try {
          const res = await pool.request({
            method: 'POST',
            path: u.pathname,
            headers: { 'content-type': 'application/cloudevents+json', authorization: `Bearer ${tokens[i % tokens.length]}` },
            body: body(i),
          });
          await res.body.dump();
          if (res.statusCode !== 200) errors++;
        } catch {
          errors++;
        }
        lat.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  return { requests: lat.length, errors, rps: lat.length / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
