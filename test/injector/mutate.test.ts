/**
 * The injection, table-driven: one case per annotation, both pluggable modes, scoping, native
 * and classic start order. Every patch is applied with fast-json-patch and the result validated
 * with kubernetes-models (see fixtures.ts).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { annotationNames } from '../../injector/src/annotations.ts';
import type { Container, Pod } from '../../injector/src/pod.ts';
import { admit, arg, component, envOf, pod, sidecarOf } from './fixtures.ts';

interface AnnotationCase {
  name: string;
  annotations: Record<string, string>;
  check(sidecar: Container, p: Pod): void;
}

const cases: AnnotationCase[] = [
  { name: 'app-id', annotations: { 'rt.io/app-id': 'orders' }, check: (s, p) => {
    expect(arg(s, 'app-id')).toBe('orders');
    expect(p.metadata?.annotations?.['rt.io/app-id']).toBe('orders');
    // the operator's headless Service selects by this label
    expect(p.metadata?.labels?.['rt.io/app-id']).toBe('orders');
  } },
  { name: 'app-id defaults to the generate-name prefix', annotations: {}, check: (s, p) => {
    expect(arg(s, 'app-id')).toBe('web');
    expect(p.metadata?.annotations?.['rt.io/app-id']).toBe('web');
  } },
  { name: 'app-port', annotations: { 'rt.io/app-port': '8080' }, check: (s) => expect(arg(s, 'app-port')).toBe('8080') },
  { name: 'app-protocol', annotations: { 'rt.io/app-protocol': 'grpc' }, check: (s) => expect(arg(s, 'app-protocol')).toBe('grpc') },
  { name: 'app-max-concurrency', annotations: { 'rt.io/app-max-concurrency': '4' }, check: (s) => expect(arg(s, 'app-max-concurrency')).toBe('4') },
  { name: 'config', annotations: { 'rt.io/config': 'tracing' }, check: (s) => expect(arg(s, 'config')).toBe('tracing') },
  { name: 'log-level', annotations: { 'rt.io/log-level': 'debug' }, check: (s) => expect(arg(s, 'log-level')).toBe('debug') },
  { name: 'api-token-secret', annotations: { 'rt.io/api-token-secret': 'api-tok' }, check: (s, p) => {
    expect(envOf(s, 'RT_API_TOKEN')?.valueFrom?.secretKeyRef).toEqual({ name: 'api-tok', key: 'token' });
    const app = p.spec.containers.find((c) => c.name === 'app')!;
    expect(envOf(app, 'RT_API_TOKEN')?.valueFrom?.secretKeyRef?.name).toBe('api-tok');
    expect(envOf(app, 'DAPR_API_TOKEN')?.valueFrom?.secretKeyRef?.name).toBe('api-tok');
  } },
  { name: 'app-token-secret', annotations: { 'rt.io/app-token-secret': 'app-tok' }, check: (s, p) => {
    expect(envOf(s, 'RT_APP_API_TOKEN')?.valueFrom?.secretKeyRef).toEqual({ name: 'app-tok', key: 'token' });
    expect(envOf(p.spec.containers[0], 'APP_API_TOKEN')?.valueFrom?.secretKeyRef?.name).toBe('app-tok');
  } },
  { name: 'enable-metrics false', annotations: { 'rt.io/enable-metrics': 'false' }, check: (s) => {
    expect(arg(s, 'disable-metrics')).toBe('');
    expect(s.ports?.map((x) => x.name)).toEqual(['rt-http', 'rt-grpc']);
  } },
  { name: 'metrics-port', annotations: { 'rt.io/metrics-port': '9999' }, check: (s) => {
    expect(arg(s, 'metrics-port')).toBe('9999');
    expect(s.ports?.find((x) => x.name === 'rt-metrics')?.containerPort).toBe(9999);
  } },
  { name: 'sidecar-metrics-port', annotations: { 'rt.io/sidecar-metrics-port': '19090' }, check: (s) => expect(arg(s, 'metrics-port')).toBe('19090') },
  { name: 'sidecar-http-port and sidecar-grpc-port', annotations: { 'rt.io/sidecar-http-port': '13500', 'rt.io/sidecar-grpc-port': '15001' }, check: (s, p) => {
    expect(arg(s, 'http-port')).toBe('13500');
    expect(arg(s, 'grpc-port')).toBe('15001');
    expect(s.readinessProbe?.httpGet?.port).toBe(13500);
    expect(s.ports?.map((x) => x.containerPort)).toEqual([13500, 15001, 9090]);
    expect(envOf(p.spec.containers[0], 'RT_HTTP_PORT')?.value).toBe('13500');
    expect(envOf(p.spec.containers[0], 'DAPR_GRPC_PORT')?.value).toBe('15001');
  } },
  { name: 'app health check settings', annotations: {
    'rt.io/enable-app-health-check': 'true', 'rt.io/app-health-check-path': '/ready', 'rt.io/app-health-probe-interval': '3s',
    'rt.io/app-health-probe-timeout': '250ms', 'rt.io/app-health-threshold': '5' }, check: (s) => {
    expect(arg(s, 'enable-app-health-check')).toBe('');
    expect(arg(s, 'app-health-check-path')).toBe('/ready');
    expect(arg(s, 'app-health-probe-interval')).toBe('3s');
    expect(arg(s, 'app-health-probe-timeout')).toBe('250ms');
    expect(arg(s, 'app-health-threshold')).toBe('5');
  } },
  { name: 'sidecar resources', annotations: { 'rt.io/sidecar-cpu-request': '100m', 'rt.io/sidecar-cpu-limit': '1', 'rt.io/sidecar-memory-request': '64Mi', 'rt.io/sidecar-memory-limit': '256Mi' }, check: (s) => {
    expect(s.resources).toEqual({ requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } });
  } },
  { name: 'liveness and readiness probe settings', annotations: {
    'rt.io/sidecar-liveness-probe-delay-seconds': '7', 'rt.io/sidecar-liveness-probe-timeout-seconds': '2', 'rt.io/sidecar-liveness-probe-period-seconds': '9', 'rt.io/sidecar-liveness-probe-threshold': '4',
    'rt.io/sidecar-readiness-probe-delay-seconds': '1', 'rt.io/sidecar-readiness-probe-timeout-seconds': '5', 'rt.io/sidecar-readiness-probe-period-seconds': '2', 'rt.io/sidecar-readiness-probe-threshold': '8' }, check: (s) => {
    expect(s.livenessProbe).toMatchObject({ httpGet: { path: '/v1.0/healthz', port: 3500 }, initialDelaySeconds: 7, timeoutSeconds: 2, periodSeconds: 9, failureThreshold: 4 });
    expect(s.readinessProbe).toMatchObject({ httpGet: { path: '/v1.0/healthz' }, initialDelaySeconds: 1, timeoutSeconds: 5, periodSeconds: 2, failureThreshold: 8 });
  } },
  { name: 'env', annotations: { 'rt.io/env': 'GOMAXPROCS=2, OTEL_SERVICE=a=b' }, check: (s) => {
    expect(envOf(s, 'GOMAXPROCS')?.value).toBe('2');
    expect(envOf(s, 'OTEL_SERVICE')?.value).toBe('a=b');
  } },
  { name: 'sidecar-image', annotations: { 'rt.io/sidecar-image': 'registry.local/rt:2' }, check: (s) => expect(s.image).toBe('registry.local/rt:2') },
];

describe('injector: one case per annotation (patch applied, Pod validated)', () => {
  it.each(cases)('$name', ({ annotations, check }) => {
    const a = admit(pod(annotations));
    expect(a.allowed, a.message).toBe(true);
    check(sidecarOf(a.pod), a.pod);
  });

  it('labels the pod rt.io/app-id when the app id is a label value, and warns when it is not', () => {
    // the annotation takes up to 64 characters, a label 63; a default app id comes from generateName, up to 253
    const long = 'a'.repeat(64);
    const named = `web.${'b'.repeat(70)}`;
    for (const [p, id] of [[pod({ 'rt.io/app-id': long }), long], [pod({}, { generateName: `${named}-` }), named]] as const) {
      const a = admit(p);
      expect(a.pod.metadata?.labels?.['rt.io/app-id']).toBeUndefined();
      expect(a.warnings.join('\n')).toContain(`app id "${id}" cannot be a label value`);
    }
    for (const id of ['a', 'My_App.v2', 'x'.repeat(63)]) expect(admit(pod({ 'rt.io/app-id': id })).pod.metadata?.labels?.['rt.io/app-id']).toBe(id);
    // the user's own labels stay
    expect(admit(pod({}, { labels: { tier: 'web' } })).pod.metadata?.labels).toMatchObject({ tier: 'web', 'rt.io/app-id': 'web' });
  });

  it('dapr.io/* aliases are read when rt.io/* is absent', () => {
    const p = pod({ 'dapr.io/app-id': 'legacy', 'dapr.io/app-port': '3000' });
    delete p.metadata!.annotations!['rt.io/enabled'];
    p.metadata!.annotations!['dapr.io/enabled'] = 'true';
    const s = sidecarOf(admit(p).pod);
    expect(arg(s, 'app-id')).toBe('legacy');
    expect(arg(s, 'app-port')).toBe('3000');
  });

  it('rt.io/* wins over a different dapr.io/* value, with a warning', () => {
    const a = admit(pod({ 'rt.io/app-id': 'new', 'dapr.io/app-id': 'old' }));
    expect(arg(sidecarOf(a.pod), 'app-id')).toBe('new');
    expect(a.warnings.join('\n')).toContain('dapr.io/app-id is ignored');
  });

  it('every annotation of the table is documented in docs/injector.md', () => {
    const doc = readFileSync(new URL('../../docs/injector.md', import.meta.url), 'utf8');
    for (const name of annotationNames()) expect(doc, name).toContain(`\`${name}\``);
  });
});

describe('injector: the sidecar container', () => {
  it('runs rt sidecar --mode kubernetes with its identity, ports and probes', () => {
    const a = admit(pod({ 'rt.io/app-port': '8080' }));
    const s = sidecarOf(a.pod);
    expect(s.image).toBe('rt:test');
    expect(s.args?.slice(0, 3)).toEqual(['sidecar', '--mode', 'kubernetes']);
    expect(arg(s, 'control-plane-address')).toBe('rt-operator.rt-system.svc:6500');
    expect(envOf(s, 'NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    expect(envOf(s, 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(envOf(s, 'POD_IP')?.valueFrom?.fieldRef?.fieldPath).toBe('status.podIP');
    expect(envOf(s, 'RT_CONTROL_PLANE_ADDRESS')?.value).toBe('rt-operator.rt-system.svc:6500');
    expect(envOf(s, 'RT_OPERATOR_TOKEN_FILE')?.value).toBe('/var/run/secrets/rt.io/token');
    expect(s.volumeMounts).toContainEqual({ name: 'rt-identity-token', mountPath: '/var/run/secrets/rt.io', readOnly: true });
    const vol = a.pod.spec.volumes?.find((v) => v.name === 'rt-identity-token');
    expect(vol?.projected?.sources?.[0]?.serviceAccountToken).toMatchObject({ audience: 'rt.io/operator', path: 'token' });
    expect(s.ports?.map((p) => [p.name, p.containerPort])).toEqual([['rt-http', 3500], ['rt-grpc', 50001], ['rt-metrics', 9090]]);
    expect(s.readinessProbe?.httpGet?.path).toBe('/v1.0/healthz');
    expect(s.livenessProbe?.httpGet?.path).toBe('/v1.0/healthz');
  });

  it('hands the operator CA to the sidecar as a file (pod annotation → downward API) when the injector has one', () => {
    const pem = '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n';
    const p = admit(pod(), { settings: { operatorCaPem: pem } }).pod;
    expect(envOf(sidecarOf(p), 'RT_OPERATOR_CA_FILE')?.value).toBe('/var/run/secrets/rt.io/ca.crt');
    expect(p.metadata?.annotations?.['rt.io/operator-ca']).toBe(pem);
    const sources = p.spec.volumes?.find((v) => v.name === 'rt-identity-token')?.projected?.sources;
    expect(sources?.[1]?.downwardAPI?.items).toEqual([{ path: 'ca.crt', fieldRef: { fieldPath: "metadata.annotations['rt.io/operator-ca']" } }]);
    // without one, the sidecar gets no CA setting
    expect(envOf(sidecarOf(admit(pod()).pod), 'RT_OPERATOR_CA_FILE')).toBeUndefined();
  });

  it('with identity on, gives the sidecar mutual TLS, the trust domain, the issuer and the trust anchors (annotation → downward API), the scheduler CA too', () => {
    const anchors = '-----BEGIN CERTIFICATE-----\nroot1\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nroot2\n-----END CERTIFICATE-----\n';
    const identity = { trustDomain: 'example.org', issuerAddress: 'rt-operator.rt-system.svc:6500', trustAnchorsPem: anchors };
    const a = admit(pod(), { settings: { identity, schedulerAddress: 'rt-scheduler-0.rt-scheduler.rt-system.svc.cluster.local:50006' } });
    const s = sidecarOf(a.pod);
    expect(Object.fromEntries(['RT_MTLS_ENABLED', 'RT_TRUST_DOMAIN', 'RT_IDENTITY_ISSUER_ADDRESS', 'RT_TRUST_ANCHORS_FILE', 'RT_SCHEDULER_TLS_CA_FILE', 'RT_OPERATOR_TOKEN_FILE'].map((n) => [n, envOf(s, n)?.value]))).toEqual({
      RT_MTLS_ENABLED: 'true',
      RT_TRUST_DOMAIN: 'example.org',
      RT_IDENTITY_ISSUER_ADDRESS: 'rt-operator.rt-system.svc:6500',
      RT_TRUST_ANCHORS_FILE: '/var/run/secrets/rt.io/trust-anchors.pem',
      RT_SCHEDULER_TLS_CA_FILE: '/var/run/secrets/rt.io/trust-anchors.pem',
      RT_OPERATOR_TOKEN_FILE: '/var/run/secrets/rt.io/token',
    });
    expect(a.pod.metadata?.annotations?.['rt.io/trust-anchors']).toBe(anchors);
    const sources = a.pod.spec.volumes?.find((v) => v.name === 'rt-identity-token')?.projected?.sources ?? [];
    expect(sources.flatMap((x) => x.downwardAPI?.items ?? [])).toContainEqual({ path: 'trust-anchors.pem', fieldRef: { fieldPath: "metadata.annotations['rt.io/trust-anchors']" } });
    // no scheduler: no scheduler CA
    expect(envOf(sidecarOf(admit(pod(), { settings: { identity } }).pod), 'RT_SCHEDULER_TLS_CA_FILE')).toBeUndefined();
    // identity off: none of it
    const off = admit(pod()).pod;
    expect(envOf(sidecarOf(off), 'RT_MTLS_ENABLED')).toBeUndefined();
    expect(off.metadata?.annotations?.['rt.io/trust-anchors']).toBeUndefined();
  });

  it('where the cluster serves PodCertificateRequests, projects a podCertificate for rt.io/workload into the sidecar\'s volume and points it at the bundle; rt.io/pod-certificate "false" keeps the issuer path', () => {
    const base = { trustDomain: 'cluster.local', issuerAddress: 'op:6500', trustAnchorsPem: '-----BEGIN CERTIFICATE-----\nr\n-----END CERTIFICATE-----\n' };
    const podCertificateOf = (p: ReturnType<typeof admit>['pod']) =>
      (p.spec.volumes?.find((v) => v.name === 'rt-identity-token')?.projected?.sources ?? []).map((x) => (x as { podCertificate?: unknown }).podCertificate).filter(Boolean);
    const a = admit(pod(), { settings: { identity: { ...base, podCertificates: true } } });
    expect(podCertificateOf(a.pod)).toEqual([{ signerName: 'rt.io/workload', keyType: 'ECDSAP256', maxExpirationSeconds: 86400, credentialBundlePath: 'workload-credentials.pem' }]);
    expect(envOf(sidecarOf(a.pod), 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE')?.value).toBe('/var/run/secrets/rt.io/workload-credentials.pem');
    const optedOut = admit(pod({ 'rt.io/pod-certificate': 'false' }), { settings: { identity: { ...base, podCertificates: true } } });
    expect(podCertificateOf(optedOut.pod)).toEqual([]);
    expect(envOf(sidecarOf(optedOut.pod), 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE')).toBeUndefined();
    // not served: the issuer path, and a pod that asks for the kubelet's is told why not
    const notServed = admit(pod({ 'rt.io/pod-certificate': 'true' }), { settings: { identity: base } });
    expect(podCertificateOf(notServed.pod)).toEqual([]);
    expect(notServed.warnings.join('\n')).toMatch(/pod-certificate: "true" has no effect/);
    // a pod cannot point the sidecar at a bundle of its own
    const forged = admit(pod({ 'rt.io/env': 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE=/tmp/mine.pem' }), { settings: { identity: base } });
    expect(envOf(sidecarOf(forged.pod), 'RT_IDENTITY_CREDENTIAL_BUNDLE_FILE')).toBeUndefined();
  });

  it('lets a pod neither turn mutual TLS off (rt.io/mtls, rt.io/env) when the platform turned it on, nor on when it did not; each with a warning', () => {
    const identity = { trustDomain: 'cluster.local', issuerAddress: 'op:6500', trustAnchorsPem: '-----BEGIN CERTIFICATE-----\nr\n-----END CERTIFICATE-----\n' };
    const a = admit(pod({ 'rt.io/mtls': 'false', 'rt.io/env': 'RT_MTLS_ENABLED=false,RT_TRUST_ANCHORS_FILE=/tmp/mine.pem,OTHER=1' }), { settings: { identity } });
    const s = sidecarOf(a.pod);
    expect(envOf(s, 'RT_MTLS_ENABLED')?.value).toBe('true');
    expect(envOf(s, 'RT_TRUST_ANCHORS_FILE')?.value).toBe('/var/run/secrets/rt.io/trust-anchors.pem');
    expect(envOf(s, 'OTHER')?.value).toBe('1');
    expect(a.warnings.join('\n')).toMatch(/rt\.io\/mtls: "false" is ignored/);
    expect(a.warnings.join('\n')).toMatch(/rt\.io\/env: RT_MTLS_ENABLED, RT_TRUST_ANCHORS_FILE ignored/);
    const b = admit(pod({ 'rt.io/mtls': 'true' }));
    expect(envOf(sidecarOf(b.pod), 'RT_MTLS_ENABLED')).toBeUndefined();
    expect(b.warnings.join('\n')).toMatch(/rt\.io\/mtls: "true" has no effect/);
    expect(admit(pod({ 'rt.io/mtls': 'maybe' })).message).toMatch(/annotation rt\.io\/mtls/);
  });

  it('gives app containers the ports unless they set them', () => {
    const a = admit(pod({}, { containers: [{ name: 'app', image: 'a', env: [{ name: 'RT_HTTP_PORT', value: '1' }] }, { name: 'other', image: 'b' }] }));
    const [app, other] = a.pod.spec.containers;
    expect(app.env?.filter((e) => e.name === 'RT_HTTP_PORT')).toEqual([{ name: 'RT_HTTP_PORT', value: '1' }]);
    expect(envOf(app, 'DAPR_HTTP_PORT')?.value).toBe('3500');
    expect(envOf(other, 'RT_GRPC_PORT')?.value).toBe('50001');
    expect(envOf(other, 'DAPR_GRPC_PORT')?.value).toBe('50001');
  });

  it("a Deployment's pod gets the Deployment's name as app id", () => {
    const a = admit(pod({}, { generateName: 'checkout-7d9f8b6c5-', labels: { 'pod-template-hash': '7d9f8b6c5' } }));
    expect(arg(sidecarOf(a.pod), 'app-id')).toBe('checkout');
  });

  it('pods without rt.io/enabled: "true" are allowed unchanged', () => {
    for (const enabled of [undefined, 'false', '0']) {
      const p = pod();
      if (enabled === undefined) delete p.metadata!.annotations!['rt.io/enabled'];
      else p.metadata!.annotations!['rt.io/enabled'] = enabled;
      const a = admit(p);
      expect(a).toMatchObject({ allowed: true, patchLength: 0 });
    }
  });

  it('a pod that already has rt-sidecar is allowed unchanged (reinvocation)', () => {
    const once = admit(pod({ 'rt.io/inject-pluggable-components': 'true' }), { components: [component('c1', { container: { name: 'c1', image: 'c:1' } })] });
    const twice = admit(once.pod, { components: [component('c1', { container: { name: 'c1', image: 'c:1' } })] });
    expect(twice).toMatchObject({ allowed: true, patchLength: 0 });
    expect(twice.pod).toEqual(once.pod);
  });
});

describe('injector: pluggable components', () => {
  const comps = [
    component('store', { type: 'state.store-sock', container: { name: 'store', image: 'store:1' }, scopes: ['web'] }),
    component('queue', { type: 'pubsub.queue', container: { name: 'queue', image: 'queue:1', env: [{ name: 'X', value: '1' }] } }),
    component('queue-state', { type: 'state.queue', container: { name: 'queue', image: 'queue:1' } }),
    component('other-app', { type: 'state.other', container: { name: 'other', image: 'o:1' }, scopes: ['billing'] }),
    component('plain', { type: 'state.redis' }),
    component('elsewhere', { namespace: 'ns2', container: { name: 'elsewhere', image: 'e:1' } }),
  ];

  it('native: component containers, then the runtime, are init containers with restartPolicy Always; no probe needs a shell in a component\'s image', () => {
    const a = admit(pod({ 'rt.io/inject-pluggable-components': 'true' }, { initContainers: [{ name: 'migrate', image: 'm:1' }] }), { components: comps });
    expect(a.allowed, a.message).toBe(true);
    const init = a.pod.spec.initContainers!;
    expect(init.map((c) => c.name)).toEqual(['queue', 'store', 'rt-sidecar', 'migrate']);
    for (const c of init.slice(0, 3)) expect(c.restartPolicy).toBe('Always');
    expect(init[3].restartPolicy).toBeUndefined();
    // the components get no probe of ours (a distroless image has no shell to look for a socket):
    // the runtime waits for their sockets, and its startup probe holds the app until then
    expect(init[0].startupProbe).toBeUndefined();
    expect(init[1].startupProbe).toBeUndefined();
    expect(init[2].startupProbe?.httpGet).toMatchObject({ path: '/v1.0/healthz', port: 3500 });
    // why it stopped reaches the pod's status (and the operator's SidecarFailed Event) even without a termination log
    expect(init[2].terminationMessagePolicy).toBe('FallbackToLogsOnError');
    expect(a.pod.spec.containers.map((c) => c.name)).toEqual(['app']);
    expect(arg(init[2], 'wait-for-sockets')).toBe('queue,store-sock');
    // socket volume in the sidecar and every component container
    for (const c of init.slice(0, 3)) {
      expect(c.volumeMounts).toContainEqual(expect.objectContaining({ name: 'rt-components-sockets', mountPath: '/tmp/rt-components-sockets' }));
      expect(envOf(c, 'RT_COMPONENTS_SOCKETS_FOLDER')?.value).toBe('/tmp/rt-components-sockets');
    }
    expect(envOf(init[0], 'X')?.value).toBe('1');
    expect(a.pod.spec.volumes?.find((v) => v.name === 'rt-components-sockets')?.emptyDir).toEqual({});
    // the unscoped one is skipped with a warning; other namespaces are not looked at
    expect(a.warnings).toEqual([expect.stringContaining('Component ns1/other-app has rt.io/component-container but is not scoped to app "web"')]);
    expect(JSON.stringify(a.pod)).not.toContain('elsewhere');
  });

  it('classic: components and the runtime are appended to containers; the runtime waits for the sockets', () => {
    const a = admit(pod({ 'rt.io/inject-pluggable-components': 'true', 'rt.io/native-sidecar': 'false' }), { components: comps });
    expect(a.pod.spec.containers.map((c) => c.name)).toEqual(['app', 'queue', 'store', 'rt-sidecar']);
    expect(a.pod.spec.initContainers).toBeUndefined();
    const s = sidecarOf(a.pod);
    expect(arg(s, 'wait-for-sockets')).toBe('queue,store-sock');
    expect(s.restartPolicy).toBeUndefined();
    expect(s.startupProbe).toBeUndefined();
    expect(a.pod.spec.containers[1].startupProbe).toBeUndefined();
  });

  it('the injector default decides when the pod does not say', () => {
    const withScheduler = admit(pod(), { settings: { schedulerAddress: 's-0.s.rt-system.svc.cluster.local:50006,s-1.s.rt-system.svc.cluster.local:50006' } }).pod;
    const schedArgs = [...(withScheduler.spec?.initContainers ?? []), ...(withScheduler.spec?.containers ?? [])].find((c) => c.name === 'rt-sidecar')!.args!;
    expect(schedArgs.slice(schedArgs.indexOf('--scheduler-host-address'), schedArgs.indexOf('--scheduler-host-address') + 2)).toEqual(['--scheduler-host-address', 's-0.s.rt-system.svc.cluster.local:50006,s-1.s.rt-system.svc.cluster.local:50006']);
    expect(schedArgs).not.toContain('--placement-host-address');
    const a = admit(pod(), { settings: { nativeSidecar: false } });
    expect(a.pod.spec.containers.map((c) => c.name)).toEqual(['app', 'rt-sidecar']);
    const b = admit(pod({ 'rt.io/native-sidecar': 'true' }), { settings: { nativeSidecar: false } });
    expect(b.pod.spec.initContainers?.map((c) => c.name)).toEqual(['rt-sidecar']);
  });

  it('gives the sidecar the placement address (actors), and its CA with identity on', () => {
    const placement = 'p-0.p.rt-system.svc.cluster.local:50005,p-1.p.rt-system.svc.cluster.local:50005';
    const args = sidecarOf(admit(pod(), { settings: { placementAddress: placement } }).pod).args!;
    expect(args.slice(args.indexOf('--placement-host-address'), args.indexOf('--placement-host-address') + 2)).toEqual(['--placement-host-address', placement]);
    const identity = { trustDomain: 'example.org', issuerAddress: 'rt-operator.rt-system.svc:6500', trustAnchorsPem: '-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n' };
    const s = sidecarOf(admit(pod(), { settings: { identity, placementAddress: placement } }).pod);
    expect(envOf(s, 'RT_PLACEMENT_TLS_CA_FILE')?.value).toBe('/var/run/secrets/rt.io/trust-anchors.pem');
    // the pod's rt.io/env cannot point it elsewhere
    const overridden = sidecarOf(admit(pod({ 'rt.io/env': 'RT_PLACEMENT_TLS_CA_FILE=/tmp/evil.pem' }), { settings: { identity, placementAddress: placement } }).pod);
    expect(overridden.env?.filter((e) => e.name === 'RT_PLACEMENT_TLS_CA_FILE').map((e) => e.value)).toEqual(['/var/run/secrets/rt.io/trust-anchors.pem']);
  });

  it('rt.io/pluggable-components: existing containers become components (native)', () => {
    const a = admit(pod({ 'rt.io/pluggable-components': 'mystore', 'rt.io/pluggable-components-sockets-folder': '/var/sockets' }, {
      containers: [{ name: 'app', image: 'a' }, { name: 'mystore', image: 's:1' }],
    }));
    expect(a.pod.spec.containers.map((c) => c.name)).toEqual(['app']);
    const init = a.pod.spec.initContainers!;
    expect(init.map((c) => c.name)).toEqual(['mystore', 'rt-sidecar']);
    expect(init[0].restartPolicy).toBe('Always');
    expect(init[0].startupProbe).toBeUndefined();
    expect(arg(init[1], 'wait-for-sockets')).toBe('mystore');
    expect(envOf(init[0], 'RT_HTTP_PORT')).toBeUndefined();
    for (const c of init) {
      expect(c.volumeMounts).toContainEqual(expect.objectContaining({ name: 'rt-components-sockets', mountPath: '/var/sockets' }));
      expect(envOf(c, 'RT_COMPONENTS_SOCKETS_FOLDER')?.value).toBe('/var/sockets');
    }
  });

  it('rt.io/pluggable-components in classic mode: containers stay, the runtime waits for them', () => {
    const a = admit(pod({ 'rt.io/pluggable-components': 'a-sock,b-sock', 'rt.io/native-sidecar': 'false' }, {
      containers: [{ name: 'app', image: 'a' }, { name: 'a-sock', image: 's:1' }, { name: 'b-sock', image: 's:2' }],
    }));
    expect(a.pod.spec.containers.map((c) => c.name)).toEqual(['app', 'a-sock', 'b-sock', 'rt-sidecar']);
    expect(arg(sidecarOf(a.pod), 'wait-for-sockets')).toBe('a-sock,b-sock');
    expect(envOf(a.pod.spec.containers[1], 'RT_COMPONENTS_SOCKETS_FOLDER')?.value).toBe('/tmp/rt-components-sockets');
  });

  it('both modes together, and without components no socket volume', () => {
    const a = admit(pod({ 'rt.io/pluggable-components': 'mine', 'rt.io/inject-pluggable-components': 'true' }, {
      containers: [{ name: 'app', image: 'a' }, { name: 'mine', image: 's:1' }],
    }), { components: comps });
    expect(a.pod.spec.initContainers?.map((c) => c.name)).toEqual(['mine', 'queue', 'store', 'rt-sidecar']);
    const none = admit(pod());
    expect(none.pod.spec.volumes?.map((v) => v.name)).toEqual(['rt-identity-token']);
  });

  it('a pod with no volumes and a component gets both volumes (no add that erases another)', () => {
    const a = admit(pod({ 'rt.io/inject-pluggable-components': 'true' }), { components: comps });
    expect(a.pod.spec.volumes?.map((v) => v.name)).toEqual(['rt-identity-token', 'rt-components-sockets']);
  });
});

describe('injector: bad input is denied with a clear message', () => {
  const denied: [string, Record<string, string>, RegExp][] = [
    ['bad app-port', { 'rt.io/app-port': 'eighty' }, /annotation rt\.io\/app-port: "eighty" is not valid \(expected a whole number from 1 to 65535\)/],
    ['bad enabled', { 'rt.io/enabled': 'maybe' }, /annotation rt\.io\/enabled: "maybe"/],
    ['bad protocol', { 'rt.io/app-protocol': 'ftp' }, /expected one of http, grpc/],
    ['bad quantity', { 'rt.io/sidecar-memory-limit': 'lots' }, /rt\.io\/sidecar-memory-limit.*Kubernetes quantity/],
    ['bad env', { 'rt.io/env': 'NOVALUE' }, /rt\.io\/env.*NAME=value/],
    ['bad folder', { 'rt.io/pluggable-components-sockets-folder': 'relative/dir' }, /absolute folder/],
    ['bad duration', { 'rt.io/app-health-probe-interval': 'soon' }, /duration/],
    ['missing manual container', { 'rt.io/pluggable-components': 'ghost' }, /names container "ghost", which the pod does not have/],
    ['two bad values', { 'rt.io/app-port': '0', 'dapr.io/log-level': 'loud' }, /rt\.io\/app-port.*; annotation dapr\.io\/log-level/],
  ];
  it.each(denied)('%s', (_n, annotations, message) => {
    const a = admit(pod(annotations));
    expect(a.allowed).toBe(false);
    expect(a.message).toMatch(message);
  });

  it('invalid rt.io/component-container JSON names the Component', () => {
    for (const bad of ['{not json', '[]', JSON.stringify({ image: 'x' }), JSON.stringify({ name: 'Bad_Name', image: 'x' }), JSON.stringify({ name: 'ok' })]) {
      const a = admit(pod({ 'rt.io/inject-pluggable-components': 'true' }), { components: [component('broken', { container: bad })] });
      expect(a.allowed).toBe(false);
      expect(a.message).toMatch(/Component ns1\/broken: annotation rt\.io\/component-container (is not valid JSON|must be a JSON object|needs "name"|needs "image")/);
    }
  });

  it('a malformed pod is denied, not crashed on', () => {
    for (const [p, why] of [
      [null, 'the object is not a JSON object'],
      [{ spec: {} }, 'spec.containers must be a non-empty array'],
      [{ metadata: { annotations: { 'rt.io/enabled': 1 } }, spec: { containers: [{ name: 'a' }] } }, 'metadata.annotations["rt.io/enabled"] must be a string'],
      [{ spec: { containers: [{ name: 'a', env: 'x' }] } }, 'spec.containers[0].env must be an array of objects'],
      [{ spec: { containers: [{ name: 'a' }], volumes: {} } }, 'spec.volumes must be an array'],
    ] as const) {
      const a = admit(p);
      expect(a.allowed).toBe(false);
      expect(a.message).toContain(`malformed pod: ${why}`);
    }
  });

  it('a volume name the injector needs that the pod already uses is a denial', () => {
    const p = pod();
    p.spec.volumes = [{ name: 'rt-identity-token', emptyDir: {} }];
    expect(admit(p).message).toMatch(/already has a volume named "rt-identity-token"/);
  });
});

describe('injector: any annotations give a valid Pod or a clear denial (fast-check)', () => {
  const keys = annotationNames().flatMap((n) => [n, n.replace('rt.io/', 'dapr.io/')]);
  const samples = ['true', 'false', '1', '0', '8080', '65536', '-1', 'grpc', 'http', 'debug', '100m', '1Gi', '5s', '250ms', 'A=b,C=d', 'a,b', '/tmp/x', 'relative', '', ' ', 'x'.repeat(300), '{"name":"c"}'];
  // mostly plausible values, so that a good share of the pods is injected rather than denied
  const value = fc.oneof({ arbitrary: fc.constantFrom(...samples), weight: 6 }, { arbitrary: fc.string(), weight: 1 }, { arbitrary: fc.integer({ min: -5, max: 70000 }).map(String), weight: 1 });
  const annotations = fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: 5 });
  const containerNames = fc.uniqueArray(fc.constantFrom('app', 'a', 'b', 'a-sock', 'rt-sidecar-x'), { minLength: 1, maxLength: 3 });

  it('holds for random annotation sets, pods and Components', () => {
    fc.assert(
      fc.property(annotations, containerNames, fc.boolean(), fc.constantFrom('ok', 'bad-json', 'unscoped'), (ann, names, enabled, compKind) => {
        const p = pod({ ...ann, ...(enabled ? { 'rt.io/enabled': 'true' } : {}) }, { containers: names.map((name) => ({ name, image: `${name}:1` })) });
        const comps = [component('c1', compKind === 'bad-json' ? { container: '{' } : { container: { name: 'c1', image: 'c:1' }, scopes: compKind === 'unscoped' ? ['nobody'] : undefined })];
        const a = admit(p, { components: comps }); // applies the patch and validates the Pod, or throws
        if (!a.allowed) expect(a.message).toMatch(/^rt injector: /);
        else if (a.patchLength > 0) expect([...(a.pod.spec.initContainers ?? []), ...a.pod.spec.containers].filter((c) => c.name === 'rt-sidecar')).toHaveLength(1);
      }),
      { numRuns: 400 },
    );
  });
});
