/**
 * Servers that stop answering: a frozen session (noticed by keepalives) and a port that accepts
 * TCP but never speaks SSH (the connect timeout). Both tests wait on timers, so they run at once.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SftpBinding } from '../../../sidecar/src/components/bindings/sftp/index.ts';
import { CONNECT_TIMEOUT_MS, KEEPALIVE_COUNT, KEEPALIVE_MS } from '../../../sidecar/src/components/bindings/sftp/connection.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, bytesOf, initBinding, jsonOf, op, sshdAvailable } from './helpers.ts';

describe.skipIf(!sshdAvailable)('bindings.sftp against servers that stop answering', () => {
  let s: SshdServer;
  let b: SftpBinding;
  let silent: Server;
  const sockets: Socket[] = [];
  let silentPort = 0;

  beforeAll(async () => {
    s = await startSshd();
    b = await initBinding(baseMetadata(s));
    // accepts TCP and then says nothing: no SSH banner, ever
    silent = createServer((sock) => sockets.push(sock));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    silentPort = (silent.address() as { port: number }).port;
  });
  afterAll(async () => {
    await b?.close();
    await s?.close();
    for (const sock of sockets) sock.destroy();
    if (silent) await new Promise((r) => silent.close(r));
  });

  it.concurrent('a frozen session is given up after the keepalives and the call is retried on a fresh one: it settles, never hangs', async () => {
    await b.invoke(op('create', { fileName: 'frozen.txt' }, Buffer.from('still here').toString('base64')));
    const thaw = s.freezeSessions();
    try {
      const t0 = Date.now();
      const outcome = await b.invoke(op('get', { fileName: 'frozen.txt' })).then(
        async (res) => (await bytesOf(res)).toString(),
        (e: unknown) => e,
      );
      expect(outcome).toBe('still here');
      expect(Date.now() - t0).toBeLessThan(KEEPALIVE_MS * (KEEPALIVE_COUNT + 2));
    } finally {
      thaw();
    }
    expect(await jsonOf(await b.invoke(op('list')))).toContain('frozen.txt');
  }, 40_000);

  it.concurrent(`a server that never speaks SSH fails the connect after ${CONNECT_TIMEOUT_MS / 1000} s with a clear message`, async () => {
    const t0 = Date.now();
    const e = (await initBinding({ rootPath: '/tmp', address: `127.0.0.1:${silentPort}`, username: 'u', password: 'p', insecureIgnoreHostKey: 'true' }).catch((x: Error) => x)) as Error;
    const took = Date.now() - t0;
    expect(e.message).toMatch(/did not complete the connection within 10 s/);
    expect(took).toBeGreaterThanOrEqual(CONNECT_TIMEOUT_MS - 500);
    expect(took).toBeLessThan(CONNECT_TIMEOUT_MS + 3000);
  }, 20_000);
});
