/**
 * Workload identity's costs, each beside the bare crypto it cannot go below:
 *  - the issuer's certificates per second (check the CSR, sign the certificate: `issueFor`), one
 *    process, serially and 8 at a time; anchor: the bare ECDSA P-256 signatures per second
 *    node:crypto makes (a certificate takes one signature and one verification at least);
 *  - what a sidecar spends before its first request: a P-256 key and a CSR; anchor: the bare
 *    key generation.
 * The gRPC issuer path (TokenReview against a real API server) is dominated by the API server's
 * TokenReview and is measured by the cluster suites, not here.
 *
 *   node bench/identity.bench.ts
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { issueFor, type IssuerSettings } from '../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../sidecar/src/identity/x509.ts';
import { median, printTable, ratio, type Row } from './lib.ts';

const ROUNDS = 5;
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
}

await main();
