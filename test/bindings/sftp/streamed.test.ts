/**
 * bindings.sftp create with the body streamed to the server as it arrives (a real sidecar's
 * HTTP API, a real sshd): metadata before or after the data, escapes, bad base64 deep in the
 * body, a bad fileName known only at the end, a client that leaves mid-upload. Files are read
 * back from the server's disk (the sshd is local).
 */
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../../sidecar/src/sidecar.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { binary, componentYaml, sshdAvailable } from './helpers.ts';

/** Every file below `dir`, relative, temporary upload files included. */
async function tree(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1)).sort();
}

describe.skipIf(!sshdAvailable)('bindings.sftp streamed create (real sshd)', () => {
  let s: SshdServer;
  let sidecar: Sidecar;
  let resources: string;
  let url: string;

  beforeAll(async () => {
    s = await startSshd();
    resources = await mkdtemp(join(tmpdir(), 'rt-sftp-stream-'));
    const md = { rootPath: s.root, address: s.address, username: s.username, password: s.password, hostPublicKey: s.hostKeys.ed25519 };
    await writeFile(join(resources, 'files.yaml'), componentYaml('files', md));
    sidecar = await startSidecar({ appId: 'sftp-stream', httpPort: 0, grpcPort: 0, resourcesPaths: [resources], logger: pino({ level: 'silent' }) });
    url = `http://127.0.0.1:${sidecar.httpPort}/v1.0/bindings/files`;
  });
  afterAll(async () => {
    await sidecar?.close();
    await s?.close();
    if (resources) await rm(resources, { recursive: true, force: true });
  });

  const post = (body: string | Buffer) => fetch(url, { method: 'POST', body });

  it('metadata after the data: the file lands at its name, made of the decoded data, nothing else left', async () => {
    const content = binary(3 * 1024 * 1024 + 7, 3);
    const res = await post(`{"operation":"create","data":"${content.toString('base64')}","metadata":{"fileName":"late/deep/a.bin"}}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ fileName: 'late/deep/a.bin' });
    expect((await readFile(join(s.root, 'late/deep/a.bin'))).equals(content)).toBe(true);
    expect(await tree(s.root)).not.toContainEqual(expect.stringMatching(/rt-upload/));
  });

  it('a create onto a folder says it is a folder, and leaves the folder and no temporary file', async () => {
    await mkdir(join(s.root, 'a-dir'), { recursive: true });
    await s.own(join(s.root, 'a-dir'));
    const res = await post(`{"operation":"create","data":"${binary(70 * 1024, 5).toString('base64')}","metadata":{"fileName":"a-dir"}}`);
    expect(res.status).toBe(500);
    const body = (await res.json()) as { message: string; details: unknown[] };
    expect(body.message).toMatch(/"a-dir" is a directory; create writes files only/);
    expect(JSON.stringify(body.details)).toContain('SFTP_IS_DIRECTORY');
    expect(await tree(s.root)).not.toContainEqual(expect.stringMatching(/rt-upload/));
  });

  it('metadata before the data, "/" escaped as "\\/" (as some encoders do), replacing a file', async () => {
    const old = Buffer.from('old content');
    await writeFile(join(s.root, 'early.bin'), old);
    const content = binary(512 * 1024 + 1, 9);
    const res = await post(`{"metadata":{"fileName":"early.bin"},"operation":"create","data":"${content.toString('base64').replaceAll('/', '\\/')}"}`);
    expect(res.status).toBe(200);
    expect((await readFile(join(s.root, 'early.bin'))).equals(content)).toBe(true);
  });

  it('bad base64 deep in the body, or a bad fileName after the data: 400, the old file intact, no temporary file', async () => {
    const old = Buffer.from('keep me');
    await writeFile(join(s.root, 'keep.bin'), old);
    const b64 = binary(2 * 1024 * 1024, 4).toString('base64');
    const cases: [string, RegExp][] = [
      [`{"operation":"create","data":"${b64.slice(0, 2_000_000)}*${b64.slice(2_000_001)}","metadata":{"fileName":"keep.bin"}}`, /standard base64.*near position/],
      [`{"operation":"create","data":"${b64.slice(0, 1_500_000)}-${b64.slice(1_500_001)}","metadata":{"fileName":"keep.bin"}}`, /URL-safe/],
      [`{"operation":"create","data":"${b64}","metadata":{"fileName":"../outside/x.bin"}}`, /outside the binding's rootPath/],
      [`{"operation":"create","data":"${b64}","metadata":{"fileName":"dir/"}}`, /ends with "\/"/],
      [`{"operation":"create","data":"${b64}"}`, /needs metadata.fileName/],
      [`{"operation":"create","data":"${b64}","metadata":{"fileName":7}}`, /metadata.fileName" must be a string/],
      [`{"operation":"create","data":"${b64}","data":"QQ==","metadata":{"fileName":"keep.bin"}}`, /"data" appears twice/],
      [`{"operation":"create","data":"${b64}","metadata":{"fileName":"keep.bin"}`, /not valid JSON/],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      expect(res.status, message.source).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(message);
    }
    expect(await readFile(join(s.root, 'keep.bin'))).toEqual(old);
    expect(await tree(s.root)).not.toContainEqual(expect.stringMatching(/rt-upload/));
    expect(await readdir(s.outside)).toEqual([]);
  });

  it('operation after the data is not streamed, and still works', async () => {
    const res = await post(`{"data":"${Buffer.from('late op').toString('base64')}","metadata":{"fileName":"op-late.txt"},"operation":"create"}`);
    expect(res.status).toBe(200);
    expect(await readFile(join(s.root, 'op-late.txt'), 'utf8')).toBe('late op');
  });

  it('a client that leaves mid-upload leaves no temporary file, and the sidecar keeps answering', async () => {
    const head = Buffer.from('{"operation":"create","data":"');
    const req = httpRequest(url, { method: 'POST', headers: { 'content-length': String(64 * 1024 * 1024) } });
    req.on('error', () => undefined);
    req.write(head);
    for (let i = 0; i < 16; i++) req.write(Buffer.alloc(256 * 1024, 0x41));
    // mid-upload: its temporary file is on the server
    await expect.poll(async () => (await tree(s.root)).filter((f) => f.includes('rt-upload')), { timeout: 10_000, interval: 20 }).not.toEqual([]);
    req.destroy();
    await expect.poll(async () => (await tree(s.root)).filter((f) => f.includes('rt-upload')), { timeout: 5000 }).toEqual([]);
    const res = await post(`{"operation":"create","data":"QUJD","metadata":{"fileName":"after.txt"}}`);
    expect(res.status).toBe(200);
    expect(await readFile(join(s.root, 'after.txt'), 'utf8')).toBe('ABC');
  });
});
