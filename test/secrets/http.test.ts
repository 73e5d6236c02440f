import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('secrets HTTP API (and the real @dapr/dapr client over HTTP)', () => {
  let dir: string;
  let s: Sidecar;
  let base: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-secrets-'));
    // the secrets file lives outside the resources folder: every .json there is read as a resource
    await mkdir(join(dir, 'res'));
    await writeFile(join(dir, 'secrets.json'), JSON.stringify({ db: { user: 'app', password: 'hunter2' }, token: 't0k' }));
    await writeFile(
      join(dir, 'res', 'store.yaml'),
      `apiVersion: rt.io/v1alpha1
kind: Component
metadata: {name: files}
spec:
  type: secretstores.local.file
  version: v1
  metadata:
    - {name: secretsFile, value: "${join(dir, 'secrets.json')}"}
    - {name: multiValued, value: "true"}
`,
    );
    s = await startSidecar({ appId: 'sec', httpPort: 0, grpcPort: 0, resourcesPaths: [join(dir, 'res')], dataDir: dir, logger: pino({ level: 'silent' }) });
    base = `http://127.0.0.1:${s.httpPort}`;
  });
  afterAll(async () => {
    await s?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('GET /v1.0/secrets/<store>/<key> answers the secret, 204 when it is absent', async () => {
    const r = await fetch(`${base}/v1.0/secrets/files/db`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ user: 'app', password: 'hunter2' });
    expect((await fetch(`${base}/v1.0/secrets/files/nope`)).status).toBe(204);
  });

  it('GET /v1.0/secrets/<store>/bulk answers every secret', async () => {
    const r = await fetch(`${base}/v1.0/secrets/files/bulk`);
    expect(await r.json()).toEqual({ db: { user: 'app', password: 'hunter2' }, token: { token: 't0k' } });
  });

  it('an unknown store is a 400 that lists the loaded ones', async () => {
    const r = await fetch(`${base}/v1.0/secrets/vault/db`);
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ errorCode: 'ERR_SECRET_STORE_NOT_FOUND', message: expect.stringContaining('loaded secret stores: files') });
  });

  it('works with DaprClient over HTTP', async () => {
    const client = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(s.httpPort), communicationProtocol: CommunicationProtocolEnum.HTTP, logger: { level: LogLevel.Error } });
    expect(await client.secret.get('files', 'db')).toEqual({ user: 'app', password: 'hunter2' });
    expect(await client.secret.getBulk('files')).toMatchObject({ token: { token: 't0k' } });
  });
});

describe('POST /v1.0/shutdown', () => {
  it('answers 204, then the sidecar stops gracefully', async () => {
    const s = await startSidecar({ appId: 'stop', httpPort: 0, grpcPort: 0, logger: pino({ level: 'silent' }) });
    const r = await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/shutdown`, { method: 'POST' });
    expect(r.status).toBe(204);
    await s.closed;
    await expect(fetch(`http://127.0.0.1:${s.httpPort}/v1.0/healthz`)).rejects.toThrow();
  });
});
