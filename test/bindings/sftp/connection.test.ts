/**
 * The binding's one reused connection against a real sshd that is restarted or stopped: calls
 * reconnect, or fail clearly and quickly. (Servers that stop answering: timeouts.test.ts.)
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SftpBinding } from '../../../sidecar/src/components/bindings/sftp/index.ts';
import { CONNECT_TIMEOUT_MS } from '../../../sidecar/src/components/bindings/sftp/connection.ts';
import { ApiError } from '../../../sidecar/src/http/errors.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, binary, bytesOf, initBinding, jsonOf, op, sshdAvailable } from './helpers.ts';

describe.skipIf(!sshdAvailable)('bindings.sftp connection (real sshd restarted and stopped)', () => {
  let s: SshdServer;
  let b: SftpBinding;
  beforeAll(async () => {
    s = await startSshd();
    b = await initBinding(baseMetadata(s));
  });
  afterAll(async () => {
    await b?.close();
    await s?.close();
  });
  const logins = () => (s.log().match(/Accepted password/g) ?? []).length;

  it('reconnects after sshd restarts, and the next call succeeds', async () => {
    await b.invoke(op('create', { fileName: 'r/one.txt' }, Buffer.from('one').toString('base64')));
    const before = logins();
    await s.stop();
    await s.start();
    // the very next call, without waiting for anything, works on a new connection
    expect((await bytesOf(await b.invoke(op('get', { fileName: 'r/one.txt' })))).toString()).toBe('one');
    await b.invoke(op('create', { fileName: 'r/two.txt' }, Buffer.from('two').toString('base64')));
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'r' })))).toEqual(['one.txt', 'two.txt']);
    expect(logins()).toBe(before + 1);
  });

  it('reconnects when calls are in flight as the server goes away and comes back', async () => {
    await s.stop();
    await s.start();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => b.invoke(op('create', { fileName: `r/par${i}.txt` }, Buffer.from(`p${i}`).toString('base64')))));
    expect(results).toHaveLength(8);
    const names = (await jsonOf(await b.invoke(op('list', { fileName: 'r' })))) as string[];
    for (let i = 0; i < 8; i++) expect(names).toContain(`par${i}.txt`);
  });

  it('an upload cut off by the server leaves the previous file intact, and its temporary file is removed after reconnecting', async () => {
    await b.invoke(op('create', { fileName: 'cut/file.bin' }, Buffer.from('previous version').toString('base64')));
    const big = binary(60 * 1024 * 1024, 3).toString('base64');
    const upload = b.invoke(op('create', { fileName: 'cut/file.bin' }, big)).then(
      () => 'done',
      (e: unknown) => e,
    );
    const temps = async () => (await readdir(join(s.root, 'cut'))).filter((n) => n.includes('.rt-upload-'));
    // cut the server off while the temporary file is being written
    await expect.poll(temps, { interval: 2, timeout: 10_000 }).toHaveLength(1);
    await s.stop();
    const outcome = await upload;
    expect(outcome).toBeInstanceOf(ApiError);
    expect((outcome as ApiError).status).toBe(500);
    expect((await readFile(join(s.root, 'cut/file.bin'))).toString()).toBe('previous version');
    expect(await temps()).toHaveLength(1); // left behind: the connection died before it could be removed
    await s.start();
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'cut' })))).toEqual(['file.bin']);
    await expect.poll(temps, { timeout: 5000 }).toHaveLength(0);
  });

  it('a server that is down gives a clear 500 quickly, and service resumes when it is back', async () => {
    await s.stop();
    const t0 = Date.now();
    const e = await b.invoke(op('list')).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(500);
    expect((e as ApiError).errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
    expect((e as ApiError).message).toMatch(/cannot connect to the SFTP server at 127\.0\.0\.1:\d+: connection refused/);
    expect(Date.now() - t0).toBeLessThan(CONNECT_TIMEOUT_MS);
    await expect(b.ping()).rejects.toThrow(/connection refused/);
    await s.start();
    await b.ping();
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'r' })))).toContain('one.txt');
  });
});
