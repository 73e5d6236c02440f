import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadResources, parseResources } from '../../sidecar/src/resources/loader.ts';
import { ResourceError } from '../../sidecar/src/resources/types.ts';
import { startSidecar } from '../../sidecar/src/sidecar.ts';

const opts = { appId: 'app1', namespace: 'default', env: { HOME: '/home/u', TOKEN: 's3cret' } };
const silent = pino({ level: 'silent' });

const component = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'rt.io/v1alpha1',
  kind: 'Component',
  metadata: { name },
  spec: { type: 'secretstores.local.env', version: 'v1', metadata: [] },
  ...extra,
});

describe('resources loader', () => {
  it('reads multi-document files: components, configuration, subscriptions, http endpoints', () => {
    const text = [
      stringify(component('a')),
      stringify({ apiVersion: 'rt.io/v1alpha1', kind: 'Configuration', metadata: { name: 'cfg' }, spec: { features: [{ name: 'F1', enabled: true }, { name: 'F2', enabled: false }] } }),
      stringify({
        apiVersion: 'rt.io/v2alpha1',
        kind: 'Subscription',
        metadata: { name: 's' },
        spec: { pubsubname: 'ps', topic: 't', routes: { rules: [{ match: 'event.type == "x"', path: '/x' }], default: '/d' }, deadLetterTopic: 'dlq' },
      }),
      stringify({ apiVersion: 'rt.io/v1alpha1', kind: 'Subscription', metadata: { name: 's1' }, spec: { pubsubname: 'ps', topic: 'u', route: '/u' } }),
      stringify({ apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'ext' }, spec: { baseUrl: 'https://example.invalid', headers: [{ name: 'x', value: 'y' }] } }),
      stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'other-group' } }),
    ].join('---\n');
    const r = parseResources(text, 'f.yaml', opts);
    expect(r.components.map((c) => c.spec.name)).toEqual(['a']);
    expect(r.configuration?.features).toEqual([
      { name: 'F1', enabled: true },
      { name: 'F2', enabled: false },
    ]);
    expect(r.subscriptions).toEqual([
      { pubsubname: 'ps', topic: 't', metadata: {}, rules: [{ match: 'event.type == "x"', path: '/x' }, { match: '', path: '/d' }], deadLetterTopic: 'dlq', type: 'DECLARATIVE' },
      { pubsubname: 'ps', topic: 'u', metadata: {}, rules: [{ match: '', path: '/u' }], deadLetterTopic: '', type: 'DECLARATIVE' },
    ]);
    expect(r.httpEndpoints).toEqual([{ name: 'ext', baseUrl: 'https://example.invalid', headers: { x: 'y' } }]);
  });

  it('reads a v1alpha1 Subscription served as v2alpha1 by a CRD without conversion (route kept, no routes)', () => {
    const text = stringify({ apiVersion: 'dapr.io/v2alpha1', kind: 'Subscription', metadata: { name: 'legacy' }, spec: { pubsubname: 'bus', topic: 'orders', route: '/orders' } });
    expect(parseResources(text, 'operator Subscription/legacy', opts).subscriptions).toEqual([expect.objectContaining({ pubsubname: 'bus', topic: 'orders', rules: [{ match: '', path: '/orders' }] })]);
    // a v2alpha1 object with neither is still refused
    expect(() => parseResources(stringify({ apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 'x' }, spec: { pubsubname: 'bus', topic: 'orders' } }), 'f.yaml', opts)).toThrow(/spec.routes/);
  });

  it('skips resources scoped to other apps and other namespaces', () => {
    const text = [
      stringify(component('mine', { scopes: ['app1', 'app2'] })),
      stringify(component('theirs', { scopes: ['app2'] })),
      stringify({ ...component('elsewhere'), metadata: { name: 'elsewhere', namespace: 'prod' } }),
    ].join('---\n');
    expect(parseResources(text, 'f.yaml', opts).components.map((c) => c.spec.name)).toEqual(['mine']);
  });

  it('expands {env:…}, {appID}, {namespace}, envRef; keeps secretKeyRef for later', () => {
    const doc = component('c');
    doc.spec.metadata = [
      { name: 'path', value: '{env:HOME}/data/{appID}-{namespace}.db' },
      { name: 'fromEnv', envRef: 'TOKEN' },
      { name: 'port', value: 6379 },
      { name: 'pw', secretKeyRef: { name: 'redis', key: 'password' } },
    ] as never;
    (doc as Record<string, unknown>).auth = { secretStore: 'vault' };
    const [c] = parseResources(stringify(doc), 'f.yaml', opts).components;
    expect(c.spec.metadata).toEqual({ path: '/home/u/data/app1-default.db', fromEnv: 's3cret', port: '6379' });
    expect(c.secretRefs).toEqual([{ field: 'pw', secretName: 'redis', key: 'password' }]);
    expect(c.secretStore).toBe('vault');
  });

  it('names the file, the resource and the field in every error', () => {
    const bad = component('c');
    (bad.spec as Record<string, unknown>).initTimeout = 'soon';
    expect(() => parseResources(stringify(bad), 'dir/c.yaml', opts)).toThrow('dir/c.yaml: Component "c": spec.initTimeout: "soon" is not a positive duration');
    expect(() => parseResources('kind: Component\napiVersion: rt.io/v1alpha1\nmetadata: {name: x}\nspec: {version: v1}\n', 'x.yaml', opts)).toThrow(
      /x\.yaml: Component "x": spec\.type: is required/,
    );
    expect(() => parseResources('a: [1, 2\n', 'broken.yaml', opts)).toThrow(/broken\.yaml: document 1: invalid YAML/);
  });

  it('rejects two components of the same name across files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-res-'));
    try {
      await writeFile(join(dir, 'a.yaml'), stringify(component('same')));
      await writeFile(join(dir, 'b.yaml'), stringify(component('same')));
      await expect(loadResources([dir], opts)).rejects.toThrow(/b\.yaml: Component "same": metadata\.name: a component of this name is defined twice/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a folder's files that are not YAML, and YAML documents that are not resources, are skipped with a note", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-res-'));
    try {
      await writeFile(join(dir, 'a.yaml'), [stringify(component('a')), stringify({ services: { web: { image: 'nginx' } } }), stringify(component('b'))].join('---\n'));
      await writeFile(join(dir, 'secrets.json'), JSON.stringify({ db: { password: 'x' } }));
      await writeFile(join(dir, 'components.json'), JSON.stringify(component('from-json')));
      await writeFile(join(dir, 'docker-compose.yml'), stringify({ version: '3', services: { redis: { image: 'redis' } } }));
      await writeFile(join(dir, 'list.yaml'), stringify(['one', 'two']));
      await writeFile(join(dir, 'text.yaml'), 'just words\n');
      await writeFile(join(dir, 'deployment.yaml'), stringify({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' } }));
      await writeFile(join(dir, 'foreign.yaml'), stringify({ kind: 'Something', metadata: { name: 'x' } }));
      await writeFile(join(dir, 'README.md'), '# notes\n');
      await writeFile(join(dir, '.a.yaml.swp'), 'binary-ish');
      const notes: string[] = [];
      const r = await loadResources([dir], { ...opts, skipped: (m) => notes.push(m) });
      expect(r.components.map((c) => c.spec.name)).toEqual(['a', 'b']);
      expect(notes.sort()).toEqual([
        `${join(dir, 'README.md')}: not a .yaml or .yml file, skipped (only those are read as resources)`,
        `${join(dir, 'a.yaml')}: document 2 has no kind: not a resource, skipped`,
        `${join(dir, 'components.json')}: not a .yaml or .yml file, skipped (only those are read as resources)`,
        `${join(dir, 'docker-compose.yml')}: document 1 has no kind: not a resource, skipped`,
        `${join(dir, 'foreign.yaml')}: document 1 has no apiVersion: not a resource, skipped`,
        `${join(dir, 'list.yaml')}: document 1 is not a mapping with apiVersion and kind: not a resource, skipped`,
        `${join(dir, 'secrets.json')}: not a .yaml or .yml file, skipped (only those are read as resources)`,
        `${join(dir, 'text.yaml')}: document 1 is not a mapping with apiVersion and kind: not a resource, skipped`,
      ]);
      // without a listener, silently
      expect((await loadResources([dir], opts)).components).toHaveLength(2);
      // a file named on its own is read whatever its name
      expect((await loadResources([join(dir, 'components.json')], opts)).components.map((c) => c.spec.name)).toEqual(['from-json']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a document that says it is a resource of ours is checked: rt.io/dapr.io without kind, a known kind without apiVersion', () => {
    expect(() => parseResources('apiVersion: rt.io/v1alpha1\nmetadata: {name: x}\nspec: {}\n', 'r.yaml', opts)).toThrow('r.yaml: resource "x": kind: is required');
    expect(() => parseResources('apiVersion: dapr.io/v1alpha1\nkind: ""\nmetadata: {name: x}\n', 'r.yaml', opts)).toThrow(/r\.yaml: .*kind: is required/);
    expect(() => parseResources('kind: Component\nmetadata: {name: x}\nspec: {type: state.redis, version: v1}\n', 'r.yaml', opts)).toThrow('r.yaml: Component "x": apiVersion: is required');
    // a kind of ours rt does not read is skipped quietly, as is another group's
    const notes: string[] = [];
    const r = parseResources([stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Placement', metadata: { name: 'p' } }), stringify({ apiVersion: 'v1', kind: 'ConfigMap' })].join('---\n'), 'r.yaml', { ...opts, skipped: (m) => notes.push(m) });
    expect(r.components).toEqual([]);
    expect(notes).toEqual([]);
    // a Resiliency is read, and checked like the others
    expect(() => parseResources(stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Resiliency', metadata: { name: 'r' } }), 'r.yaml', opts)).toThrow('r.yaml: Resiliency "r": spec.policies: is required');
    expect(parseResources(stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Resiliency', metadata: { name: 'r' }, spec: { policies: { timeouts: { t: '1s' } } } }), 'r.yaml', opts).resiliencies?.map((x) => x.name)).toEqual(['r']);
  });

  it('property: any text gives resources or a ResourceError, never another exception', () => {
    const yamlish = fc.oneof(
      fc.string({ maxLength: 400 }),
      fc.jsonValue().map((v) => stringify(v)),
      // structured documents close to real resources, with random values in every field
      fc
        .record({
          apiVersion: fc.oneof(fc.constant('rt.io/v1alpha1'), fc.constant('rt.io/v2alpha1'), fc.jsonValue()),
          kind: fc.oneof(fc.constantFrom('Component', 'Configuration', 'Subscription', 'HTTPEndpoint'), fc.jsonValue()),
          metadata: fc.oneof(fc.record({ name: fc.oneof(fc.string(), fc.jsonValue()), namespace: fc.option(fc.string()) }), fc.jsonValue()),
          spec: fc.oneof(
            fc.record({
              type: fc.oneof(fc.constantFrom('state.redis', 'bindings.sftp'), fc.jsonValue()),
              version: fc.oneof(fc.constant('v1'), fc.jsonValue()),
              metadata: fc.oneof(fc.array(fc.record({ name: fc.jsonValue(), value: fc.jsonValue() })), fc.jsonValue()),
              features: fc.jsonValue(),
              routes: fc.jsonValue(),
              baseUrl: fc.oneof(fc.webUrl(), fc.jsonValue()),
              initTimeout: fc.oneof(fc.constantFrom('5s', '1m', '-1s', 'x'), fc.jsonValue()),
            }),
            fc.jsonValue(),
          ),
          scopes: fc.oneof(fc.array(fc.string()), fc.jsonValue()),
        })
        .map((v) => stringify(v)),
    );
    fc.assert(
      fc.property(fc.array(yamlish, { minLength: 1, maxLength: 3 }), (docs) => {
        try {
          const r = parseResources(docs.join('\n---\n'), 'fuzz.yaml', opts);
          expect(Array.isArray(r.components)).toBe(true);
          for (const c of r.components) {
            expect(typeof c.spec.name).toBe('string');
            for (const v of Object.values(c.spec.metadata)) expect(typeof v).toBe('string');
          }
        } catch (e) {
          if (!(e instanceof ResourceError)) throw e;
          expect(e.message.startsWith('fuzz.yaml: ')).toBe(true);
        }
      }),
      { numRuns: 1500 },
    );
  }, 180_000); // 1500 YAML parses: ~8 s on a quiet machine; a run beside load 16 on 2 cores took 8x as long
});

describe('components at sidecar start', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-comp-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const write = async (sub: string, docs: object[]) => {
    const p = join(dir, sub);
    await rm(p, { recursive: true, force: true });
    await (await import('node:fs/promises')).mkdir(p, { recursive: true });
    await writeFile(join(p, 'r.yaml'), docs.map((d) => stringify(d)).join('---\n'));
    return p;
  };

  it('resolves secretKeyRef against a local file secret store and never reports the value', async () => {
    const secrets = join(dir, 'secrets.json');
    await writeFile(secrets, JSON.stringify({ db: { password: 'hunter2' } }));
    const res = await write('ok', [
      { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'files' }, spec: { type: 'secretstores.local.file', version: 'v1', metadata: [{ name: 'secretsFile', value: secrets }, { name: 'multiValued', value: 'true' }] } },
      {
        apiVersion: 'rt.io/v1alpha1',
        kind: 'Component',
        metadata: { name: 'uses-secret' },
        spec: { type: 'secretstores.local.env', version: 'v1', metadata: [{ name: 'pw', secretKeyRef: { name: 'db', key: 'password' } }] },
        auth: { secretStore: 'files' },
      },
    ]);
    const s = await startSidecar({ appId: 'app1', httpPort: 0, grpcPort: 0, resourcesPaths: [res], dataDir: dir, logger: silent });
    try {
      const loaded = s.ctx.components.get('uses-secret');
      expect(loaded?.spec.metadata.pw).toBe('hunter2');
      expect(loaded?.spec.secretKeys).toEqual(['pw']);
      const text = await (await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/metadata`)).text();
      expect(text).not.toContain('hunter2');
      expect(JSON.parse(text).components).toEqual(
        expect.arrayContaining([
          { name: 'files', type: 'secretstores.local.file', version: 'v1', capabilities: [] },
          { name: 'uses-secret', type: 'secretstores.local.env', version: 'v1', capabilities: [] },
        ]),
      );
    } finally {
      await s.close();
    }
  });

  it('a failing component stops the sidecar with a message naming it and the cause; ignoreErrors lets it start', async () => {
    const failing = { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'broken' }, spec: { type: 'secretstores.local.file', version: 'v1', metadata: [] } };
    const res = await write('fail', [failing]);
    await expect(startSidecar({ appId: 'app1', httpPort: 0, grpcPort: 0, resourcesPaths: [res], dataDir: dir, logger: silent })).rejects.toThrow(
      /component "broken" \(secretstores\.local\.file\/v1, from .*r\.yaml\) failed to initialise: metadata field "secretsFile" is required/,
    );
    const res2 = await write('ignored', [{ ...failing, spec: { ...failing.spec, ignoreErrors: true } }]);
    const s = await startSidecar({ appId: 'app1', httpPort: 0, grpcPort: 0, resourcesPaths: [res2], dataDir: dir, logger: silent });
    try {
      expect(s.ctx.components.get('broken')).toBeUndefined();
    } finally {
      await s.close();
    }
  });

  it('an unknown type or version fails with the supported ones listed', async () => {
    // an unknown type may be a pluggable component whose socket is missing: both are said
    const res = await write('unknown', [{ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'u' }, spec: { type: 'state.nope', version: 'v1', initTimeout: '200ms' } }]);
    await expect(
      startSidecar({ appId: 'app1', httpPort: 0, grpcPort: 0, resourcesPaths: [res], dataDir: dir, componentsSocketsFolder: join(dir, 'no-sockets'), logger: silent }),
    ).rejects.toThrow(/component "u" \(state\.nope\/v1, from .*\) failed to initialise: .*nope\.sock.*must be started before the runtime.*"state\.nope" is not a built-in type either \(built-in state types: .*state\.sqlite/);
    const res2 = await write('version', [{ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'v' }, spec: { type: 'secretstores.local.env', version: 'v9' } }]);
    await expect(startSidecar({ appId: 'app1', httpPort: 0, grpcPort: 0, resourcesPaths: [res2], dataDir: dir, logger: silent })).rejects.toThrow(
      /version "v9" is not supported by secretstores\.local\.env; supported: v1/,
    );
  });
});
