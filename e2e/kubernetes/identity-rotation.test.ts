/**
 * Workload identity on the project's cluster under steady invocation load: two injected apps
 * call each other through their sidecars (mutual TLS on every hop) while their 2-minute
 * certificates renew again and again and the identity root is rotated by the documented three
 * `helm upgrade` steps (docs/identity.md "Root rotation"): trust both roots, sign with the new
 * one, drop the old one. Not one call may fail. The apps ask the operator's issuer for their
 * certificates (identity.podCertificates=false): certificates shorter than an hour exist only on
 * that path, the API server's floor for PodCertificateRequests.
 *
 * Progress is read from the sidecars themselves: the certificate each presents on its internal
 * port (a TLS handshake without a client certificate still shows the server's). The pods are read
 * again at every check (a pod replaced on the loaded node gets a new address), a replaced pod or
 * restarted container is reported, and when a wait runs out the test prints what the cluster knew
 * (pods, events, the sidecars' and operator's logs) before it fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createRootCa } from '../../sidecar/src/identity/x509.ts';
import { CHART, LOCAL_VALUES } from '../../test/chart/render.ts';
import { requireService } from '../../test/services/ci.ts';
import type { KubeCluster } from '../../test/services/kube.ts';
import { clusterWithImagesUnavailable, startClusterWithImages, type ClusterWithImages } from '../../test/services/kube-node.ts';

const why = clusterWithImagesUnavailable();
const available = requireService('Kubernetes node (kubelet, containerd, Docker engine)', why === undefined, why ?? '');

const SYSTEM = 'rt-system';
const NS = 'rotation';
const APPS = ['front', 'back'] as const;
const BASE = ['--namespace', SYSTEM, '-f', LOCAL_VALUES, '--set', 'identity.workloadCertTTL=2m', '--set', 'identity.podCertificates=false', '--set', 'injector.replicas=1'];

let cluster: ClusterWithImages | undefined;
let dir = '';
beforeAll(async () => {
  if (!available) return;
  dir = mkdtempSync(join(tmpdir(), 'rt-rotation-'));
  cluster = await startClusterWithImages((l) => console.log(`[cluster] ${l}`));
}, 1_200_000);
afterAll(async () => {
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 180_000);

async function ok(r: Promise<{ code: number; stdout: string; stderr: string }>, what: string): Promise<string> {
  const done = await r;
  if (done.code !== 0) throw new Error(`${what} failed (${done.code}): ${done.stderr}\n${done.stdout}`);
  return done.stdout;
}

const APP = `require('node:http').createServer((req, res) => res.end(JSON.stringify({ me: process.env.ME, path: req.url }))).listen(3000);
process.on('SIGTERM', () => process.exit(0));`;

function deployment(app: string) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: app, namespace: NS },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app } },
      template: {
        metadata: { labels: { app }, annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': app, 'rt.io/app-port': '3000' } },
        spec: { terminationGracePeriodSeconds: 5, containers: [{ name: 'app', image: 'rt:dev', imagePullPolicy: 'Never', command: ['node', '-e', APP], env: [{ name: 'ME', value: app }] }] },
      },
    },
  };
}

/** The certificate a sidecar's internal port presents (its serial and issuer), read in a handshake this client does not finish. */
function presented(ip: string): Promise<{ serial: string; issuer: string } | undefined> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: ip, port: 50002, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => {
      const c = s.getPeerCertificate();
      resolve(c?.serialNumber ? { serial: c.serialNumber, issuer: new X509Certificate(c.raw).issuer } : undefined);
      s.destroy();
    });
    s.on('error', () => resolve(undefined));
    s.setTimeout(5000, () => {
      s.destroy();
      resolve(undefined);
    });
  });
}

describe.skipIf(!available)('workload identity under load on a real node', () => {
  it('renews 2-minute certificates and rotates the root in three helm upgrades while two apps call each other, with no failed call', { timeout: 1_500_000 }, async () => {
    const k: KubeCluster = cluster!.kube;
    await ok(k.helm(['install', 'rt', CHART, ...BASE, '--create-namespace', '--wait', '--timeout', '4m']), 'helm install');
    await k.createNamespace(NS);
    // the injector's pod can be Ready before the API server reaches it through its Service; with
    // failurePolicy Ignore a pod made meanwhile starts without its sidecar (a run saw both apps so):
    // apply the apps once a server-side dry run comes back injected
    const probe = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'probe', namespace: NS, annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': 'probe' } }, spec: { containers: [{ name: 'app', image: 'rt:dev', imagePullPolicy: 'Never' }] } };
    await vi.waitFor(
      async () => {
        const spec = (JSON.parse(await ok(k.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: JSON.stringify(probe) }), 'dry-run pod')) as { spec: { initContainers?: Array<{ name: string }>; containers: Array<{ name: string }> } }).spec;
        expect([...(spec.initContainers ?? []), ...spec.containers].map((x) => x.name)).toContain('rt-sidecar');
      },
      { timeout: 120_000, interval: 1000 },
    );
    await ok(k.kubectl(['apply', '-f', '-'], { input: APPS.map((a) => JSON.stringify(deployment(a))).join('\n') }), 'apply apps');
    type Pod = { metadata: { name: string; uid: string; labels: Record<string, string> }; status: { podIP?: string; containerStatuses?: Array<{ name: string; ready: boolean; restartCount: number }> } };
    const ips: Record<string, string> = {};
    const seenPods: Record<string, string> = {};
    const changes: string[] = [];
    /** Reads the apps' pods: their addresses now, and any pod replaced or container restarted since the last read. */
    const readPods = async () => {
      const pods = JSON.parse(await ok(k.kubectl(['get', 'pods', '-n', NS, '-o', 'json']), 'get pods')) as { items: Pod[] };
      for (const a of APPS) {
        const p = pods.items.find((x) => x.metadata.labels.app === a && x.status.podIP);
        if (!p) continue;
        const restarts = (p.status.containerStatuses ?? []).map((c) => `${c.name}:${c.restartCount}`).join(',');
        const key = `${p.metadata.uid} ${restarts}`;
        if (seenPods[a] && seenPods[a] !== key) changes.push(`${new Date().toISOString()} ${a}: ${seenPods[a]} -> ${key} (${p.metadata.name}, ${p.status.podIP})`);
        seenPods[a] = key;
        ips[a] = p.status.podIP!;
      }
      return pods.items;
    };
    await vi.waitFor(
      async () => {
        const pods = await readPods();
        for (const a of APPS) expect(pods.find((x) => x.metadata.labels.app === a)?.status.containerStatuses?.every((c) => c.ready), a).toBe(true);
      },
      { timeout: 240_000, interval: 1000 },
    );
    /** What the cluster knew, printed when a wait runs out. */
    const diagnose = async (what: string) => {
      const say = async (title: string, args: string[]) => {
        const r = await k.kubectl(args);
        console.log(`[rotation] --- ${what}: ${title} ---\n${r.stdout}${r.stderr}`);
      };
      console.log(`[rotation] pods replaced or restarted: ${changes.length ? changes.join('; ') : 'none'}`);
      await say('pods', ['get', 'pods', '-A', '-o', 'wide']);
      await say('events', ['get', 'events', '-A', '--sort-by=.lastTimestamp']);
      for (const a of APPS) await say(`${a} sidecar`, ['logs', '-n', NS, `deploy/${a}`, '-c', 'rt-sidecar', '--tail', '60']);
      await say('operator', ['logs', '-n', SYSTEM, 'deploy/rt-operator', '--tail', '80']);
    };
    /** vi.waitFor, with the cluster's state printed when it runs out. */
    const waitOr = async (what: string, check: () => Promise<void>, timeout: number) => {
      try {
        await vi.waitFor(check, { timeout, interval: 2000 });
      } catch (e) {
        await diagnose(what);
        throw e;
      }
    };

    // steady load: each app's sidecar calls the other app, one call after another, both ways
    const tally = { calls: 0, failed: [] as string[] };
    let running = true;
    const loop = async (from: string, to: string) => {
      while (running) {
        try {
          const r = await fetch(`http://${ips[from]}:3500/v1.0/invoke/${to}/method/ping`, { signal: AbortSignal.timeout(15_000) });
          const body = await r.text();
          if (r.status !== 200 || !body.includes(`"me":"${to}"`)) tally.failed.push(`${new Date().toISOString()} ${from}->${to}: ${r.status} ${body.slice(0, 300)}`);
        } catch (e) {
          tally.failed.push(`${new Date().toISOString()} ${from}->${to}: ${(e as Error).message}`);
        }
        tally.calls++;
        await new Promise((r) => setImmediate(r));
      }
    };
    const loops = [loop('front', 'back'), loop('back', 'front')];
    // a failed wait must not leave the loops spinning against a cluster that is being stopped
    onTestFinished(async () => {
      running = false;
      await Promise.all(loops);
    });
    const progress = (l: string) => console.log(`[rotation] ${l}: ${tally.calls} calls, ${tally.failed.length} failed`);

    /** Serials each sidecar presents from now on; resolves once each presented `n` new ones meeting `when`. */
    const renewals = async (n: number, what: string, when: (c: { issuer: string }) => boolean = () => true) => {
      const seen: Record<string, Set<string>> = {};
      for (const a of APPS) seen[a] = new Set([(await presented(ips[a]))?.serial ?? '']);
      const fresh: Record<string, number> = Object.fromEntries(APPS.map((a) => [a, 0]));
      await waitOr(
        what,
        async () => {
          await readPods();
          for (const a of APPS) {
            const c = await presented(ips[a]);
            if (c && !seen[a].has(c.serial)) {
              seen[a].add(c.serial);
              if (when(c)) fresh[a]++;
            }
          }
          for (const a of APPS) expect(fresh[a], `${what}: ${a}`).toBeGreaterThanOrEqual(n);
        },
        600_000,
      );
      progress(what);
    };

    // certificates renew on their own: three rotations of each sidecar's certificate
    await renewals(3, 'three renewals of 2-minute certificates');
    expect(tally.failed).toEqual([]);

    // the root rotation of docs/identity.md
    const secret = JSON.parse(await ok(k.kubectl(['get', 'secret', 'rt-identity-ca', '-n', SYSTEM, '-o', 'json']), 'get identity CA')) as { data: Record<string, string> };
    const oldRoot = Buffer.from(secret.data['tls.crt'], 'base64').toString();
    const fresh = await createRootCa({ commonName: 'rt rotated root', ttlMs: 30 * 24 * 3_600_000 });
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const both = file('both.pem', `${oldRoot.trim()}\n${fresh.certPem.trim()}\n`);
    const newCrt = file('new.crt', fresh.certPem);
    const newKey = file('new.key', fresh.keyPem);
    const upgrade = (sets: string[]) => ok(k.helm(['upgrade', 'rt', CHART, ...BASE, ...sets, '--wait', '--timeout', '4m']), 'helm upgrade');
    /** Until the operator's mounted Secret holds `pem` as `file` (the kubelet updates Secret volumes on its own schedule). */
    const operatorReads = (name: string, pem: string) =>
      waitOr(
        `the operator reads its new ${name}`,
        async () => {
          const got = await ok(k.kubectl(['exec', '-n', SYSTEM, 'deploy/rt-operator', '--', 'node', '-e', `process.stdout.write(require('fs').readFileSync('/var/run/rt/identity/${name}', 'utf8'))`]), 'read the operator\'s identity files');
          expect(got.trim()).toBe(pem.trim());
        },
        300_000,
      );
    const newIssuer = new X509Certificate(fresh.certPem).subject;

    // 1. trust both: once the operator reads the new bundle, each sidecar's next renewal brings it
    await upgrade(['--set-file', `identity.ca.trustBundlePEM=${both}`]);
    await operatorReads('ca.crt', `${oldRoot.trim()}\n${fresh.certPem.trim()}`);
    await renewals(1, 'step 1, both roots trusted');
    // 2. sign with the new root: every sidecar ends up presenting a certificate of it
    await upgrade(['--set-file', `identity.ca.certPEM=${newCrt}`, '--set-file', `identity.ca.keyPEM=${newKey}`, '--set-file', `identity.ca.trustBundlePEM=${both}`]);
    await renewals(1, 'step 2, signed by the new root', (c) => c.issuer === newIssuer);
    // 3. drop the old root: the sidecars go on renewing under the new root alone
    await upgrade(['--set-file', `identity.ca.certPEM=${newCrt}`, '--set-file', `identity.ca.keyPEM=${newKey}`]);
    await operatorReads('ca.crt', fresh.certPem);
    await renewals(1, 'step 3, the old root dropped', (c) => c.issuer === newIssuer);

    running = false;
    await Promise.all(loops);
    progress('done');
    console.log(`[rotation] pods replaced or restarted: ${changes.length ? changes.join('; ') : 'none'}`);
    expect(tally.calls).toBeGreaterThan(1000);
    expect(tally.failed).toEqual([]);
    expect(changes).toEqual([]);
    await ok(k.helm(['uninstall', 'rt', '--namespace', SYSTEM, '--wait', '--timeout', '2m']), 'helm uninstall');
  });
});
