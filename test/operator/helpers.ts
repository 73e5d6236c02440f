/**
 * The operator's suites: one real kube-apiserver with the CRDs, an `rt operator` (in-process, TLS
 * from a test CA) and sidecar identities made the way a pod gets them — a ServiceAccount, a Pod
 * annotated with its app id, and `kubectl create token --audience rt.io/operator
 * --bound-object-kind Pod`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { stringify } from 'yaml';
import { Operator } from '../../operator/src/operator.ts';
import type { IssuerOptions } from '../../operator/src/issuer.ts';
import { operatorClient, type ResourceSnapshot } from '../../operator/src/proto.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { startKube, type KubeCluster } from '../services/kube.ts';
import { startProcess } from '../services/kube/processes.ts';

export const CRDS = join(import.meta.dirname, '../../crds');

/**
 * One of the ecosystem's dapr.io CRDs as a cluster that once ran the reference runtime may have it:
 * a loose schema (unknown fields kept) and no conversion; the first version is stored.
 */
const daprCrd = (kind: string, plural: string, versions: string[]) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.dapr.io` },
  spec: {
    group: 'dapr.io',
    scope: 'Namespaced',
    names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
    versions: versions.map((name, i) => ({ name, served: true, storage: i === 0, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } })),
  },
});
const DAPR_COMPONENT_CRD = daprCrd('Component', 'components', ['v1alpha1']);
/** v1alpha1 (route) and v2alpha1 (routes) both served. */
const DAPR_SUBSCRIPTION_CRD = daprCrd('Subscription', 'subscriptions', ['v2alpha1', 'v1alpha1']);

export interface OperatorBed {
  kube: KubeCluster;
  ca: TestCa;
  dir: string;
  operator: Operator;
  port: number;
  kubectl(args: string[], input?: string): Promise<string>;
  apply(...objects: object[]): Promise<void>;
  /** A namespace with its default service account (no controller manager makes it here). */
  namespace(name: string): Promise<void>;
  /** A ServiceAccount + Pod with rt.io/app-id, and a token bound to that pod; returns the token file. */
  identity(ns: string, pod: string, appId: string, opts?: { audience?: string }): Promise<string>;
  /** With `issuer`: the files the operator's issuer reads (rewrite them to rotate). */
  issuerFiles: { caCertFile: string; caKeyFile: string; trustBundleFile: string };
  stop(): Promise<void>;
}

export interface BedIssuer {
  caCertPem: string;
  caKeyPem: string;
  /** Default: the CA certificate. */
  trustBundlePem?: string;
  ttlMs?: number;
}

export async function startOperatorBed(opts: { watchdogDeleteUninjected?: boolean; issuer?: BedIssuer } = {}): Promise<OperatorBed> {
  const kube = await startKube({ controllers: false });
  const ca = makeTestCa();
  const dir = mkdtempSync(join(tmpdir(), 'rt-operator-'));
  let operator: Operator | undefined;
  const stop = async () => {
    await operator?.close().catch(() => undefined);
    await kube.stop();
    ca.remove();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const kubectl = async (args: string[], input?: string) => {
      const r = await kube.kubectl(args, { input });
      if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    await kubectl(['apply', '-f', CRDS]);
    await kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.rt.io', 'crd/configurations.rt.io', 'crd/subscriptions.rt.io', 'crd/httpendpoints.rt.io']);
    // the ecosystem's Component CRD as clusters that ran it have it (loose schema), so dapr.io objects exist too
    await kubectl(['apply', '-f', '-'], `${stringify(DAPR_COMPONENT_CRD)}---\n${stringify(DAPR_SUBSCRIPTION_CRD)}`);
    await kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.dapr.io', 'crd/subscriptions.dapr.io']);
    writeFileSync(join(dir, 'tls.crt'), ca.cert);
    writeFileSync(join(dir, 'tls.key'), ca.key);
    const issuerFiles = { caCertFile: join(dir, 'identity-ca.crt'), caKeyFile: join(dir, 'identity-ca.key'), trustBundleFile: join(dir, 'trust-bundle.pem') };
    let issuer: IssuerOptions | undefined;
    if (opts.issuer) {
      writeFileSync(issuerFiles.caCertFile, opts.issuer.caCertPem);
      writeFileSync(issuerFiles.caKeyFile, opts.issuer.caKeyPem);
      writeFileSync(issuerFiles.trustBundleFile, opts.issuer.trustBundlePem ?? opts.issuer.caCertPem);
      issuer = { trustDomain: 'cluster.local', ...issuerFiles, ttlMs: opts.issuer.ttlMs ?? 3_600_000 };
    }
    operator = new Operator({
      kubeconfig: kube.kubeconfig,
      grpcPort: 0,
      listenAddress: '127.0.0.1',
      tlsCertFile: join(dir, 'tls.crt'),
      tlsKeyFile: join(dir, 'tls.key'),
      watchdogDeleteUninjected: opts.watchdogDeleteUninjected,
      watchdogDeleteIntervalMs: 200,
      issuer,
      clientTrustBundleFile: issuer?.trustBundleFile,
      log: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }),
    });
    const port = await operator.start();
    const bed: OperatorBed = {
      kube,
      ca,
      dir,
      operator,
      port,
      kubectl,
      issuerFiles,
      apply: async (...objects) => void (await kubectl(['apply', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'))),
      namespace: async (name) => {
        await kubectl(['create', 'namespace', name]);
        // the service-account controller is not running here: pods need their default account made
        await kubectl(['create', 'serviceaccount', 'default', '-n', name]);
      },
      identity: async (ns, pod, appId, o = {}) => {
        await bed.apply(
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: pod, namespace: ns } },
          {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: pod, namespace: ns, annotations: { 'rt.io/app-id': appId } },
            spec: { serviceAccountName: pod, automountServiceAccountToken: false, containers: [{ name: 'app', image: 'app:1' }] },
          },
        );
        const token = (await kubectl(['create', 'token', pod, '-n', ns, '--audience', o.audience ?? 'rt.io/operator', '--bound-object-kind', 'Pod', '--bound-object-name', pod])).trim();
        const file = join(dir, `${ns}-${pod}.token`);
        writeFileSync(file, token);
        return file;
      },
      stop,
    };
    return bed;
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * Stops the kube-apiserver and starts it again with the same flags (etcd keeps the data);
 * `whileDown` runs in between. Resolves when it is ready again.
 */
export async function restartApiServer(bed: OperatorBed, whileDown: () => Promise<void> = async () => {}): Promise<void> {
  const cp = bed.kube.controlPlane;
  const i = cp.processes.findIndex((p) => p.name === 'kube-apiserver');
  const old = cp.processes[i];
  const [cmd, ...args] = old.proc.spawnargs;
  await old.stop();
  await whileDown();
  cp.processes[i] = startProcess(cp.dir, 'kube-apiserver', cmd, args);
  for (const deadline = Date.now() + 90_000; ; ) {
    if ((await bed.kube.request('GET', '/readyz').catch(() => ({ status: 0 }))).status === 200) return;
    if (Date.now() > deadline) throw new Error('the kube-apiserver did not come back within 90 s');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A WatchResources call as a sidecar makes it: TLS with the test CA, the token as a bearer (or a workload certificate). */
export function watchAs(bed: OperatorBed, token: string, req: { namespace?: string; appId?: string } = {}, clientCert?: { keyPem: string; certPem: string }) {
  const creds = clientCert
    ? grpc.credentials.createSsl(Buffer.from(bed.ca.caPem), Buffer.from(clientCert.keyPem), Buffer.from(clientCert.certPem))
    : grpc.credentials.createSsl(Buffer.from(bed.ca.caPem));
  const client = operatorClient(`127.0.0.1:${bed.port}`, creds);
  const md = new grpc.Metadata();
  if (token) md.set('authorization', `Bearer ${token}`);
  const call = client.WatchResources({ namespace: req.namespace ?? '', appId: req.appId ?? '', podName: '' }, md);
  const snapshots: ResourceSnapshot[] = [];
  let error: grpc.ServiceError | undefined;
  call.on('data', (s: ResourceSnapshot) => snapshots.push(s));
  call.on('error', (e: grpc.ServiceError) => (error = e));
  return {
    snapshots,
    error: () => error,
    /** The objects of the latest snapshot, by kind/name. */
    latest(): Map<string, Record<string, unknown>> {
      const s = snapshots.at(-1);
      return new Map((s?.resources ?? []).map((r) => [`${r.kind}/${r.name}`, JSON.parse(Buffer.from(r.json).toString('utf8')) as Record<string, unknown>]));
    },
    close() {
      call.cancel();
      client.close();
    },
  };
}

/** A Component object as `kubectl apply` takes it. */
export const component = (ns: string, name: string, type: string, metadata: object[], extra: object = {}) => ({
  apiVersion: 'rt.io/v1alpha1',
  kind: 'Component',
  metadata: { name, namespace: ns },
  spec: { type, version: 'v1', metadata },
  ...extra,
});
