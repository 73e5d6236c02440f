/**
 * The ecosystem's JavaScript SDK (`@dapr/dapr` DaprClient over HTTP, its default protocol)
 * against a sidecar, for the calls an app makes first: health, metadata, state, and the
 * workflow management API (which the SDK sends to /v1.0-beta1/workflows/dapr/...).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('@dapr/dapr DaprClient over HTTP', () => {
  let dir: string;
  let s: Sidecar;
  let client: DaprClient;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-sdk-http-'));
    await writeFile(join(dir, 'store.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata: {name: statestore}\nspec: {type: state.in-memory, version: v1}\n');
    s = await startSidecar({ appId: 'sdk-http', httpPort: 0, grpcPort: 0, resourcesPaths: [dir], dataDir: join(dir, 'data'), logger: pino({ level: 'silent' }) });
    client = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(s.httpPort), communicationProtocol: CommunicationProtocolEnum.HTTP, logger: { level: LogLevel.Error } });
    await client.start();
  });
  afterAll(async () => {
    await client?.stop();
    await s?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('health, metadata get and set', async () => {
    expect(await client.health.isHealthy()).toBe(true);
    await client.metadata.set('team', 'payments');
    const md = await client.metadata.get();
    expect(md.id).toBe('sdk-http');
    expect(md.extended.team).toBe('payments');
    expect(md.components).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'statestore', type: 'state.in-memory' })]));
  });

  it('state save, get, bulk, transaction, delete', async () => {
    await client.state.save('statestore', [
      { key: 'a', value: { n: 1 } },
      { key: 'b', value: 'text' },
    ]);
    expect(await client.state.get('statestore', 'a')).toEqual({ n: 1 });
    const bulk = await client.state.getBulk('statestore', ['a', 'b', 'missing']);
    expect((bulk as { key: string; data: unknown }[]).find((i) => i.key === 'b')).toMatchObject({ data: 'text' });
    await client.state.transaction('statestore', [
      { operation: 'upsert', request: { key: 'c', value: 3 } },
      { operation: 'delete', request: { key: 'a' } },
    ]);
    expect(await client.state.get('statestore', 'c')).toBe(3);
    await client.state.delete('statestore', 'b');
    expect(await client.state.get('statestore', 'b')).toBe('');
  });

  it('workflow management: start, get, raise event, pause, resume, terminate, purge', async () => {
    const id = await client.workflow.start('orders', { item: 'book' }, 'sdk-wf-1');
    expect(id).toBe('sdk-wf-1');
    const started = await client.workflow.get(id);
    expect(started).toMatchObject({ instanceID: id, workflowName: 'orders', runtimeStatus: 'PENDING' });
    await client.workflow.raise(id, 'approved', { ok: true });
    await client.workflow.pause(id);
    expect((await client.workflow.get(id)).runtimeStatus).toBe('SUSPENDED');
    await client.workflow.resume(id);
    await client.workflow.terminate(id);
    expect((await client.workflow.get(id)).runtimeStatus).toBe('TERMINATED');
    await client.workflow.purge(id);
    await expect(client.workflow.get(id)).rejects.toThrow();
  });
});
