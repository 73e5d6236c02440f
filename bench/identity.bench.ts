/**
 * Workload identity's costs, each beside the bare crypto it cannot go below:
 *  - the issuer's certificates per second (check the CSR, sign the certificate: `issueFor`), one
 *    process, serially and 8 at a time; anchor: the bare ECDSA P-256 signatures per second
 *    node:crypto makes (a certificate takes one signature and one verification at least);
 *  - what a sidecar spends before its first request: a P-256 key and a CSR; anchor: the bare
 *    key generation;
 *  - the compiled `rt sidecar`'s start → healthz 204 with identity on (`--enable-mtls`: the local
 *    CA of standalone mode signs in process, so this is the sidecar's own cost: loading the X.509
 *    code, the key, the CSR, the certificate, the TLS internal port), beside the same sidecar
 *    without it, rounds interleaved. On a cluster the issuer's round trip (TokenReview) comes on
 *    top, measured by the cluster suites.
 * The gRPC issuer path (TokenReview against a real API server) is dominated by the API server's
 * TokenReview and is measured by the cluster suites, not here.
 *
 *   node bench/identity.bench.ts
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';
import { rmSync } from 'node:fs';
import { freePort } from '../test/services/net.ts';
import { issueFor, type IssuerSettings } from '../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../sidecar/src/identity/x509.ts';
import { buildRt, machineLine, median, printTable, ratio, shortTempDir, type Row } from './lib.ts';

const ROUNDS = 5;
const START_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const PER_ROUND = 300;
const id = { trustDomain: 'cluster.local', namespace: 'bench', appId: 'checkout' };

async function perSecond(n: number, inFlight: number, one: (i: number) => Promise<unknown> | unknown): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await one(next++);
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  console.log(machineLine());
  const ca = await createRootCa({ ttlMs: 48 * 3_600_000 });
  const settings: IssuerSettings = { trustDomain: id.trustDomain, ca, trustBundlePem: ca.certPem, ttlMs: 24 * 3_600_000 };
  // CSRs made up front: the issuer's side only
  const csrs = await Promise.all(Array.from({ length: PER_ROUND }, () => createCsr(newWorkloadKey(), id)));
  const issue = (i: number) => issueFor(settings, { namespace: id.namespace, appId: id.appId }, { id: id.appId, namespace: id.namespace, trustDomain: id.trustDomain, csrPem: csrs[i % csrs.length] });
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const message = Buffer.alloc(512, 7);
  const bareSign = () => sign('sha256', message, privateKey);
  await issue(0); // loads @peculiar/x509
  const serial: number[] = [];
  const parallel: number[] = [];
  const bare: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    bare.push(await perSecond(PER_ROUND * 4, 1, bareSign));
    serial.push(await perSecond(PER_ROUND, 1, issue));
    parallel.push(await perSecond(PER_ROUND, 8, issue));
  }
  const rows: Row[] = [
    { measure: 'certificates issued / s, 1 at a time', rt: median(serial), anchor: median(bare), 'anchor is': 'bare ECDSA P-256 signatures / s', ratio: ratio(median(serial), median(bare)) },
    { measure: 'certificates issued / s, 8 at a time', rt: median(parallel), anchor: median(bare), 'anchor is': 'bare ECDSA P-256 signatures / s', ratio: ratio(median(parallel), median(bare)) },
  ];

  const keyAndCsr: number[] = [];
  const keyOnly: number[] = [];
  for (let r = 0; r < 50; r++) {
    let t = performance.now();
    await createCsr(newWorkloadKey(), id);
    keyAndCsr.push(performance.now() - t);
    t = performance.now();
    generateKeyPairSync('ec', { namedCurve: 'P-256' });
    keyOnly.push(performance.now() - t);
  }
  rows.push({ measure: 'sidecar: key + CSR, ms (median of 50)', rt: median(keyAndCsr), anchor: median(keyOnly), 'anchor is': 'bare P-256 key generation, ms', ratio: ratio(median(keyAndCsr), median(keyOnly)) });
  printTable(`identity: issuer and workload key (${ROUNDS} rounds, median)`, rows);
  await startRows();
}

/** ms from spawn until healthz answers 204 (with identity on, it answers 503 until the first certificate). */
async function startToHealthy(rt: string, extra: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const dataDir = shortTempDir();
  const port = await freePort();
  const args = [rt, 'sidecar', '--app-id', 'bench', '--http-port', String(port), '--grpc-port', String(await freePort()), '--disable-metrics', '--data-dir', dataDir, '--log-level', 'warn', ...extra];
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } });
  try {
    while (performance.now() - t0 < 30_000 && child.exitCode === null) {
      const status = await fetch(`http://127.0.0.1:${port}/v1.0/healthz`).then((r) => r.status, () => 0);
      if (status === 204) return performance.now() - t0;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`rt sidecar ${extra.join(' ')}: not healthy within 30 s (exit ${child.exitCode})`);
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function startRows(): Promise<void> {
  const buildDir = shortTempDir();
  const rtHome = shortTempDir();
  try {
    const rt = buildRt(buildDir);
    const env = { RT_HOME: rtHome };
    await startToHealthy(rt, ['--enable-mtls'], env); // makes the local CA once, as a laptop's first run does
    const plain: number[] = [];
    const mtls: number[] = [];
    for (let i = 0; i < START_ROUNDS; i++) {
      plain.push(await startToHealthy(rt, [], env));
      mtls.push(await startToHealthy(rt, ['--enable-mtls'], env));
    }
    printTable(`identity: compiled rt sidecar, start → healthz 204, ms (median of ${START_ROUNDS}, interleaved)`, [
      { measure: 'start → healthz, --enable-mtls (local CA)', rt: median(mtls), anchor: median(plain), 'anchor is': 'the same sidecar without identity', ratio: ratio(median(mtls), median(plain)) },
    ]);
  } finally {
    rmSync(buildDir, { recursive: true, force: true });
    rmSync(rtHome, { recursive: true, force: true });
  }
}

await main();
