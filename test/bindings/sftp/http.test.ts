/**
 * bindings.sftp through the HTTP API of a real sidecar (component loaded from a resources
 * folder), against a real sshd; files are read back with the real `sftp` client.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../../sidecar/src/sidecar.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { binary, componentYaml, sshdAvailable } from './helpers.ts';

/** How many open file descriptors, in any process, point at `path` (we run as root). */
async function processesHolding(path: string): Promise<number> {
  let n = 0;
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')) === path) n++;
    }
  }
  return n;
}

describe.skipIf(!sshdAvailable)('bindings.sftp over the sidecar HTTP API (real sshd)', () => {
  let s: SshdServer;
  let sidecar: Sidecar;
  let resources: string;
  let base: string;

  beforeAll(async () => {
    s = await startSshd();
    resources = await mkdtemp(join(tmpdir(), 'rt-sftp-res-'));
    await writeFile(
      join(resources, 'files.yaml'),
      componentYaml('files', { rootPath: s.root, address: s.address, username: s.username, privateKey: s.keys.ed25519.path, knownHostsFile: s.knownHostsFile }),
    );
    sidecar = await startSidecar({ appId: 'sftp-http', httpPort: 0, grpcPort: 0, resourcesPaths: [resources], logger: pino({ level: 'silent' }) });
    base = `http://127.0.0.1:${sidecar.httpPort}`;
  });
  afterAll(async () => {
    await sidecar?.close();
    await s?.close();
    if (resources) await rm(resources, { recursive: true, force: true });
  });

  const invoke = (body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(`${base}/v1.0/bindings/files`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('metadata lists the component with OUTPUT_BINDING', async () => {
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: unknown[] };
    expect(md.components).toContainEqual({ name: 'files', type: 'bindings.sftp', version: 'v1', capabilities: ['OUTPUT_BINDING'] });
  });

  it('create → 200 {fileName}; get → the bytes; list → names; delete → 204; the sftp client agrees', async () => {
    const content = binary(123_457, 5);
    let res = await invoke({ operation: 'create', data: content.toString('base64'), metadata: { fileName: 'http/sub/file.bin' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(await res.json()).toEqual({ fileName: 'http/sub/file.bin' });

    const local = join(s.dir, 'http-readback.bin');
    await s.sftpBatch([`get ${s.root}/http/sub/file.bin ${local}`]);
    expect((await readFile(local)).equals(content)).toBe(true);

    res = await invoke({ operation: 'get', metadata: { fileName: 'http/sub/file.bin' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await res.arrayBuffer()).equals(content)).toBe(true);

    res = await invoke({ operation: 'list', metadata: { fileName: 'http' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(['sub/']);
    res = await invoke({ operation: 'list' });
    expect(await res.json()).toContain('http/');

    res = await invoke({ operation: 'delete', metadata: { fileName: 'http/sub/file.bin' } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect(await (await invoke({ operation: 'list', metadata: { fileName: 'http/sub' } })).json()).toEqual([]);
  });

  it('takes the JSON body whatever the Content-Type says (or without one)', async () => {
    const data = Buffer.from('typed').toString('base64');
    for (const headers of [{ 'content-type': 'text/plain' }, { 'content-type': 'application/octet-stream' }, {} as Record<string, string>]) {
      const res = await invoke({ operation: 'create', data, metadata: { fileName: 'ct.txt' } }, headers);
      expect(res.status, JSON.stringify(headers)).toBe(200);
    }
  });

  it('answers bad requests with 400 JSON errors and touches nothing', async () => {
    const before = await s.sftpBatch([`ls -1a ${s.dir}`, `ls -1a ${s.outside}`]);
    const cases: [unknown, RegExp][] = [
      [{ operation: 'create', data: 'QQ==', metadata: { fileName: '../outside/x.txt' } }, /outside the binding's rootPath/],
      [{ operation: 'create', data: 'QQ==', metadata: { fileName: '/tmp/x.txt' } }, /absolute/],
      [{ operation: 'get', metadata: { fileName: 'a\u0000b' } }, /NUL/],
      [{ operation: 'list', metadata: { fileName: '../..' } }, /outside/],
      [{ operation: 'delete', metadata: { fileName: 'x/../../root' } }, /outside/],
      [{ operation: 'create', data: '%%%%', metadata: { fileName: 'x.txt' } }, /standard base64/],
      [{ operation: 'create', data: { file: 'content' }, metadata: { fileName: 'x.txt' } }, /base64 string/],
      [{ operation: 'get' }, /needs metadata.fileName/],
      [{ operation: 'move', metadata: { fileName: 'x' } }, /does not support operation "move"; supported: create, get, list, delete/],
      [{ data: 'x' }, /body member operation is required/],
      [{ operation: 'get', metadata: { fileName: 1 } }, /body member metadata\.fileName must be a string/],
      ['{"operation": "get", ', /not valid JSON/],
      ['[1,2]', /the request body must be an object: send a JSON object/],
      ['', /the request body is empty: send a JSON object/],
    ];
    for (const [body, message] of cases) {
      const res = await invoke(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const err = (await res.json()) as { errorCode: string; message: string; details: unknown[] };
      expect(err.errorCode).toMatch(/^ERR_/);
      expect(err.message).toMatch(message);
      expect(Array.isArray(err.details)).toBe(true);
    }
    expect(await s.sftpBatch([`ls -1a ${s.dir}`, `ls -1a ${s.outside}`])).toBe(before);
  });

  it('a missing file is a 500 ERR_INVOKE_OUTPUT_BINDING that says it does not exist', async () => {
    const res = await invoke({ operation: 'get', metadata: { fileName: 'missing.txt' } });
    expect(res.status).toBe(500);
    const err = (await res.json()) as { errorCode: string; message: string; details: { reason: string }[] };
    expect(err.errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
    expect(err.message).toMatch(/file "missing.txt" does not exist below rootPath/);
    expect(err.details[0].reason).toBe('SFTP_FILE_NOT_FOUND');
  });

  it('a 100 MB file goes up as base64 JSON and comes back streamed, intact', async () => {
    const content = binary(100 * 1024 * 1024, 42);
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    const body = JSON.stringify({ operation: 'create', data: content.toString('base64'), metadata: { fileName: 'big/100mb.bin' } });
    let res = await invoke(body);
    expect(res.status).toBe(200);
    res = await invoke({ operation: 'get', metadata: { fileName: 'big/100mb.bin' } });
    expect(res.status).toBe(200);
    const hash = createHash('sha256');
    let n = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      n += chunk.length;
    }
    expect(n).toBe(content.length);
    expect(hash.digest('hex')).toBe(sha(content));
  }, 60_000);

  it('a client that stops reading a download mid-way does not disturb later calls', async () => {
    const content = binary(8 * 1024 * 1024, 8);
    await invoke({ operation: 'create', data: content.toString('base64'), metadata: { fileName: 'abort.bin' } });
    for (let i = 0; i < 5; i++) {
      const ac = new AbortController();
      const res = await fetch(`${base}/v1.0/bindings/files`, { method: 'POST', body: JSON.stringify({ operation: 'get', metadata: { fileName: 'abort.bin' } }), signal: ac.signal });
      const reader = res.body!.getReader();
      await reader.read();
      ac.abort();
      await reader.closed.catch(() => undefined);
    }
    const res = await invoke({ operation: 'get', metadata: { fileName: 'abort.bin' } });
    expect(Buffer.from(await res.arrayBuffer()).equals(content)).toBe(true);
    // every remote handle was closed: no sshd process holds the file open any more
    await expect.poll(() => processesHolding(`${s.root}/abort.bin`), { timeout: 5000 }).toBe(0);
  });

  it('a sidecar whose SFTP component cannot verify the server does not start, and says why', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rt-sftp-res-bad-'));
    try {
      await writeFile(join(dir, 'bad.yaml'), componentYaml('bad', { rootPath: s.root, address: s.address, username: s.username, password: s.password, hostPublicKey: s.strangerKey.publicKey }));
      await expect(startSidecar({ appId: 'bad', httpPort: 0, grpcPort: 0, resourcesPaths: [dir], logger: pino({ level: 'silent' }) })).rejects.toThrow(
        /component "bad" \(bindings.sftp\/v1.*host key verification failed/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
