/**
 * The built-in components read their metadata through the one decoder: a component with bad
 * metadata fails to load with a message naming the component, the field (as written) and the
 * value; the fields whose reading changed (issue 38) read by the one rule.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseMetadata as parseEventRouter } from '../../sidecar/src/components/bindings/eventgrid/metadata.ts';
import { parseMetadata as parseSftp } from '../../sidecar/src/components/bindings/sftp/metadata.ts';
import { builtinCatalog } from '../../sidecar/src/components/catalog.ts';
import { streamSettings } from '../../sidecar/src/components/pubsub/redis/index.ts';
import { ComponentInitError, ComponentRegistry } from '../../sidecar/src/components/registry.ts';
import type { ComponentSpec } from '../../sidecar/src/components/types.ts';

const registry = () => new ComponentRegistry(builtinCatalog(), { appId: 'app', namespace: 'default', log: pino({ level: 'silent' }) });
const spec = (name: string, type: string, metadata: Record<string, string>): ComponentSpec => ({
  name,
  type,
  version: 'v1',
  metadata,
  secretKeys: [],
  initTimeoutMs: 5000,
  ignoreErrors: false,
  scopes: [],
  annotations: {},
  source: 'test.yaml',
});

describe('a component with bad metadata', () => {
  it('fails to load with a message naming the component, the field and the value', async () => {
    const r = registry();
    const e = await r.apply(spec('db', 'state.sqlite', { connectionString: ':memory:', busyTimeout: 'soon' })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ComponentInitError);
    expect((e as Error).message).toMatch(/^component "db" \(state\.sqlite\/v1, from test\.yaml\) failed to initialise: metadata field "busyTimeout" "soon" is not a duration/);
    const bad = await r.apply(spec('mem', 'state.in-memory', { actorStateStore: 'maybe' })).catch((x: unknown) => x);
    expect((bad as Error).message).toMatch(/component "mem" .*metadata field "actorStateStore" "maybe" is not a boolean/);
    const files = await r.apply(spec('files', 'secretstores.local.file', { secretsFile: '/x.json', multiValued: 'sometimes' })).catch((x: unknown) => x);
    expect((files as Error).message).toMatch(/component "files" .*metadata field "multiValued" "sometimes" is not a boolean/);
    await r.closeAll();
  });

  it('reads actorStateStore as every other boolean', async () => {
    const r = registry();
    await r.apply(spec('a', 'state.in-memory', { actorStateStore: 'no' }));
    expect(r.actorStateStore()).toBeUndefined();
    await r.apply(spec('b', 'state.in-memory', { ActorStateStore: 'Yes' }));
    expect(r.actorStateStore()?.name).toBe('b');
    await r.closeAll();
  });
});

describe('the components read their fields by the one rule', () => {
  it('durations: a bare number is seconds everywhere', () => {
    expect(streamSettings({ processingTimeout: '30', Concurrency: '+3' }, 'a')).toMatchObject({ processingTimeoutMs: 30_000, concurrency: 3 });
    // the event-routing binding read a bare number as milliseconds before
    const out = parseEventRouter({ accessKey: 'k', topicEndpoint: 'https://t.example.com/api/events', publishTimeout: '2' }, { componentName: 'eg' });
    expect(out.output?.publishTimeoutMs).toBe(2000);
  });

  it('booleans: the whole set, any case, in every component', async () => {
    const sftp = { rootPath: '/', address: 'h:22', username: 'u', password: 'p' };
    expect(parseSftp({ ...sftp, InsecureIgnoreHostKey: 'on' }).hostKeys.kind).toBe('insecure');
    // secretstores.local.file read only "true" before
    const dir = mkdtempSync(join(tmpdir(), 'rt-md-'));
    try {
      const file = join(dir, 's.json');
      writeFileSync(file, JSON.stringify({ db: { user: 'u', pass: 'p' } }));
      const r = registry();
      await r.apply(spec('files', 'secretstores.local.file', { secretsFile: file, multiValued: 'Yes' }));
      expect(await r.secretStore('files')?.getSecret('db', {})).toEqual({ user: 'u', pass: 'p' });
      await r.closeAll();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('state.postgresql: the reference\'s aliases, refused values named as written, before connecting', async () => {
    const r = registry();
    const e = await r.apply(spec('pg', 'state.postgresql', { url: 'postgres://127.0.0.1:1/x', timeoutInSeconds: '0.5' })).catch((x: unknown) => x);
    expect((e as Error).message).toMatch(/component "pg" .*metadata field "timeoutInSeconds" "0\.5" is not a duration/);
    await r.closeAll();
  });
});
