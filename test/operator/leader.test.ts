/**
 * One leader at a time, on a real kube-apiserver with two `rt operator` processes: the leader is
 * stopped with SIGSTOP (its API access is cut as a frozen node's would be), the other takes the
 * Lease over and writes, and once the old one is resumed not one of its status writes lands after
 * the new leader's first. Who wrote what is read from the API server's audit log (each replica
 * sends its own User-Agent). Also: the operator's /readyz answers 503 until it serves sidecars.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, startKube, type KubeCluster } from '../services/kube.ts';
import { freePort } from '../services/net.ts';
import { CRDS } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');
const RT = join(import.meta.dirname, '../../cli/bin/rt.js');
const NS = 'leader';

interface Replica {
  name: string;
  proc: ChildProcess;
  health: number;
  log: string;
}

let kube: KubeCluster | undefined;
const replicas: Replica[] = [];

async function kubectl(args: string[], input?: string): Promise<string> {
  const r = await kube!.kubectl(args, { input });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function startReplica(name: string): Promise<Replica> {
  const health = await freePort();
  const proc = spawn(process.execPath, [RT, 'operator', '--kubeconfig', kube!.kubeconfig, '--grpc-port', '0', '--listen-address', '127.0.0.1', '--health-port', String(health), '--leader-election-namespace', NS], {
    env: { ...process.env, POD_NAME: name },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const r: Replica = { name, proc, health, log: '' };
  proc.stdout!.on('data', (d: Buffer) => (r.log += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (r.log += d.toString()));
  replicas.push(r);
  return r;
}

const readyz = (r: Replica) => fetch(`http://127.0.0.1:${r.health}/readyz`).then((x) => x.status, () => 0);

interface AuditEvent {
  stage: string;
  verb: string;
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; name?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
}

/** Status writes that landed (2xx), in the order the API server received them. */
function statusWrites(): Array<{ by: string; at: number; name: string }> {
  const file = kube!.controlPlane.auditLog!;
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => e.stage === 'ResponseComplete' && e.objectRef?.resource === 'components' && e.objectRef.subresource === 'status' && (e.responseStatus?.code ?? 0) < 300)
    .map((e) => ({ by: /rt-operator\/([^_]+)_/.exec(e.userAgent ?? '')?.[1] ?? e.userAgent ?? '', at: Date.parse(e.requestReceivedTimestamp), name: e.objectRef!.name! }))
    .sort((a, b) => a.at - b.at);
}

const component = (name: string, type: string, extra: Array<{ name: string; value: string }> = []) =>
  stringify({ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name, namespace: NS }, spec: { type, version: 'v1', metadata: extra } });

beforeAll(async () => {
  if (!available) return;
  kube = await startKube({ controllers: false, audit: true });
  await kubectl(['apply', '-f', CRDS]);
  await kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.rt.io']);
  await kubectl(['create', 'namespace', NS]);
}, 600_000);

afterAll(async () => {
  for (const r of replicas) {
    r.proc.kill('SIGCONT');
    r.proc.kill('SIGKILL');
  }
  await kube?.stop();
});

describe.skipIf(!available)('two operator replicas', () => {
  it('answer /readyz 503 until they serve sidecars, then 200', async () => {
    const a = await startReplica('op-a');
    const b = await startReplica('op-b');
    for (const r of [a, b]) {
      // the health port answers before the caches are filled: never a refused connection once up
      await vi.waitFor(async () => expect(await readyz(r), r.log).toBeGreaterThan(0), { timeout: 60_000, interval: 20 });
    }
    await vi.waitFor(async () => expect([await readyz(a), await readyz(b)], a.log + b.log).toEqual([200, 200]), { timeout: 60_000, interval: 100 });
    expect(await fetch(`http://127.0.0.1:${a.health}/healthz`).then((x) => x.status)).toBe(200);
  }, 150_000);

  it('a leader stopped with SIGSTOP lands no status write after the new leader\'s first', async () => {
    const holder = async () => ((JSON.parse(await kubectl(['get', 'lease', 'rt-operator', '-n', NS, '-o', 'json'])) as { spec: { holderIdentity?: string } }).spec.holderIdentity ?? '').split('_')[0];
    const leaderName = await vi.waitFor(async () => {
      const h = await holder();
      expect(['op-a', 'op-b']).toContain(h);
      return h;
    }, { timeout: 30_000, interval: 200 });
    const leader = replicas.find((r) => r.name === leaderName)!;
    const other = replicas.find((r) => r !== leader)!;

    await kubectl(['apply', '-f', '-'], component('first', 'state.in-memory'));
    await vi.waitFor(() => expect(statusWrites().filter((w) => w.name === 'first').map((w) => w.by)).toEqual([leader.name]), { timeout: 20_000, interval: 200 });

    // the leader freezes; while it is stopped, work piles up for whichever replica leads
    leader.proc.kill('SIGSTOP');
    await kubectl(['apply', '-f', '-'], component('first', 'state.in-memory', [{ name: 'changed', value: '1' }]));
    await kubectl(['apply', '-f', '-'], component('second', 'bindings.sftp'));
    await vi.waitFor(async () => expect(await holder()).toBe(other.name), { timeout: 40_000, interval: 500 });
    const firstOfNew = await vi.waitFor(() => {
      const w = statusWrites().find((x) => x.by === other.name);
      expect(w).toBeDefined();
      return w!;
    }, { timeout: 20_000, interval: 200 });

    // resumed: it still has the piled-up watch events, and an overdue renew timer
    leader.proc.kill('SIGCONT');
    await kubectl(['apply', '-f', '-'], component('third', 'state.in-memory'));
    await vi.waitFor(() => expect(leader.log).toMatch(/not the leader|no longer writing/), { timeout: 20_000, interval: 200 });
    await vi.waitFor(() => expect(statusWrites().filter((w) => w.name === 'third').map((w) => w.by)).toEqual([other.name]), { timeout: 20_000, interval: 200 });
    const late = statusWrites().filter((w) => w.by === leader.name && w.at >= firstOfNew.at);
    expect(late, JSON.stringify(statusWrites())).toEqual([]);
    // the new leader did the piled-up work
    expect(statusWrites().filter((w) => w.by === other.name).map((w) => w.name)).toEqual(expect.arrayContaining(['first', 'second', 'third']));
  }, 150_000);
});
