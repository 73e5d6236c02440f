/**
 * The operator holds only the Secrets Components reference: 2,000 unrelated Secrets of 100 KB
 * each (200 MB of values) change the RSS of an `rt operator` process by less than 10 MB, since it
 * watches Secrets' metadata only; and a change to a referenced Secret still reaches a sidecar's
 * snapshot in under a second.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable } from '../services/kube.ts';
import { freePort } from '../services/net.ts';
import { component, type OperatorBed, startOperatorBed, watchAs } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');
const RT = join(import.meta.dirname, '../../cli/bin/rt.js');
const NOISE = 2000;
const SIZE = 100 * 1024;

let bed: OperatorBed;
let operator: ChildProcess | undefined;
let log = '';

const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

beforeAll(async () => {
  if (!available) return;
  bed = await startOperatorBed();
}, 180_000);

afterAll(async () => {
  operator?.kill('SIGKILL');
  await bed?.stop();
});

describe.skipIf(!available)('Secrets in the operator', () => {
  it(`${NOISE} unrelated Secrets of 100 KB change an operator's RSS by less than 10 MB; a referenced one's change reaches a sidecar in under 1 s`, async () => {
    const ns = 'noisy';
    await bed.namespace(ns);
    // the measured operator: a process of its own (the bed's in-process one serves the sidecar below)
    const health = await freePort();
    operator = spawn(process.execPath, [RT, 'operator', '--kubeconfig', bed.kube.kubeconfig, '--grpc-port', '0', '--listen-address', '127.0.0.1', '--health-port', String(health), '--leader-election-namespace', 'measured'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAME: 'measured' } });
    operator.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    operator.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    await vi.waitFor(async () => expect(await fetch(`http://127.0.0.1:${health}/readyz`).then((r) => r.status, () => 0), log).toBe(200), { timeout: 60_000, interval: 200 });
    // settled: read every 200 ms until five readings in a row lie within 512 KB; the lowest of them
    const settle = async () => {
      const r: number[] = [];
      await vi.waitFor(() => {
        r.push(rssKb(operator!.pid!));
        const last = r.slice(-5);
        expect(last.length === 5 && Math.max(...last) - Math.min(...last) < 512).toBe(true);
      }, { timeout: 30_000, interval: 200 });
      return Math.min(...r.slice(-5));
    };
    const before = await settle();

    const value = Buffer.alloc(SIZE, 'x').toString('base64');
    let next = 0;
    const worker = async () => {
      while (next < NOISE) {
        const i = next++;
        const r = await bed.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: `noise-${i}` }, data: { blob: value } });
        if (r.status !== 201) throw new Error(`creating noise-${i}: ${r.status} ${r.text.slice(0, 200)}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));

    // a referenced Secret made after the noise: once its value reaches the sidecar, the operators have seen every noise event before it
    await bed.apply(
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'db', namespace: ns }, stringData: { password: 'one' } },
      component(ns, 'store', 'state.redis', [{ name: 'redisHost', value: 'h:1' }, { name: 'redisPassword', secretKeyRef: { name: 'db', key: 'password' } }]),
    );
    const token = readFileSync(await bed.identity(ns, 'app-pod', 'app'), 'utf8');
    const w = watchAs(bed, token);
    type Store = { spec: { metadata: { name: string; value?: string }[] } };
    const password = () => (w.latest().get('Component/store') as Store | undefined)?.spec.metadata.find((m) => m.name === 'redisPassword')?.value;
    try {
      await vi.waitFor(() => expect(password()).toBe('one'), { timeout: 30_000, interval: 50 });
      // the measured operator takes the same watch stream at its own pace: read once its RSS stops moving
      let after = await settle();
      await vi.waitFor(async () => {
        const again = await settle();
        const moved = Math.abs(again - after);
        after = again;
        expect(moved).toBeLessThan(512);
      }, { timeout: 30_000, interval: 0 });
      const grewMb = (after - before) / 1024;
      console.log(`[secrets] operator RSS ${(before / 1024).toFixed(1)} MB → ${(after / 1024).toFixed(1)} MB with ${NOISE} unrelated Secrets of ${SIZE / 1024} KB (+${grewMb.toFixed(1)} MB)`);
      expect(grewMb).toBeLessThan(10);

      // a change to the referenced Secret reaches the sidecar in under a second (from the API call that changes it)
      const t0 = performance.now();
      const changed = await bed.kube.request('PATCH', `/api/v1/namespaces/${ns}/secrets/db`, { stringData: { password: 'two' } });
      expect(changed.status, changed.text).toBe(200);
      await vi.waitFor(() => expect(password()).toBe('two'), { timeout: 5_000, interval: 10 });
      const ms = performance.now() - t0;
      console.log(`[secrets] a referenced Secret's change reached the sidecar in ${ms.toFixed(0)} ms`);
      expect(ms).toBeLessThan(1000);
    } finally {
      w.close();
    }
  }, 600_000);
});
