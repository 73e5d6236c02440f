/**
 * The test bed is a real Kubernetes control plane: a kube-apiserver built from the pinned
 * release, with etcd and the controller manager, driven by the real kubectl. These checks prove
 * the parts the operator, injector and chart rely on: CRDs and watches that resume, service
 * account tokens and TokenReview audiences, a mutating webhook called over loopback HTTPS, RBAC.
 */
import { createServer, type Server } from 'node:https';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, OPERATOR_AUDIENCE, startKube, type KubeCluster } from '../services/kube.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');

let kube: KubeCluster;
beforeAll(async () => {
  if (available) kube = await startKube({ log: (s) => console.log(s) });
}, 600_000);
afterAll(async () => {
  await kube?.stop();
});

const ok = async (p: Promise<{ code: number; stdout: string; stderr: string }>) => {
  const r = await p;
  if (r.code !== 0) throw new Error(`kubectl failed (${r.code}): ${r.stderr}`);
  return r.stdout;
};

interface WatchEvent {
  type: string;
  object: { metadata: { name: string; resourceVersion: string }; spec?: { size?: number } };
}

const watch = (path: string, onEvent: (e: WatchEvent) => void) => kube.watch<WatchEvent>(path, onEvent);

describe.skipIf(!available)('a real Kubernetes control plane', () => {
  it('reports the pinned release, which kubectl parses', async () => {
    const v = JSON.parse(await ok(kube.kubectl(['version', '-o', 'json']))) as { serverVersion: { gitVersion: string; major: string; minor: string } };
    expect(v.serverVersion.gitVersion).toMatch(/^v1\.35\.\d+$/);
    expect(v.serverVersion.major).toBe('1');
  });

  it('applies a CRD and an object of it; a watch sees updates and resumes from a resourceVersion after its connection drops', async () => {
    await kube.createNamespace('crd-watch');
    await ok(
      kube.kubectl(['apply', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'widgets.smoke.rt.io' },
          spec: {
            group: 'smoke.rt.io',
            scope: 'Namespaced',
            names: { kind: 'Widget', plural: 'widgets', singular: 'widget' },
            versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } } } } }],
          },
        }),
      }),
    );
    await ok(kube.kubectl(['wait', '--for=condition=Established', 'crd/widgets.smoke.rt.io', '--timeout=60s']));
    const widget = (size: number) => JSON.stringify({ apiVersion: 'smoke.rt.io/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'crd-watch' }, spec: { size } });
    await vi.waitFor(async () => ok(kube.kubectl(['apply', '-f', '-'], { input: widget(1) })), { timeout: 30_000, interval: 500 });
    const created = JSON.parse(await ok(kube.kubectl(['get', 'widget', 'w1', '-n', 'crd-watch', '-o', 'json']))) as WatchEvent['object'];
    expect(created.spec?.size).toBe(1);

    const path = (rv: string) => `/apis/smoke.rt.io/v1/namespaces/crd-watch/widgets?watch=1&resourceVersion=${rv}`;
    const first: WatchEvent[] = [];
    const w1 = watch(path(created.metadata.resourceVersion), (e) => first.push(e));
    await ok(kube.kubectl(['apply', '-f', '-'], { input: widget(2) }));
    await vi.waitFor(() => expect(first.map((e) => [e.type, e.object.spec?.size])).toContainEqual(['MODIFIED', 2]), { timeout: 15_000 });
    const lastSeen = first.at(-1)!.object.metadata.resourceVersion;
    w1.close();

    // changes made while no one watches are delivered when the watch resumes from the last version seen
    await ok(kube.kubectl(['apply', '-f', '-'], { input: widget(3) }));
    const second: WatchEvent[] = [];
    const w2 = watch(path(lastSeen), (e) => second.push(e));
    try {
      await vi.waitFor(() => expect(second.map((e) => [e.type, e.object.spec?.size])).toContainEqual(['MODIFIED', 3]), { timeout: 15_000 });
      expect(second.some((e) => e.object.spec?.size === 2)).toBe(false);
    } finally {
      w2.close();
    }
  });

  it('issues service-account tokens that pass TokenReview for their audience only; a forged token is refused', async () => {
    await kube.createNamespace('tokens');
    await ok(kube.kubectl(['create', 'serviceaccount', 'app', '-n', 'tokens']));
    const tokenFor = async (audience: string) => {
      const r = await kube.request('POST', '/api/v1/namespaces/tokens/serviceaccounts/app/token', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: [audience], expirationSeconds: 600 } });
      expect(r.status).toBe(201);
      return (r.body as { status: { token: string } }).status.token;
    };
    const review = async (token: string) => {
      const r = await kube.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [OPERATOR_AUDIENCE] } });
      expect(r.status).toBe(201);
      return (r.body as { status: { authenticated?: boolean; user?: { username: string }; audiences?: string[] } }).status;
    };
    const good = await tokenFor(OPERATOR_AUDIENCE);
    const accepted = await review(good);
    expect(accepted.authenticated).toBe(true);
    expect(accepted.user?.username).toBe('system:serviceaccount:tokens:app');
    expect(accepted.audiences).toEqual([OPERATOR_AUDIENCE]);

    expect((await review(await tokenFor('someone-else'))).authenticated).toBeFalsy();
    const [h, p, sig] = good.split('.');
    const forged = `${h}.${p}.${sig.slice(0, -4)}${sig.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    expect((await review(forged)).authenticated).toBeFalsy();
    // a token whose claims were rewritten (another namespace) fails its signature
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const rewritten = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'system:serviceaccount:kube-system:app' })).toString('base64url')}.${sig}`;
    expect((await review(rewritten)).authenticated).toBeFalsy();
  });

  describe('a mutating webhook on a loopback HTTPS server', () => {
    let ca: TestCa;
    let server: Server;
    const seen: string[] = [];
    beforeAll(async () => {
      ca = makeTestCa();
      server = createServer({ key: ca.key, cert: ca.cert }, (req, res) => {
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => {
          const review = JSON.parse(body) as { request: { uid: string; object: { metadata: { name?: string; generateName?: string } } } };
          seen.push(review.request.object.metadata.name ?? review.request.object.metadata.generateName ?? '');
          const patch = [{ op: 'add', path: '/metadata/labels', value: { 'smoke.rt.io/mutated': 'yes' } }];
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request.uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') },
          }));
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    });
    afterAll(async () => {
      await new Promise((r) => server?.close(r));
      ca?.remove();
    });

    it('is called when a Pod is created, and its JSONPatch shows in the stored Pod', async () => {
      await kube.createNamespace('webhook');
      await ok(kube.kubectl(['label', 'namespace', 'webhook', 'smoke.rt.io/inject=on']));
      const port = (server.address() as { port: number }).port;
      await ok(
        kube.kubectl(['apply', '-f', '-'], {
          input: JSON.stringify({
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingWebhookConfiguration',
            metadata: { name: 'smoke' },
            webhooks: [{
              name: 'smoke.rt.io',
              clientConfig: { url: `https://127.0.0.1:${port}/mutate`, caBundle: Buffer.from(ca.caPem).toString('base64') },
              rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
              namespaceSelector: { matchLabels: { 'smoke.rt.io/inject': 'on' } },
              sideEffects: 'None',
              admissionReviewVersions: ['v1'],
              failurePolicy: 'Fail',
              timeoutSeconds: 10,
            }],
          }),
        }),
      );
      const pod = (name: string) => JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'webhook' }, spec: { containers: [{ name: 'c', image: 'rt:dev' }] } });
      // the API server picks up a new webhook configuration within a moment: create until it is used
      let n = 0;
      await vi.waitFor(
        async () => {
          const name = `p${n++}`;
          await ok(kube.kubectl(['create', '-f', '-'], { input: pod(name) }));
          const stored = JSON.parse(await ok(kube.kubectl(['get', 'pod', name, '-n', 'webhook', '-o', 'json']))) as { metadata: { labels?: Record<string, string> } };
          expect(stored.metadata.labels?.['smoke.rt.io/mutated']).toBe('yes');
          expect(seen).toContain(name);
        },
        { timeout: 30_000, interval: 500 },
      );
      // a pod outside the selected namespaces is not sent to the webhook
      await kube.createNamespace('plain');
      const before = seen.length;
      await ok(kube.kubectl(['create', '-f', '-'], { input: pod('untouched').replace('"webhook"', '"plain"') }));
      const plain = JSON.parse(await ok(kube.kubectl(['get', 'pod', 'untouched', '-n', 'plain', '-o', 'json']))) as { metadata: { labels?: Record<string, string> } };
      expect(plain.metadata.labels?.['smoke.rt.io/mutated']).toBeUndefined();
      expect(seen.length).toBe(before);
    });
  });

  it('RBAC refuses a service account a Secret it was not granted, and allows the one it was', async () => {
    await kube.createNamespace('rbac');
    await ok(kube.kubectl(['create', 'serviceaccount', 'reader', '-n', 'rbac']));
    await ok(kube.kubectl(['create', 'secret', 'generic', 'granted', '--from-literal=k=v', '-n', 'rbac']));
    await ok(kube.kubectl(['create', 'secret', 'generic', 'other', '--from-literal=k=v', '-n', 'rbac']));
    await ok(kube.kubectl(['create', 'role', 'read-granted', '--verb=get', '--resource=secrets', '--resource-name=granted', '-n', 'rbac']));
    await ok(kube.kubectl(['create', 'rolebinding', 'read-granted', '--role=read-granted', '--serviceaccount=rbac:reader', '-n', 'rbac']));
    const token = (await ok(kube.kubectl(['create', 'token', 'reader', '-n', 'rbac']))).trim();
    const kubeconfig = join(kube.dir, 'reader.kubeconfig');
    writeFileSync(kubeconfig, [
      'apiVersion: v1', 'kind: Config',
      'clusters: [{name: c, cluster: {server: "' + kube.server + '", certificate-authority: "' + kube.ca.caFile + '"}}]',
      'users: [{name: reader, user: {token: "' + token + '"}}]',
      'contexts: [{name: c, context: {cluster: c, user: reader}}]',
      'current-context: c', '',
    ].join('\n'));
    const denied = await kube.kubectl(['get', 'secret', 'other', '-n', 'rbac'], { kubeconfig });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/forbidden/i);
    expect(denied.stderr).toContain('system:serviceaccount:rbac:reader');
    const allowed = await kube.kubectl(['get', 'secret', 'granted', '-n', 'rbac', '-o', 'jsonpath={.data.k}'], { kubeconfig });
    expect(allowed.stderr).toBe('');
    expect(Buffer.from(allowed.stdout, 'base64').toString()).toBe('v');
  });
});
