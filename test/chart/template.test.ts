/**
 * The Helm chart, rendered by the real helm: `helm lint --strict`, every object of the default,
 * HA, minimal and loopback-cluster renders valid against the Kubernetes schema, the webhook and
 * RBAC as the issue asks, one CA signing both serving certificates, the workload-identity CA (its
 * own Secret, the scheduler signed by it, a user-supplied root and two-root bundle), and values.schema.json
 * refusing bad values before anything is rendered.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { issueFor } from '../../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CHART, find, helm, HOSTNETWORK_VALUES, LOCAL_VALUES, ROOT, template, validateObject, type K8sObject } from './render.ts';

interface PodTemplateOwner {
  spec: { replicas?: number; template: { spec: PodSpec }; volumeClaimTemplates?: unknown[] };
}
interface PodSpec {
  hostNetwork?: boolean;
  automountServiceAccountToken?: boolean;
  containers: Array<{ name: string; image: string; imagePullPolicy: string; args: string[]; env?: Array<{ name: string; value?: string }> }>;
  volumes?: Array<{ name: string; emptyDir?: object; secret?: { secretName: string } }>;
}
interface Webhook {
  name: string;
  sideEffects: string;
  reinvocationPolicy: string;
  failurePolicy: string;
  admissionReviewVersions: string[];
  clientConfig: { url?: string; service?: { name: string; namespace: string; path: string }; caBundle: string };
  namespaceSelector: { matchExpressions: Array<{ key: string; operator: string; values: string[] }>; matchLabels?: Record<string, string> };
  objectSelector: { matchExpressions: Array<{ key: string; operator: string; values: string[] }> };
  rules: Array<{ operations: string[]; resources: string[] }>;
}
interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

const pod = (objects: K8sObject[], kind: string, name: string) => find<PodTemplateOwner>(objects, kind, name).spec.template.spec;
const webhook = (objects: K8sObject[]) => find<{ webhooks: Webhook[] }>(objects, 'MutatingWebhookConfiguration', 'rt-injector').webhooks[0];
const rules = (objects: K8sObject[], name: string, kind = 'ClusterRole') => find<{ rules: Rule[] }>(objects, kind, name).rules;
const secretPem = (objects: K8sObject[], name: string, key: string) => Buffer.from(find<{ data: Record<string, string> }>(objects, 'Secret', name).data[key], 'base64').toString();
/** Every verb the role grants on one resource. */
const verbsOn = (rs: Rule[], group: string, resource: string) => rs.filter((r) => r.apiGroups.includes(group) && r.resources.includes(resource)).flatMap((r) => r.verbs).sort();

const HA = ['scheduler.replicas=3', 'scheduler.etcdEndpoints={etcd-0.etcd:2379,etcd-1.etcd:2379,etcd-2.etcd:2379}', 'placement.replicas=3', 'placement.etcdEndpoints={etcd-0.etcd:2379}', 'operator.watchdog.deleteUninjected=true', 'injector.webhook.failurePolicy=Fail', 'injector.replicas=2'];
const MINIMAL = ['crds.install=false', 'scheduler.enabled=false', 'placement.enabled=false', 'operator.tls=false', 'operator.metricsPort=0', 'identity.enabled=false'];

let renders: Record<'default' | 'ha' | 'minimal' | 'local' | 'loopback', K8sObject[]>;
beforeAll(async () => {
  const [d, ha, minimal, local, loopback] = await Promise.all([template(), template({ set: HA }), template({ set: MINIMAL }), template({ values: [LOCAL_VALUES] }), template({ values: [HOSTNETWORK_VALUES] })]);
  renders = { default: d, ha, minimal, local, loopback };
}, 60_000);

describe('the rt chart', () => {
  it('passes helm lint --strict with the default values, e2e/values-local.yaml and e2e/values-hostnetwork.yaml', async () => {
    for (const extra of [[], ['-f', LOCAL_VALUES], ['-f', HOSTNETWORK_VALUES]]) {
      const r = await helm(['lint', '--strict', CHART, ...extra]);
      expect(r.stdout + r.stderr, r.stdout + r.stderr).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
      expect(r.code).toBe(0);
    }
  });

  it('carries the repo crds/ unchanged (npm run chart:sync copies them)', () => {
    const yaml = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort();
    const repo = join(ROOT, 'crds');
    const chart = join(CHART, 'files', 'crds');
    expect(yaml(chart)).toEqual(yaml(repo));
    for (const f of yaml(repo)) expect(readFileSync(join(chart, f), 'utf8'), `charts/rt/files/crds/${f} differs from crds/${f}: run npm run chart:sync`).toBe(readFileSync(join(repo, f), 'utf8'));
  });

  it('renders only objects the Kubernetes schema accepts, for the default, HA, minimal and loopback values', async () => {
    for (const [name, objects] of Object.entries(renders)) {
      expect(objects.length, name).toBeGreaterThan(5);
      for (const o of objects) {
        try {
          await validateObject(o);
        } catch (e) {
          throw new Error(`${name}: ${o.kind}/${o.metadata.name}: ${(e as Error).message}`);
        }
      }
    }
    const kinds = (objects: K8sObject[]) => [...new Set(objects.map((o) => o.kind))].sort();
    expect(kinds(renders.default)).toEqual(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Deployment', 'MutatingWebhookConfiguration', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Secret', 'Service', 'ServiceAccount', 'StatefulSet']);
    expect(renders.default.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name).sort()).toEqual(['components.rt.io', 'configurations.rt.io', 'httpendpoints.rt.io', 'resiliencies.rt.io', 'subscriptions.rt.io']);
    expect(kinds(renders.minimal)).not.toContain('CustomResourceDefinition');
    expect(kinds(renders.minimal)).not.toContain('StatefulSet');
  });

  it('registers the injector as a mutating webhook for pod CREATE: sideEffects None, reinvocation IfNeeded, failurePolicy Ignore by default, never its own namespace', () => {
    const w = webhook(renders.default);
    expect(w).toMatchObject({ sideEffects: 'None', reinvocationPolicy: 'IfNeeded', failurePolicy: 'Ignore', admissionReviewVersions: ['v1'] });
    expect(w.rules).toEqual([expect.objectContaining({ operations: ['CREATE'], resources: ['pods'] })]);
    expect(w.clientConfig.service).toEqual({ name: 'rt-injector', namespace: 'rt-system', port: 443, path: '/mutate' });
    expect(w.namespaceSelector.matchExpressions).toContainEqual({ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'rt-system'] });
    expect(w.namespaceSelector.matchExpressions).toContainEqual({ key: 'rt.io/injection', operator: 'NotIn', values: ['disabled'] });
    expect(w.objectSelector.matchExpressions).toContainEqual({ key: 'rt.io/injection', operator: 'NotIn', values: ['disabled'] });
    expect(webhook(renders.ha).failurePolicy).toBe('Fail');
  });

  it('adds the user selectors to the webhook', async () => {
    const objects = await template({ set: ['injector.webhook.namespaceSelector.matchLabels.team=payments', 'injector.webhook.objectSelector.matchExpressions[0].key=tier', 'injector.webhook.objectSelector.matchExpressions[0].operator=In', 'injector.webhook.objectSelector.matchExpressions[0].values={web}'] });
    const w = webhook(objects);
    expect(w.namespaceSelector.matchLabels).toEqual({ team: 'payments' });
    expect(w.objectSelector.matchExpressions).toContainEqual({ key: 'tier', operator: 'In', values: ['web'] });
    expect(w.objectSelector.matchExpressions).toHaveLength(2);
  });

  it('signs both serving certificates with one CA, whose bundle the webhook carries, naming the Services (and loopback in the host-network values)', () => {
    for (const objects of [renders.default, renders.loopback]) {
      const caPem = secretPem(objects, 'rt-ca', 'tls.crt');
      const ca = new X509Certificate(caPem);
      expect(ca.ca).toBe(true);
      expect(Buffer.from(webhook(objects).clientConfig.caBundle, 'base64').toString()).toBe(caPem);
      for (const name of ['injector', 'operator']) {
        expect(secretPem(objects, `rt-${name}-tls`, 'ca.crt')).toBe(caPem);
        const cert = new X509Certificate(secretPem(objects, `rt-${name}-tls`, 'tls.crt'));
        expect(cert.verify(ca.publicKey)).toBe(true);
        expect(cert.checkHost(`rt-${name}.rt-system.svc`)).toBe(`rt-${name}.rt-system.svc`);
        expect(cert.checkHost(`rt-${name}.rt-system.svc.cluster.local`)).toBe(`rt-${name}.rt-system.svc.cluster.local`);
      }
    }
    expect(new X509Certificate(secretPem(renders.loopback, 'rt-injector-tls', 'tls.crt')).checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(new X509Certificate(secretPem(renders.loopback, 'rt-operator-tls', 'tls.crt')).checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(new X509Certificate(secretPem(renders.default, 'rt-injector-tls', 'tls.crt')).checkIP('127.0.0.1')).toBeUndefined();
  });

  it('grants least privilege: the operator reads rt.io, Secrets and Pods, writes Component status, reviews tokens, records Events, keeps headless Services, holds a Lease in its namespace, and deletes pods only with the watchdog on', () => {
    const op = rules(renders.default, 'rt-operator');
    for (const plural of ['components', 'configurations', 'subscriptions', 'httpendpoints', 'resiliencies']) expect(verbsOn(op, 'rt.io', plural)).toEqual(['get', 'list', 'watch']);
    expect(verbsOn(op, 'rt.io', 'components/status')).toEqual(['get', 'patch', 'update']);
    expect(verbsOn(op, '', 'secrets')).toEqual(['get', 'list', 'watch']);
    expect(verbsOn(op, '', 'pods')).toEqual(['get', 'list', 'watch']);
    expect(verbsOn(op, 'authentication.k8s.io', 'tokenreviews')).toEqual(['create']);
    expect(verbsOn(op, '', 'events')).toEqual(['create', 'patch']);
    expect(verbsOn(op, '', 'services')).toEqual(['create', 'delete', 'get', 'list', 'patch', 'watch']);
    expect(rules(renders.default, 'rt-operator', 'Role')).toEqual([{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'get', 'update'] }]);
    expect(verbsOn(rules(renders.ha, 'rt-operator'), '', 'pods')).toEqual(['delete', 'get', 'list', 'watch']);
    expect(rules(renders.default, 'rt-injector')).toEqual([{ apiGroups: ['rt.io'], resources: ['components'], verbs: ['get', 'list', 'watch'] }]);
    for (const objects of Object.values(renders)) {
      for (const role of objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')) {
        for (const r of (role as unknown as { rules: Rule[] }).rules) expect([...r.verbs, ...r.resources, ...r.apiGroups]).not.toContain('*');
      }
    }
    // the scheduler never calls the API: no token in its pod
    expect(pod(renders.default, 'StatefulSet', 'rt-scheduler').automountServiceAccountToken).toBe(false);
  });

  it('runs the scheduler on SQLite with one replica by default, on etcd with several', () => {
    const single = find<PodTemplateOwner>(renders.default, 'StatefulSet', 'rt-scheduler');
    expect(single.spec.replicas).toBe(1);
    expect(single.spec.volumeClaimTemplates).toHaveLength(1);
    expect(single.spec.template.spec.containers[0].args).toContain('--data-dir=/var/lib/rt/scheduler');
    const ha = find<PodTemplateOwner>(renders.ha, 'StatefulSet', 'rt-scheduler');
    expect(ha.spec.replicas).toBe(3);
    expect(ha.spec.volumeClaimTemplates).toBeUndefined();
    expect(ha.spec.template.spec.containers[0].args).toContain('--etcd-endpoints=etcd-0.etcd:2379,etcd-1.etcd:2379,etcd-2.etcd:2379');
    expect(ha.spec.template.spec.containers[0].args.some((a) => a.startsWith('--data-dir'))).toBe(false);
  });

  it('runs placement: one replica by default, several electing a leader on etcd; sidecars get every replica; mutual TLS with identity on', () => {
    const single = find<PodTemplateOwner>(renders.default, 'StatefulSet', 'rt-placement');
    expect(single.spec.replicas).toBe(1);
    const c = single.spec.template.spec.containers[0] as unknown as { args: string[]; readinessProbe: { httpGet: { path: string; port: number } }; livenessProbe: { httpGet: { path: string } } };
    expect(c.args).toEqual(expect.arrayContaining(['placement', '--port=50005', '--health-port=8085', '--heartbeat-timeout=3s', '--tls-cert-file=/var/run/rt/tls/tls.crt', '--identity-trust-bundle-file=/var/run/rt/tls/ca.crt']));
    expect(c.args.some((a) => a.startsWith('--etcd-endpoints'))).toBe(false);
    // every replica ready (a follower too), so a rollout does not wait on the election
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/healthz', port: 8085 });
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    expect(pod(renders.default, 'StatefulSet', 'rt-placement').automountServiceAccountToken).toBe(false);
    expect(pod(renders.default, 'StatefulSet', 'rt-placement').volumes).toContainEqual({ name: 'tls', secret: { secretName: 'rt-placement-tls' } });
    expect(find<{ spec: { clusterIP: string } }>(renders.default, 'Service', 'rt-placement').spec.clusterIP).toBe('None');
    // its serving certificate: the identity CA's, for every name a sidecar dials
    const cert = new X509Certificate(secretPem(renders.ha, 'rt-placement-tls', 'tls.crt'));
    for (const h of ['rt-placement-0.rt-placement.rt-system.svc.cluster.local', 'rt-placement-2.rt-placement.rt-system.svc.cluster.local', 'rt-placement.rt-system.svc']) expect(cert.checkHost(h)).toBe(h);
    const ha = find<PodTemplateOwner>(renders.ha, 'StatefulSet', 'rt-placement');
    expect(ha.spec.replicas).toBe(3);
    expect(ha.spec.template.spec.containers[0].args).toEqual(expect.arrayContaining(['--etcd-endpoints=etcd-0.etcd:2379', '--advertise-address=$(POD_NAME).rt-placement.rt-system.svc.cluster.local:50005']));
    expect(pod(renders.ha, 'Deployment', 'rt-injector').containers[0].args).toContain(
      '--placement-address=' + [0, 1, 2].map((i) => `rt-placement-${i}.rt-placement.rt-system.svc.cluster.local:50005`).join(','),
    );
    expect(renders.minimal.some((o) => o.metadata.name === 'rt-placement')).toBe(false);
    expect(pod(renders.minimal, 'Deployment', 'rt-injector').containers[0].args.some((a) => a.startsWith('--placement-address'))).toBe(false);
  });

  it('refuses several placement replicas without etcd', async () => {
    await expect(template({ set: ['placement.replicas=2'] })).rejects.toThrow(/placement\.replicas > 1 needs placement\.etcdEndpoints|etcdEndpoints/);
  });

  it('wires the operator TLS into the injector (which hands sidecars the CA) and leaves it out when operator.tls is off', () => {
    const injector = pod(renders.default, 'Deployment', 'rt-injector').containers[0];
    expect(injector.args).toContain('--operator-ca-file=/var/run/rt/tls/ca.crt');
    expect(injector.args).toContain('--control-plane-address=rt-operator.rt-system.svc.cluster.local:6500');
    // sidecars get every scheduler replica of the headless Service
    expect(injector.args).toContain('--scheduler-address=rt-scheduler-0.rt-scheduler.rt-system.svc.cluster.local:50006');
    expect(pod(renders.default, 'Deployment', 'rt-operator').containers[0].args).toContain('--tls-cert-file=/var/run/rt/tls/tls.crt');
    expect(pod(renders.minimal, 'Deployment', 'rt-operator').containers[0].args.some((a) => a.startsWith('--tls'))).toBe(false);
    expect(pod(renders.minimal, 'Deployment', 'rt-injector').containers[0].args.some((a) => a.startsWith('--operator-ca-file'))).toBe(false);
  });

  it('runs two injectors by default, with a PodDisruptionBudget for every control-plane workload of more than one replica', () => {
    const budgets = (objects: K8sObject[]) => objects.filter((o) => o.kind === 'PodDisruptionBudget').map((o) => [o.metadata.name, (o as unknown as { spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } } }).spec]);
    expect(find<PodTemplateOwner>(renders.default, 'Deployment', 'rt-injector').spec.replicas).toBe(2);
    expect(budgets(renders.default)).toEqual([['rt-injector', { maxUnavailable: 1, selector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': 'injector' }) } }]]);
    // HA: two injectors, three schedulers; one operator still has none
    expect(budgets(renders.ha).map(([n]) => n).sort()).toEqual(['rt-injector', 'rt-placement', 'rt-scheduler']);
    expect(budgets(renders.loopback)).toEqual([]);
  });

  it('keeps a deleted injector or operator pod serving for drainSeconds before SIGTERM (the kubelet\'s preStop sleep), none when 0', async () => {
    const preStop = (objects: K8sObject[], name: string) => (pod(objects, 'Deployment', name).containers[0] as unknown as { lifecycle?: { preStop?: unknown } }).lifecycle?.preStop;
    for (const name of ['rt-injector', 'rt-operator']) expect(preStop(renders.default, name)).toEqual({ sleep: { seconds: 5 } });
    const off = await template({ set: ['injector.drainSeconds=0', 'operator.drainSeconds=0'] });
    for (const name of ['rt-injector', 'rt-operator']) expect(preStop(off, name)).toBeUndefined();
  });

  it('probes the operator over HTTP: /readyz once it serves sidecars, /healthz while it answers', () => {
    const op = pod(renders.default, 'Deployment', 'rt-operator').containers[0] as unknown as { args: string[]; readinessProbe: { httpGet: { path: string; port: number } }; livenessProbe: { httpGet: { path: string; port: number } } };
    expect(op.args).toContain('--health-port=8089');
    expect(op.readinessProbe.httpGet).toMatchObject({ path: '/readyz', port: 8089 });
    expect(op.livenessProbe.httpGet).toMatchObject({ path: '/healthz', port: 8089 });
  });

  it('keeps the defaults for the project\'s cluster: e2e/values-local.yaml sets only the image and the scheduler\'s storage', () => {
    const values = parse(readFileSync(LOCAL_VALUES, 'utf8')) as Record<string, unknown>;
    expect(Object.keys(values).sort()).toEqual(['image', 'scheduler']);
    expect(values.scheduler).toEqual({ persistence: { enabled: false } });
    const local = renders.local;
    for (const [kind, name] of [['Deployment', 'rt-operator'], ['Deployment', 'rt-injector'], ['StatefulSet', 'rt-scheduler']]) {
      const spec = pod(local, kind, name);
      expect(spec.hostNetwork, name).toBeFalsy();
      expect(spec.containers[0]).toMatchObject({ image: 'rt:dev', imagePullPolicy: 'Never' });
    }
    // the API server calls the injector through its Service, and sidecars find the control plane by DNS
    expect(webhook(local).clientConfig.url).toBeUndefined();
    expect(webhook(local).clientConfig.service).toMatchObject({ name: 'rt-injector', namespace: 'rt-system' });
    const injector = pod(local, 'Deployment', 'rt-injector').containers[0];
    expect(injector.args).toContain('--control-plane-address=rt-operator.rt-system.svc.cluster.local:6500');
    expect(injector.env?.some((e) => e.name === 'KUBERNETES_SERVICE_HOST')).toBeFalsy();
  });

  it('makes e2e/values-hostnetwork.yaml fit a node without a pod network: rt:dev never pulled, host network, webhook by url, everything on 127.0.0.1', () => {
    const local = renders.loopback;
    for (const [kind, name] of [['Deployment', 'rt-operator'], ['Deployment', 'rt-injector'], ['StatefulSet', 'rt-scheduler']]) {
      const spec = pod(local, kind, name);
      expect(spec.hostNetwork, name).toBe(true);
      expect(spec.containers[0]).toMatchObject({ image: 'rt:dev', imagePullPolicy: 'Never' });
      expect(spec.containers[0].args).toContain('--listen-address=127.0.0.1');
      expect(spec.volumes?.every((v) => !('persistentVolumeClaim' in v))).toBe(true);
    }
    expect(find<PodTemplateOwner>(local, 'StatefulSet', 'rt-scheduler').spec.volumeClaimTemplates).toBeUndefined();
    expect(webhook(local).clientConfig).toMatchObject({ url: 'https://127.0.0.1:4443/mutate' });
    expect(webhook(local).clientConfig.service).toBeUndefined();
    const injector = pod(local, 'Deployment', 'rt-injector').containers[0];
    expect(injector.args).toContain('--control-plane-address=127.0.0.1:6500');
    expect(injector.args).toContain('--scheduler-address=127.0.0.1:50006');
    expect(injector.args).toContain('--placement-address=127.0.0.1:50005');
    expect(pod(local, 'StatefulSet', 'rt-placement').containers[0].args).toContain('--listen-address=127.0.0.1');
    expect(injector.args).toContain('--sidecar-image=rt:dev');
    expect(injector.env).toContainEqual({ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' });
  });

  it('makes a workload-identity CA of its own (not the serving CA), signs the scheduler for its Service and pod names with it, and gives sidecars its bundle', async () => {
    const objects = renders.default;
    const caPem = secretPem(objects, 'rt-identity-ca', 'tls.crt');
    const ca = new X509Certificate(caPem);
    expect(ca.ca).toBe(true);
    expect(caPem).not.toBe(secretPem(objects, 'rt-ca', 'tls.crt'));
    expect(secretPem(objects, 'rt-identity-ca', 'ca.crt')).toBe(caPem);
    // the scheduler's serving certificate: the identity CA's, for every name a sidecar dials
    const sched = new X509Certificate(secretPem(objects, 'rt-scheduler-tls', 'tls.crt'));
    expect(sched.verify(ca.publicKey)).toBe(true);
    expect(secretPem(objects, 'rt-scheduler-tls', 'ca.crt')).toBe(caPem);
    for (const host of ['rt-scheduler-0.rt-scheduler.rt-system.svc.cluster.local', 'rt-scheduler.rt-system.svc', 'rt-scheduler']) expect(sched.checkHost(host)).toBe(host);
    expect(new X509Certificate(secretPem(renders.ha, 'rt-scheduler-tls', 'tls.crt')).checkHost('rt-scheduler-2.rt-scheduler.rt-system.svc.cluster.local')).toBeDefined();
    expect(new X509Certificate(secretPem(renders.loopback, 'rt-scheduler-tls', 'tls.crt')).checkIP('127.0.0.1')).toBe('127.0.0.1');
    // helm's genCA key (RSA) signs workload certificates with the identity library
    const key = newWorkloadKey();
    const id = { trustDomain: 'cluster.local', namespace: 'shop', appId: 'orders' };
    const issued = await issueFor({ trustDomain: 'cluster.local', ca: { certPem: caPem, keyPem: secretPem(objects, 'rt-identity-ca', 'tls.key') }, trustBundlePem: caPem, ttlMs: 3_600_000 }, { namespace: 'shop', appId: 'orders' }, { id: 'orders', namespace: 'shop', trustDomain: 'cluster.local', csrPem: await createCsr(key, id) });
    expect(new X509Certificate(issued.certPem).verify(ca.publicKey)).toBe(true);

    const operator = pod(objects, 'Deployment', 'rt-operator');
    expect(operator.containers[0].args).toEqual(expect.arrayContaining(['--trust-domain=cluster.local', '--workload-cert-ttl=24h', '--identity-ca-cert-file=/var/run/rt/identity/tls.crt', '--identity-ca-key-file=/var/run/rt/identity/tls.key', '--identity-trust-bundle-file=/var/run/rt/identity/ca.crt']));
    expect(operator.volumes).toContainEqual({ name: 'identity', secret: { secretName: 'rt-identity-ca' } });
    const scheduler = pod(objects, 'StatefulSet', 'rt-scheduler');
    expect(scheduler.containers[0].args).toEqual(expect.arrayContaining(['--tls-cert-file=/var/run/rt/tls/tls.crt', '--tls-key-file=/var/run/rt/tls/tls.key', '--identity-trust-bundle-file=/var/run/rt/tls/ca.crt']));
    expect(scheduler.volumes).toContainEqual({ name: 'tls', secret: { secretName: 'rt-scheduler-tls' } });
    const injector = pod(objects, 'Deployment', 'rt-injector');
    expect(injector.containers[0].args).toEqual(expect.arrayContaining(['--mtls=true', '--trust-domain=cluster.local', '--trust-anchors-file=/var/run/rt/identity/ca.crt']));
    // the injector sees the bundle, never the key
    expect(injector.volumes).toContainEqual({ name: 'identity', secret: { secretName: 'rt-identity-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] } });
    const annotations = find<{ spec: { template: { metadata: { annotations?: Record<string, string> } } } }>(objects, 'Deployment', 'rt-injector').spec.template.metadata.annotations;
    expect(annotations?.['rt.io/trust-bundle-sha256']).toMatch(/^[0-9a-f]{64}$/);

    // off: none of it
    const off = await template({ set: ['identity.enabled=false'] });
    expect(off.some((o) => o.metadata.name === 'rt-identity-ca' || o.metadata.name === 'rt-scheduler-tls')).toBe(false);
    expect(pod(off, 'Deployment', 'rt-injector').containers[0].args.some((a) => a.startsWith('--mtls'))).toBe(false);
    expect(pod(off, 'StatefulSet', 'rt-scheduler').containers[0].args.some((a) => a.startsWith('--tls') || a.startsWith('--identity'))).toBe(false);
  });

  it('takes a user-supplied signing CA and a two-root trust bundle (root rotation), signing the scheduler with that CA', async () => {
    const [oldRoot, newRoot] = await Promise.all([createRootCa({ ttlMs: 3_600_000, commonName: 'old' }), createRootCa({ ttlMs: 3_600_000, commonName: 'new' })]);
    const dir = mkdtempSync(join(tmpdir(), 'rt-chart-identity-'));
    try {
      const file = join(dir, 'values.yaml');
      writeFileSync(file, stringify({ identity: { trustDomain: 'example.org', workloadCertTTL: '2m', ca: { certPEM: newRoot.certPem, keyPEM: newRoot.keyPem, trustBundlePEM: oldRoot.certPem + newRoot.certPem } } }));
      const objects = await template({ values: [file] });
      expect(secretPem(objects, 'rt-identity-ca', 'tls.crt')).toBe(newRoot.certPem);
      expect(secretPem(objects, 'rt-identity-ca', 'tls.key')).toBe(newRoot.keyPem);
      expect(secretPem(objects, 'rt-identity-ca', 'ca.crt')).toBe(oldRoot.certPem + newRoot.certPem);
      expect(secretPem(objects, 'rt-scheduler-tls', 'ca.crt')).toBe(oldRoot.certPem + newRoot.certPem);
      expect(new X509Certificate(secretPem(objects, 'rt-scheduler-tls', 'tls.crt')).verify(new X509Certificate(newRoot.certPem).publicKey)).toBe(true);
      expect(pod(objects, 'Deployment', 'rt-operator').containers[0].args).toEqual(expect.arrayContaining(['--trust-domain=example.org', '--workload-cert-ttl=2m']));
      for (const o of objects) await validateObject(o);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ['an unknown key', 'operatr.replicas=2', /additional properties 'operatr' not allowed/],
    ['a failurePolicy other than Ignore or Fail', 'injector.webhook.failurePolicy=Sometimes', /failurePolicy.*one of 'Ignore', 'Fail'/],
    ['a port out of range', 'operator.grpcPort=70000', /grpcPort.*maximum/],
    ['a pull policy helm does not know', 'image.pullPolicy=Sometimes', /pullPolicy/],
    ['a webhook url that is not https', 'injector.webhook.url=http://127.0.0.1:4443/mutate', /url.*does not match pattern/],
    ['an IP that is not one', 'certificates.extraIPs={not-an-ip}', /extraIPs\/0/],
    ['several SQLite schedulers', 'scheduler.replicas=2', /etcdEndpoints.*minItems/],
    ['a log level rt does not have', 'logLevel=verbose', /logLevel/],
    ['a trust domain that is not a SPIFFE one', 'identity.trustDomain=Example.COM', /trustDomain.*does not match pattern/],
    ['a certificate TTL that is no duration', 'identity.workloadCertTTL=tomorrow', /workloadCertTTL.*does not match pattern/],
    ['an identity key the chart does not have', 'identity.rootCA=x', /additional properties 'rootCA' not allowed/],
    ['identity without operator TLS', 'operator.tls=false', /identity\.enabled needs operator\.tls/],
    ['a signing certificate without its key', 'identity.ca.certPEM=-----BEGIN CERTIFICATE-----', /identity\.ca\.certPEM and identity\.ca\.keyPEM go together/],
  ])('refuses %s before rendering (values.schema.json)', async (_what, set, message) => {
    const r = await helm(['template', 'rt', CHART, '--set', set]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });
});
