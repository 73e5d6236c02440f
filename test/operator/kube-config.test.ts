/**
 * The kubeconfig and in-cluster loader of the operator and the injector (shared/kube/config.ts): the current
 * context's server, CA, client certificate or token (inline or in files beside the kubeconfig),
 * clear refusals for what it does not do, and no other exception whatever the file holds.
 * (Talking to a real API server with it is what every other suite of this folder does.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { loadInCluster, loadKubeconfig } from '../../shared/kube/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'rt-kubeconfig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString('base64');
const write = (name: string, doc: unknown) => {
  const file = join(dir, name);
  writeFileSync(file, typeof doc === 'string' ? doc : stringify(doc));
  return file;
};
const config = (cluster: object, user: object, current = 'main') => ({
  apiVersion: 'v1',
  kind: 'Config',
  'current-context': current,
  contexts: [
    { name: 'other', context: { cluster: 'c2', user: 'u2' } },
    { name: 'main', context: { cluster: 'c1', user: 'u1' } },
  ],
  clusters: [
    { name: 'c1', cluster },
    { name: 'c2', cluster: { server: 'https://other:6443' } },
  ],
  users: [
    { name: 'u1', user },
    { name: 'u2', user: { token: 'other-token' } },
  ],
});

/** Kubeconfig-shaped YAML with any value where the loader expects a list, an object or a string. */
function arbitraryKubeconfig(): fc.Arbitrary<string> {
  const any = fc.oneof(fc.jsonValue(), fc.constant('main'), fc.constant('c1'), fc.constant('u1'));
  const named = (inner: string) => fc.array(fc.record({ name: any, [inner]: fc.oneof(any, fc.record({ server: any, cluster: any, user: any, token: any, tokenFile: any, 'certificate-authority': any, 'client-key-data': any })) }), { maxLength: 3 });
  return fc.record({ 'current-context': any, contexts: fc.oneof(any, named('context')), clusters: fc.oneof(any, named('cluster')), users: fc.oneof(any, named('user')) }).map((d) => stringify(d));
}

describe('rt operator: kubeconfig and in-cluster loading', () => {
  it('reads the current context: inline CA, client certificate and key', () => {
    const a = loadKubeconfig(
      write('inline', config({ server: 'https://127.0.0.1:6443/', 'certificate-authority-data': b64('CA PEM') }, { 'client-certificate-data': b64('CERT PEM'), 'client-key-data': b64('KEY PEM') })),
    );
    expect(a).toMatchObject({ server: 'https://127.0.0.1:6443', ca: 'CA PEM', cert: 'CERT PEM', key: 'KEY PEM', rejectUnauthorized: true });
    expect(a.token()).toBeUndefined();
  });

  it('reads files named relative to the kubeconfig, a token file again after it rotated, and insecure-skip-tls-verify', () => {
    writeFileSync(join(dir, 'ca.crt'), 'CA FROM FILE');
    writeFileSync(join(dir, 'token'), 'first\n');
    const a = loadKubeconfig(write('files', config({ server: 'https://k:443', 'certificate-authority': 'ca.crt', 'insecure-skip-tls-verify': true, 'tls-server-name': 'kubernetes' }, { tokenFile: 'token' })));
    expect(a).toMatchObject({ ca: 'CA FROM FILE', rejectUnauthorized: false, servername: 'kubernetes' });
    expect(a.token()).toBe('first');
    const other = loadKubeconfig(write('other', config({ server: 'https://k:443' }, {}, 'other')));
    expect(other.server).toBe('https://other:6443');
    expect(other.token()).toBe('other-token');
  });

  it('refuses exec and auth-provider users, a missing context and a cluster without server, naming the file', () => {
    const exec = write('exec', config({ server: 'https://k' }, { exec: { command: 'aws' } }));
    expect(() => loadKubeconfig(exec)).toThrow(/kubeconfig .*exec: user "u1" authenticates with an exec or auth-provider plugin/);
    expect(() => loadKubeconfig(write('noctx', config({ server: 'https://k' }, {}, 'nope')))).toThrow(/no context "nope"/);
    expect(() => loadKubeconfig(write('noserver', config({}, {})))).toThrow(/cluster "c1" has no server/);
    expect(() => loadKubeconfig(write('empty', ''))).toThrow(/not a kubeconfig/);
    expect(() => loadKubeconfig(write('nofile', config({ server: 'https://k', 'certificate-authority': 'missing.crt' }, {})))).toThrow(/nofile: cannot read missing\.crt/);
  });

  it('in-cluster: the service host and port (IPv6 in brackets), or a clear error outside a cluster', () => {
    expect(() => loadInCluster({})).toThrow(/not running in a cluster .*--kubeconfig/);
    // the CA file is only in a pod: outside one, the error names it
    expect(() => loadInCluster({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' })).toThrow(/serviceaccount\/ca\.crt/);
  });

  it('property: any file content gives an access or an Error, never another exception', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.jsonValue().map((v) => stringify(v)), arbitraryKubeconfig()), (text) => {
        const file = write('prop', text);
        try {
          const a = loadKubeconfig(file);
          expect(typeof a.server).toBe('string');
        } catch (e) {
          // its own message, naming the file: no TypeError from a shape it did not expect
          expect((e as Error).message).toMatch(/^kubeconfig .*prop: /);
        }
      }),
      { numRuns: 300 },
    );
  });
});
