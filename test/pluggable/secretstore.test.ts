/**
 * A pluggable secret store: secrets read through it, and other components' secretKeyRefs
 * resolved from it (secret stores are created before the components that use them).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { ok, sidecarFor, startTestServer, tempDirs, type TempDirs } from './helpers.ts';

const SECRETS: Record<string, Record<string, string>> = { db: { password: 's3cret', user: 'app' }, token: { token: 'abc' } };

describe('pluggable secret store', () => {
  let dirs: TempDirs;
  let server: grpc.Server;
  let sidecar: Sidecar;
  const instances: string[] = [];

  afterAll(async () => {
    await sidecar?.close();
    server?.forceShutdown();
    dirs?.cleanup();
  });

  it('answers Get/BulkGet and resolves secretKeyRefs of other components', async () => {
    dirs = tempDirs();
    server = await startTestServer(join(dirs.sockets, 'vault.sock'), {
      SecretStore: {
        Init: (c: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          instances.push(String(c.metadata.get('x-component-instance')[0]));
          cb(null, {});
        },
        Features: ok({ features: [] }),
        Ping: ok({}),
        Get: (c: grpc.ServerUnaryCall<{ key: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          const s = SECRETS[c.request.key];
          if (s) cb(null, { data: s });
          else cb({ code: grpc.status.NOT_FOUND, details: `no secret ${c.request.key}` });
        },
        BulkGet: ok({ data: Object.fromEntries(Object.entries(SECRETS).map(([k, v]) => [k, { secrets: v }])) }),
      },
    });
    writeFileSync(
      join(dirs.resources, 'c.yaml'),
      `apiVersion: rt.io/v1alpha1
kind: Component
metadata:
  name: vault
spec:
  type: secretstores.vault
  version: v1
---
apiVersion: rt.io/v1alpha1
kind: Component
metadata:
  name: cache
spec:
  type: state.in-memory
  version: v1
  metadata:
  - name: password
    secretKeyRef:
      name: db
      key: password
auth:
  secretStore: vault
`,
    );
    sidecar = await sidecarFor(dirs);
    expect(instances).toEqual(['vault']);
    expect(sidecar.ctx.components.get('cache')?.spec.metadata.password).toBe('s3cret');
    const store = sidecar.ctx.components.secretStore('vault')!;
    expect(await store.getSecret('db')).toEqual(SECRETS.db);
    expect(await store.getSecret('missing')).toBeUndefined();
    expect(await store.bulkGetSecret()).toEqual(SECRETS);
    await expect(store.ping!()).resolves.toBeUndefined();
  });
});
