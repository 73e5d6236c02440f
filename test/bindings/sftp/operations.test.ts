/**
 * bindings.sftp operations called directly on the component, against a real OpenSSH sshd;
 * content is read back with the real `sftp` client.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../../sidecar/src/http/errors.ts';
import type { SftpBinding } from '../../../sidecar/src/components/bindings/sftp/index.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, binary, bytesOf, initBinding, jsonOf, op, sshdAvailable } from './helpers.ts';

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ApiError);
  return e as ApiError;
}

describe.skipIf(!sshdAvailable)('bindings.sftp operations (real sshd)', () => {
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

  it('lists its operations and the OUTPUT_BINDING capability', () => {
    expect(b.operations().sort()).toEqual(['create', 'delete', 'get', 'list']);
    expect(b.capabilities()).toEqual(['OUTPUT_BINDING']);
  });

  it('create writes the decoded bytes, makes parent folders, answers {fileName}; the sftp client reads the same bytes', async () => {
    const content = binary(70_000, 7);
    const res = await b.invoke(op('create', { fileName: 'in/deep/folder/data.bin' }, content.toString('base64')));
    expect(res.contentType).toBe('application/json');
    expect(await jsonOf(res)).toEqual({ fileName: 'in/deep/folder/data.bin' });
    const local = join(s.dir, 'readback.bin');
    await s.sftpBatch([`get ${s.root}/in/deep/folder/data.bin ${local}`]);
    expect((await readFile(local)).equals(content)).toBe(true);
  });

  it('get streams the file back byte for byte (every byte value, empty file, many chunks)', async () => {
    for (const [name, content] of [
      ['bytes.bin', Buffer.from(Array.from({ length: 256 }, (_, i) => i))],
      ['empty.txt', Buffer.alloc(0)],
      ['multi.bin', binary(3 * 1024 * 1024 + 17, 3)],
    ] as const) {
      await b.invoke(op('create', { fileName: name }, content.toString('base64')));
      const res = await b.invoke(op('get', { fileName: name }));
      expect(res.contentType).toBe('application/octet-stream');
      const got = await bytesOf(res);
      expect(got.length).toBe(content.length);
      expect(got.equals(content)).toBe(true);
    }
  });

  it('create without data makes an empty file; data as bytes is read as the base64 text', async () => {
    await b.invoke(op('create', { fileName: 'nodata.txt' }));
    expect(await readFile(join(s.root, 'nodata.txt'))).toHaveLength(0);
    await b.invoke(op('create', { fileName: 'bytes.txt' }, Buffer.from(Buffer.from('via bytes').toString('base64'))));
    expect(await readFile(join(s.root, 'bytes.txt'), 'utf8')).toBe('via bytes');
  });

  it('get reads a file written by the sftp client', async () => {
    const src = join(s.dir, 'from-client.bin');
    const content = binary(300_000, 11);
    await writeFile(src, content);
    await s.sftpBatch([`put ${src} ${s.root}/from-client.bin`]);
    expect((await bytesOf(await b.invoke(op('get', { fileName: 'from-client.bin' })))).equals(content)).toBe(true);
  });

  it('create replaces an existing file whole and leaves no temporary files', async () => {
    await b.invoke(op('create', { fileName: 'replace/me.txt' }, Buffer.from('a much longer first version').toString('base64')));
    await b.invoke(op('create', { fileName: 'replace/me.txt' }, Buffer.from('v2').toString('base64')));
    expect((await bytesOf(await b.invoke(op('get', { fileName: 'replace/me.txt' })))).toString()).toBe('v2');
    expect(await readdir(join(s.root, 'replace'))).toEqual(['me.txt']);
  });

  it('list answers names, folders with a trailing "/", sorted; fileName picks a folder below the root', async () => {
    await mkdir(join(s.root, 'listing/sub/inner'), { recursive: true });
    await writeFile(join(s.root, 'listing/b.txt'), 'b');
    await writeFile(join(s.root, 'listing/a.txt'), 'a');
    await writeFile(join(s.root, 'listing/sub/c.txt'), 'c');
    await s.own(join(s.root, 'listing'));
    await b.invoke(op('create', { fileName: 'listing/d.txt' }, ''));
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'listing' })))).toEqual(['a.txt', 'b.txt', 'd.txt', 'sub/']);
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'listing/sub/' })))).toEqual(['c.txt', 'inner/']);
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'listing/sub/inner' })))).toEqual([]);
    const root = (await jsonOf(await b.invoke(op('list')))) as string[];
    expect(root).toContain('listing/');
    expect(await jsonOf(await b.invoke(op('list', { fileName: '.' })))).toEqual(root);
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'listing/..' })))).toEqual(root);
  });

  it('delete removes the file (no response body), and the sftp client no longer finds it', async () => {
    await b.invoke(op('create', { fileName: 'gone.txt' }, Buffer.from('x').toString('base64')));
    const res = await b.invoke(op('delete', { fileName: 'gone.txt' }));
    expect(res.data).toBeUndefined();
    await expect(s.sftpBatch([`ls ${s.root}/gone.txt`])).rejects.toThrow(/not found/i);
  });

  it('a missing file is an error that says so (get, delete, list of a missing folder)', async () => {
    for (const [operation, fileName] of [
      ['get', 'nope.txt'],
      ['delete', 'nope.txt'],
      ['list', 'no-such-folder'],
    ]) {
      const e = await rejection(b.invoke(op(operation, { fileName })));
      expect(e.status).toBe(500);
      expect(e.errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
      expect(e.message).toMatch(/does not exist/);
      expect(e.message).toContain(fileName);
      expect(JSON.stringify(e.details)).toContain('SFTP_FILE_NOT_FOUND');
    }
  });

  it('get, delete and create of a folder say it is a folder, and leave it as it was', async () => {
    await mkdir(join(s.root, 'a-folder'), { recursive: true });
    await s.own(join(s.root, 'a-folder'));
    await writeFile(join(s.root, 'a-folder', 'inside.txt'), 'kept');
    await s.own(join(s.root, 'a-folder', 'inside.txt'));
    for (const [operation, data] of [['get'], ['delete'], ['create', Buffer.from('x').toString('base64')]]) {
      const e = await rejection(b.invoke(op(operation!, { fileName: 'a-folder' }, data)));
      expect(e.status).toBe(500);
      expect(e.message).toMatch(/is a directory/);
      expect(JSON.stringify(e.details)).toContain('SFTP_IS_DIRECTORY');
    }
    expect(await readFile(join(s.root, 'a-folder', 'inside.txt'), 'utf8')).toBe('kept');
    expect((await readdir(s.root)).filter((f) => f.includes('rt-upload'))).toEqual([]);
  });

  it('bad requests are 400 with a clear message, and nothing is written', async () => {
    const before = await readdir(s.root, { recursive: true });
    const cases: [ReturnType<typeof op>, RegExp][] = [
      [op('create', {}, 'QQ=='), /needs metadata.fileName/],
      [op('get', {}), /needs metadata.fileName/],
      [op('delete', { fileName: '' }), /needs metadata.fileName/],
      [op('create', { fileName: 'x.txt' }, { not: 'a string' }), /base64 string/],
      [op('create', { fileName: 'x.txt' }, 42), /base64 string/],
      [op('create', { fileName: 'x.txt' }, Buffer.from([0xff, 0xfe, 0x41, 0x41])), /standard base64/],
      [op('create', { fileName: 'x.txt' }, 'not base64!'), /standard base64/],
      [op('create', { fileName: 'x.txt' }, 'QUJD\nQUJD'), /standard base64/],
      [op('create', { fileName: 'x.txt' }, 'QUJ'), /multiple of 4/],
      [op('create', { fileName: 'x.txt' }, 'QQ==QUJD'), /standard base64/],
      [op('create', { fileName: 'x.txt' }, 'ab-_'), /URL-safe/],
      [op('create', { fileName: 'dir/' }, 'QQ=='), /ends with "\/"/],
      [op('get', { fileName: 'in/' }), /get needs a file name, not a folder/],
      [op('delete', { fileName: 'in/deep/' }), /ends with "\/"/],
      [op('create', { fileName: '../escape.txt' }, 'QQ=='), /outside the binding's rootPath/],
      [op('create', { fileName: 'a/../../escape.txt' }, 'QQ=='), /outside/],
      [op('create', { fileName: '/etc/passwd' }, 'QQ=='), /absolute/],
      [op('get', { fileName: '../outside/secret' }), /outside/],
      [op('delete', { fileName: '..' }), /outside/],
      [op('list', { fileName: '../outside' }), /outside/],
      [op('list', { fileName: '/' }), /absolute/],
      [op('get', { fileName: 'a\0b' }), /NUL/],
      [op('delete', { fileName: '.' }), /rootPath itself/],
      [op('rename', { fileName: 'x' }), /not supported.*create, get, list, delete/],
    ];
    for (const [req, message] of cases) {
      const e = await rejection(b.invoke(req));
      expect(e.status, JSON.stringify(req)).toBe(400);
      expect(e.errorCode).toBe('ERR_MALFORMED_REQUEST');
      expect(e.message).toMatch(message);
    }
    expect(await readdir(s.root, { recursive: true })).toEqual(before);
  });

  it('create below something that is a file says so', async () => {
    await b.invoke(op('create', { fileName: 'plain.txt' }, 'QQ=='));
    const e = await rejection(b.invoke(op('create', { fileName: 'plain.txt/inner.txt' }, 'QQ==')));
    expect(e.status).toBe(500);
    expect(e.message).toMatch(/plain\.txt" exists and is not a directory/);
  });

  it('a file the user may not write is an error that says access was denied', async () => {
    await mkdir(join(s.root, 'locked'), { mode: 0o755 }); // owned by root
    const e = await rejection(b.invoke(op('create', { fileName: 'locked/x.txt' }, 'QQ==')));
    expect(e.status).toBe(500);
    expect(e.message).toMatch(/denied access to "locked\/x.txt"/);
  });

  it('runs many calls at once on one SSH connection', async () => {
    const accepted = () => (s.log().match(/Accepted (password|publickey)/g) ?? []).length;
    const before = accepted();
    const files = Array.from({ length: 24 }, (_, i) => ({ name: `concurrent/f${i}.bin`, content: binary(50_000 + i * 997, i + 1) }));
    await Promise.all(files.map((f) => b.invoke(op('create', { fileName: f.name }, f.content.toString('base64')))));
    const back = await Promise.all(files.map(async (f) => bytesOf(await b.invoke(op('get', { fileName: f.name })))));
    back.forEach((got, i) => expect(got.equals(files[i].content)).toBe(true));
    const listed = (await jsonOf(await b.invoke(op('list', { fileName: 'concurrent' })))) as string[];
    expect(listed).toHaveLength(24);
    await Promise.all(files.map((f) => b.invoke(op('delete', { fileName: f.name }))));
    expect(await jsonOf(await b.invoke(op('list', { fileName: 'concurrent' })))).toEqual([]);
    expect(accepted()).toBe(before);
  });

  it('concurrent creates of one file leave exactly one whole version and no temporary files', async () => {
    const versions = Array.from({ length: 10 }, (_, i) => binary(200_000 + i, i + 100));
    await Promise.all(versions.map((v) => b.invoke(op('create', { fileName: 'race/same.bin' }, v.toString('base64')))));
    const got = await readFile(join(s.root, 'race/same.bin'));
    expect(versions.some((v) => v.equals(got))).toBe(true);
    expect(await readdir(join(s.root, 'race'))).toEqual(['same.bin']);
  });

  it('a 40 MB file goes up and comes back intact', async () => {
    const content = binary(40 * 1024 * 1024, 99);
    await b.invoke(op('create', { fileName: 'large/40mb.bin' }, content.toString('base64')));
    const sha = (x: Buffer) => createHash('sha256').update(x).digest('hex');
    expect(sha(await readFile(join(s.root, 'large/40mb.bin')))).toBe(sha(content));
    expect(sha(await bytesOf(await b.invoke(op('get', { fileName: 'large/40mb.bin' }))))).toBe(sha(content));
  });
});
