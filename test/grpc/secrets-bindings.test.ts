/**
 * Secrets (local.file store) and output bindings over the gRPC runtime API. The binding is
 * bindings.sftp against a real sshd, driven by the @dapr/dapr SDK over gRPC; without sshd
 * (laptop) that part is skipped, and CI fails instead (requireService).
 */
import * as grpc from '@grpc/grpc-js';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorInfos } from '../../sidecar/src/pluggable/errors.ts';
import { requireService } from '../services/ci.ts';
import { sshdUnavailable, startSshd, type SshdServer } from '../services/sshd.ts';
import { componentYaml, SECRETS, startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

const sshdMissing = sshdUnavailable();
const haveSshd = requireService('sshd', sshdMissing === undefined, sshdMissing ?? '');

let s: RuntimeSidecar;
let sshd: SshdServer | undefined;
beforeAll(async () => {
  const extra: string[] = [];
  if (haveSshd) {
    sshd = await startSshd();
    extra.push(componentYaml('files', 'bindings.sftp', { rootPath: sshd.root, address: sshd.address, username: sshd.username, privateKey: sshd.keys.ed25519.path, knownHostsFile: sshd.knownHostsFile }));
  }
  s = await startRuntimeSidecar({ extraComponents: extra });
});
afterAll(async () => {
  await s?.stop();
  await sshd?.close();
});

describe('secrets over the gRPC API', () => {
  it('the @dapr/dapr SDK gets one secret and all of them', async () => {
    const c = s.sdk();
    expect(await c.secret.get('vault', 'db-password')).toEqual({ 'db-password': SECRETS['db-password'] });
    const all = await c.secret.getBulk('vault');
    expect(all).toMatchObject({ 'db-password': { 'db-password': 's3cret' }, 'api:key': { 'api:key': 'k-1' } });
  });

  it('raw GetSecret / GetBulkSecret answers', async () => {
    expect(await s.call('GetSecret', { store_name: 'vault', key: 'api:region' })).toEqual({ data: { 'api:region': 'eu' } });
    const bulk = await s.call<{ data: Record<string, { secrets: Record<string, string> }> }>('GetBulkSecret', { store_name: 'vault' });
    expect(Object.keys(bulk.data).sort()).toEqual(['api:key', 'api:region', 'db-password']);
  });

  it('errors: unknown store INVALID_ARGUMENT, unknown secret NOT_FOUND, empty key INVALID_ARGUMENT', async () => {
    const unknown = await s.fail('GetSecret', { store_name: 'nope', key: 'x' });
    expect(unknown.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(unknown.details).toContain('loaded secret stores: vault');
    expect((await s.fail('GetSecret', { store_name: 'vault', key: 'missing' })).code).toBe(grpc.status.NOT_FOUND);
    expect((await s.fail('GetSecret', { store_name: 'vault', key: '' })).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await s.fail('GetBulkSecret', { store_name: '' })).code).toBe(grpc.status.INVALID_ARGUMENT);
    // a state store is not a secret store
    expect((await s.fail('GetSecret', { store_name: 'mem', key: 'x' })).code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});

describe('InvokeBinding over the gRPC API', () => {
  it('errors: unknown binding and missing name/operation are INVALID_ARGUMENT naming the loaded ones', async () => {
    const e = await s.fail('InvokeBinding', { name: 'nope', operation: 'create' });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.metadata.get('rt-error-code')).toEqual(['ERR_BINDING_NOT_FOUND']);
    expect(e.details).toContain(haveSshd ? 'loaded bindings: files' : 'loaded bindings: none');
    expect((await s.fail('InvokeBinding', { name: '', operation: 'create' })).code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it.runIf(haveSshd)('create, get, list and delete a file on a real sshd with the @dapr/dapr SDK (bindings.sftp)', async () => {
    const c = s.sdk();
    const content = 'hello over gRPC ✓';
    const created = await c.binding.send('files', 'create', Buffer.from(content).toString('base64'), { fileName: 'dir/a.txt' });
    // the SDK hands back the InvokeBindingResponse: data is the binding's JSON answer
    const res = created as { data: Uint8Array };
    expect(JSON.parse(Buffer.from(res.data).toString())).toEqual({ fileName: 'dir/a.txt' });
    expect(await readFile(join(sshd!.root, 'dir/a.txt'), 'utf8')).toBe(content);

    const got = await s.call<{ data: Buffer }>('InvokeBinding', { name: 'files', operation: 'get', metadata: { fileName: 'dir/a.txt' } });
    expect(got.data.toString()).toBe(content);
    const list = await s.call<{ data: Buffer }>('InvokeBinding', { name: 'files', operation: 'list', metadata: { fileName: 'dir' } });
    expect(JSON.parse(list.data.toString())).toEqual(['a.txt']);

    const bad = await s.fail('InvokeBinding', { name: 'files', operation: 'get', metadata: { fileName: '../outside' } });
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
    const unsupported = await s.fail('InvokeBinding', { name: 'files', operation: 'rename', metadata: { fileName: 'x' } });
    expect(unsupported.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(unsupported.details).toContain('supported: ');

    await c.binding.send('files', 'delete', undefined, { fileName: 'dir/a.txt' });
    const gone = await s.fail('InvokeBinding', { name: 'files', operation: 'get', metadata: { fileName: 'dir/a.txt' } });
    // the binding answers 500 for a missing file (its HTTP status), which maps to INTERNAL
    expect(gone.code).toBe(grpc.status.INTERNAL);
    expect(gone.details).toContain('does not exist');
    // the binding's own reason and metadata, as in the HTTP body, not only the generic code
    expect(errorInfos(gone)).toEqual([{ reason: 'SFTP_FILE_NOT_FOUND', domain: 'rt.io', metadata: { fileName: 'dir/a.txt', operation: 'get' } }]);
    expect(gone.metadata.get('rt-error-code')).toEqual(['ERR_INVOKE_OUTPUT_BINDING']);
  });
});
