/**
 * The cryptography API of a real (in-process) sidecar with crypto.dapr.localstorage and
 * crypto.dapr.jwks: HTTP PUT /v1.0-alpha1/crypto/<component>/encrypt|decrypt with the reference's
 * headers, gRPC EncryptAlpha1 / DecryptAlpha1 raw and through the @dapr/dapr SDK (as its own e2e
 * suite calls it): every cipher × key-wrap round-trips, a reference-made document decrypts, the
 * errors of each surface (codes as the reference names them, 4xx for the caller's faults),
 * a document altered past its first segment is cut off rather than answered, and a property:
 * any body sent to decrypt is a 4xx JSON error or a plaintext, never a 5xx.
 */
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SEGMENT_SIZE } from '../../sidecar/src/crypto/scheme.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';
import { chunked, collect } from './chunks.ts';

const VECTORS = join(import.meta.dirname, 'vectors');
const PLAIN = Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 7) % 251));
const SDK_JWKS = JSON.stringify({ keys: [{ kid: 'symmetric256', kty: 'oct', k: 'RjJPhQzsDB5dvjQZ-85l_D_SBXWCBFx7IVsesenVvts' }] });

interface ErrorBody {
  errorCode: string;
  message: string;
}

let s: RuntimeSidecar;
let dir: string;
let base: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-crypto-api-'));
  await cp(join(VECTORS, 'keys'), join(dir, 'keys'), { recursive: true });
  s = await startRuntimeSidecar({
    extraComponents: [componentYaml('localkeys', 'crypto.dapr.localstorage', { path: join(dir, 'keys') }), componentYaml('crypto-local', 'crypto.dapr.jwks', { jwks: SDK_JWKS })],
  });
  base = `http://127.0.0.1:${s.sidecar.httpPort}/v1.0-alpha1/crypto`;
});

afterAll(async () => {
  await s?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** PUT with the body streamed in chunks. */
function put(path: string, body: Buffer, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}/${path}`, { method: 'PUT', headers, body: Readable.toWeb(Readable.from(chunked(body, 20_000))) as ReadableStream, duplex: 'half' } as RequestInit);
}

describe('HTTP', () => {
  for (const cipher of ['AES-GCM', 'CHACHA20-POLY1305']) {
    for (const [key, alg] of [
      ['aes256.bin', 'A256KW'],
      ['rsa.pem', 'RSA-OAEP-256'],
    ]) {
      it(`${cipher} × ${alg}: encrypt then decrypt, streamed`, async () => {
        const enc = await put('localkeys/encrypt', PLAIN, { 'dapr-key-name': key, 'dapr-key-wrap-algorithm': alg.toLowerCase(), 'dapr-data-encryption-cipher': cipher });
        expect(enc.status).toBe(200);
        expect(enc.headers.get('content-type')).toBe('application/octet-stream');
        const doc = Buffer.from(await enc.arrayBuffer());
        expect(doc.subarray(0, 15).toString()).toBe('dapr.io/enc/v1\n');
        const dec = await put('localkeys/decrypt', doc);
        expect(dec.status).toBe(200);
        expect(Buffer.from(await dec.arrayBuffer()).equals(PLAIN)).toBe(true);
      });
    }
  }

  it('a document made by the reference decrypts; dapr-key-name overrides the header; omit / decryption key name as the reference writes them', async () => {
    const ref = await readFile(join(VECTORS, 'ref-chacha20-poly1305-rsa-oaep-256.enc'));
    expect(Buffer.from(await (await put('localkeys/decrypt', ref)).arrayBuffer()).equals(PLAIN)).toBe(true);
    const omitted = Buffer.from(await (await put('localkeys/encrypt', Buffer.from('x'), { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES', 'dapr-omit-decryption-key-name': 'yes' })).arrayBuffer());
    expect(omitted.toString('latin1').split('\n')[1]).not.toContain('"k"');
    const noName = await put('localkeys/decrypt', omitted);
    expect(noName.status).toBe(400);
    expect(((await noName.json()) as ErrorBody).message).toMatch(/does not contain a key name/);
    expect(await (await put('localkeys/decrypt', omitted, { 'dapr-key-name': 'aes256.bin' })).text()).toBe('x');
    const named = Buffer.from(await (await put('localkeys/encrypt', Buffer.from('y'), { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES', 'dapr-decryption-key-name': 'other' })).arrayBuffer());
    expect(named.toString('latin1').split('\n')[1]).toContain('"k":"other"');
  });

  it('an empty body encrypts to a header only, which decrypts to nothing', async () => {
    const enc = await fetch(`${base}/localkeys/encrypt`, { method: 'PUT', headers: { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'A256KW' } });
    const doc = Buffer.from(await enc.arrayBuffer());
    expect(doc.toString('latin1').split('\n')).toHaveLength(4);
    const dec = await put('localkeys/decrypt', doc);
    expect(dec.status).toBe(200);
    expect((await dec.arrayBuffer()).byteLength).toBe(0);
  });

  it('errors: codes as the reference names them, 400 with JSON', async () => {
    const cases: [string, Record<string, string>, Buffer, string, RegExp][] = [
      ['localkeys/encrypt', { 'dapr-key-wrap-algorithm': 'AES' }, PLAIN, 'ERR_BAD_REQUEST', /missing property 'keyName'/],
      ['localkeys/encrypt', { 'dapr-key-name': 'aes256.bin' }, PLAIN, 'ERR_BAD_REQUEST', /'keyWrapAlgorithm'/],
      ['nosuch/encrypt', { 'dapr-key-name': 'k', 'dapr-key-wrap-algorithm': 'AES' }, PLAIN, 'ERR_CRYPTO_PROVIDER_NOT_FOUND', /crypto provider nosuch not found; loaded crypto providers: crypto-local, localkeys/],
      ['localkeys/encrypt', { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'ECDH-ES+A256KW' }, PLAIN, 'ERR_CRYPTO', /key wrap algorithm "ECDH-ES\+A256KW" is not supported/],
      ['localkeys/encrypt', { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'A128CBC-NOPAD' }, PLAIN, 'ERR_CRYPTO', /failed to wrap the file key: unsupported algorithm/],
      ['localkeys/encrypt', { 'dapr-key-name': '../etc', 'dapr-key-wrap-algorithm': 'AES' }, PLAIN, 'ERR_CRYPTO', /invalid key name/],
      ['localkeys/encrypt', { 'dapr-key-name': 'nokey', 'dapr-key-wrap-algorithm': 'AES' }, PLAIN, 'ERR_CRYPTO', /key 'nokey' not found/],
      ['localkeys/encrypt', { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES', 'dapr-data-encryption-cipher': 'rc4' }, PLAIN, 'ERR_CRYPTO', /cipher "rc4" is not supported/],
      ['localkeys/decrypt', {}, PLAIN, 'ERR_CRYPTO', /unsupported scheme/],
      ['localkeys/decrypt', {}, Buffer.alloc(0), 'ERR_CRYPTO', /scheme name not found/],
    ];
    for (const [path, headers, body, code, message] of cases) {
      const r = await put(path, body, headers);
      expect(r.status, `${path} ${JSON.stringify(headers)}`).toBe(400);
      const b = (await r.json()) as ErrorBody;
      expect(b.errorCode).toBe(code);
      expect(b.message).toMatch(message);
    }
  });

  it('a wrong key, or an altered first segment: 400 before any plaintext; altered further on: the answer is cut off', async () => {
    const doc = Buffer.from(await (await put('localkeys/encrypt', PLAIN, { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES' })).arrayBuffer());
    const wrongKey = await put('localkeys/decrypt', doc, { 'dapr-key-name': 'rsa.pem' });
    expect(wrongKey.status).toBe(400);
    expect(((await wrongKey.json()) as ErrorBody).message).toMatch(/signature/);
    const header = doc.indexOf('\n', doc.indexOf('\n', doc.indexOf('\n') + 1) + 1) + 1;
    const first = Buffer.from(doc);
    first[header + 10] ^= 1;
    const r1 = await put('localkeys/decrypt', first);
    expect(r1.status).toBe(400);
    expect(((await r1.json()) as ErrorBody).message).toMatch(/failed to decrypt segment 0/);
    const later = Buffer.from(doc);
    later[header + SEGMENT_SIZE + 16 + 10] ^= 1;
    const r2 = await put('localkeys/decrypt', later);
    expect(r2.status).toBe(200);
    const got: Buffer[] = [];
    await expect(
      (async () => {
        for await (const c of r2.body as unknown as AsyncIterable<Uint8Array>) got.push(Buffer.from(c));
      })(),
    ).rejects.toThrow();
    const received = Buffer.concat(got);
    expect(received.length).toBeLessThanOrEqual(SEGMENT_SIZE);
    expect(received.equals(PLAIN.subarray(0, received.length))).toBe(true);
  });

  it('a client that goes away mid-answer leaves the sidecar serving', async () => {
    const abort = new AbortController();
    const endless = Readable.from(
      (async function* () {
        for (;;) yield Buffer.alloc(64 * 1024, 1);
      })(),
    );
    const r = await fetch(`${base}/localkeys/encrypt`, { method: 'PUT', headers: { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES' }, body: Readable.toWeb(endless) as ReadableStream, duplex: 'half', signal: abort.signal } as RequestInit);
    const reader = r.body!.getReader();
    await reader.read();
    abort.abort();
    endless.destroy();
    const ok = await put('localkeys/encrypt', Buffer.from('after'), { 'dapr-key-name': 'aes256.bin', 'dapr-key-wrap-algorithm': 'AES' });
    expect(await (await put('localkeys/decrypt', Buffer.from(await ok.arrayBuffer()))).text()).toBe('after');
  });

  it('a sidecar with no crypto component: ERR_CRYPTO_PROVIDERS_NOT_CONFIGURED, 400 over HTTP and INVALID_ARGUMENT over gRPC', async () => {
    const bare = await startRuntimeSidecar();
    try {
      const r = await fetch(`http://127.0.0.1:${bare.sidecar.httpPort}/v1.0-alpha1/crypto/any/decrypt`, { method: 'PUT', body: 'x' });
      expect(r.status).toBe(400);
      expect(((await r.json()) as ErrorBody).errorCode).toBe('ERR_CRYPTO_PROVIDERS_NOT_CONFIGURED');
      const call = (bare.client as unknown as Record<string, () => Duplex>).DecryptAlpha1.call(bare.client);
      const e = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
      call.write({ options: { component_name: 'any' } });
      call.end();
      expect((await e).metadata.get('rt-error-code')).toEqual(['ERR_CRYPTO_PROVIDERS_NOT_CONFIGURED']);
      expect((await e).code).toBe(grpc.status.INVALID_ARGUMENT);
    } finally {
      await bare.stop();
    }
  });

  it('a property: any body sent to decrypt is a 400 JSON error, never a 5xx', async () => {
    const prefix = fc.constantFrom('', 'dapr.io/enc/v1\n', 'dapr.io/enc/v1\n{"k":"aes256.bin","kw":1,"wfk":"AAAA","cph":1,"np":"AAAAAAAAAA=="}\n');
    await fc.assert(
      fc.asyncProperty(prefix, fc.uint8Array({ maxLength: 300 }), async (p, tail) => {
        const r = await put('localkeys/decrypt', Buffer.concat([Buffer.from(p), Buffer.from(tail)]));
        expect(r.status).toBe(400);
        expect(((await r.json()) as ErrorBody).errorCode).toBe('ERR_CRYPTO');
      }),
      { numRuns: 60 },
    );
  });
});

type Duplex = grpc.ClientDuplexStream<Record<string, unknown>, { payload: { data: Buffer; seq: number } | null }>;

/** A raw bidi call: sends the messages, returns the joined output (or the error) and the seqs seen. */
async function stream(method: 'EncryptAlpha1' | 'DecryptAlpha1', messages: Record<string, unknown>[]): Promise<{ data: Buffer; seqs: number[] }> {
  const call = (s.client as unknown as Record<string, () => Duplex>)[method].call(s.client);
  const out: Buffer[] = [];
  const seqs: number[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on('data', (m) => {
      if (m.payload) {
        out.push(Buffer.from(m.payload.data));
        seqs.push(Number(m.payload.seq));
      }
    });
    call.on('error', reject);
    call.on('end', resolve);
  });
  for (const m of messages) call.write(m);
  call.end();
  await done;
  return { data: Buffer.concat(out), seqs };
}

function messagesOf(options: Record<string, unknown>, body: Buffer, size = 30_000): Record<string, unknown>[] {
  const msgs: Record<string, unknown>[] = [{ options }];
  for (let i = 0, seq = 0; i < body.length; i += size, seq++) msgs.push({ payload: { data: body.subarray(i, i + size), seq } });
  return msgs;
}

describe('gRPC', () => {
  it('raw EncryptAlpha1 / DecryptAlpha1: every cipher × key wrap, output numbered from 0', async () => {
    for (const cipher of ['AES-GCM', 'chacha20-poly1305']) {
      for (const [key, alg] of [
        ['aes256.bin', 'AES'],
        ['rsa.pem', 'RSA'],
      ]) {
        const enc = await stream('EncryptAlpha1', messagesOf({ component_name: 'localkeys', key_name: key, key_wrap_algorithm: alg, data_encryption_cipher: cipher }, PLAIN));
        expect(enc.seqs).toEqual(enc.seqs.map((_, i) => i));
        const dec = await stream('DecryptAlpha1', messagesOf({ component_name: 'localkeys' }, enc.data, 7000));
        expect(dec.data.equals(PLAIN)).toBe(true);
      }
    }
  });

  it('errors: INVALID_ARGUMENT with the reference\'s codes', async () => {
    const fails = async (method: 'EncryptAlpha1' | 'DecryptAlpha1', msgs: Record<string, unknown>[]) => {
      const e = (await stream(method, msgs).then(
        () => undefined,
        (err: grpc.ServiceError) => err,
      ))!;
      expect(e, JSON.stringify(msgs).slice(0, 200)).toBeDefined();
      return { code: e.code, errorCode: e.metadata.get('rt-error-code')[0], details: e.details };
    };
    const opts = { component_name: 'localkeys', key_name: 'aes256.bin', key_wrap_algorithm: 'A256KW' };
    expect(await fails('EncryptAlpha1', [{ payload: { data: Buffer.from('x'), seq: 0 } }])).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, errorCode: 'ERR_BAD_REQUEST', details: expect.stringMatching(/first message does not contain the required options/) });
    expect(await fails('EncryptAlpha1', [{ options: { ...opts, key_name: '' } }])).toMatchObject({ errorCode: 'ERR_BAD_REQUEST', details: expect.stringMatching(/keyName/) });
    expect(await fails('EncryptAlpha1', [{ options: { ...opts, component_name: 'nope' } }])).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, errorCode: 'ERR_CRYPTO_PROVIDER_NOT_FOUND' });
    expect(await fails('EncryptAlpha1', [{ options: opts, payload: { data: Buffer.from('a'), seq: 0 } }, { payload: { data: Buffer.from('b'), seq: 2 } }])).toMatchObject({
      errorCode: 'ERR_BAD_REQUEST',
      details: expect.stringMatching(/invalid sequence number received: 2 \(expected: 1\)/),
    });
    expect(await fails('EncryptAlpha1', [{ options: opts }, { options: opts, payload: { data: Buffer.from('b'), seq: 0 } }])).toMatchObject({ details: expect.stringMatching(/options found in non-leading message/) });
    expect(await fails('DecryptAlpha1', messagesOf({ component_name: 'localkeys' }, Buffer.from('not a document\n\n\n')))).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, errorCode: 'ERR_CRYPTO' });
  });

  it('no first message within 5 s: ERR_BAD_REQUEST, not a hang; a client that goes away mid-stream leaves the sidecar serving', async () => {
    const silent = (s.client as unknown as Record<string, () => Duplex>).EncryptAlpha1.call(s.client);
    const started = Date.now();
    const e = await new Promise<grpc.ServiceError>((resolve) => silent.on('error', resolve));
    expect(Date.now() - started).toBeGreaterThanOrEqual(4500);
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.metadata.get('rt-error-code')).toEqual(['ERR_BAD_REQUEST']);
    expect(e.details).toMatch(/no first message within 5 s/);

    // the service sees its input end when the client cancels, instead of waiting for a next message forever
    const crypto = s.sidecar.ctx.services.crypto!;
    const original = crypto.encrypt.bind(crypto);
    let inputClosed = false;
    crypto.encrypt = (req, source) =>
      original(
        req,
        (async function* () {
          try {
            yield* source;
          } finally {
            inputClosed = true;
          }
        })(),
      );
    const gone = (s.client as unknown as Record<string, () => Duplex>).EncryptAlpha1.call(s.client);
    gone.on('error', () => undefined);
    gone.write({ options: { component_name: 'localkeys', key_name: 'aes256.bin', key_wrap_algorithm: 'AES' }, payload: { data: PLAIN, seq: 0 } });
    await new Promise<void>((resolve) => gone.once('data', () => resolve()));
    gone.cancel();
    for (let i = 0; i < 50 && !inputClosed; i++) await new Promise((r) => setTimeout(r, 20));
    crypto.encrypt = original;
    expect(inputClosed).toBe(true);
    const after = await stream('EncryptAlpha1', messagesOf({ component_name: 'localkeys', key_name: 'aes256.bin', key_wrap_algorithm: 'AES' }, Buffer.from('still here')));
    expect((await stream('DecryptAlpha1', messagesOf({ component_name: 'localkeys' }, after.data))).data.toString()).toBe('still here');
  }, 15_000);

  it('the @dapr/dapr SDK over gRPC, as its e2e suite calls it (crypto.dapr.jwks, "symmetric256", A256KW / AES)', async () => {
    const client = s.sdk();
    const enc = (await client.crypto.encrypt(PLAIN, { componentName: 'crypto-local', keyName: 'symmetric256', keyWrapAlgorithm: 'A256KW' })) as Buffer;
    expect(enc.subarray(0, 15).toString('utf8')).toBe('dapr.io/enc/v1\n');
    expect(((await client.crypto.decrypt(enc, { componentName: 'crypto-local' })) as Buffer).equals(PLAIN)).toBe(true);
    const text = (await client.crypto.encrypt('hello, string', { componentName: 'crypto-local', keyName: 'symmetric256', keyWrapAlgorithm: 'AES' })) as Buffer;
    expect(((await client.crypto.decrypt(text, { componentName: 'crypto-local' })) as Buffer).toString()).toBe('hello, string');
    // as a stream, read slowly (the suite's backpressure case)
    const duplex = await client.crypto.encrypt({ componentName: 'crypto-local', keyName: 'symmetric256', keyWrapAlgorithm: 'AES' });
    const big = Buffer.concat(Array.from({ length: 20 }, () => PLAIN));
    const piped = Readable.from(chunked(big, 64 * 1024)).pipe(duplex);
    // the reader starts once answers wait unread past the stream's high-water mark
    await vi.waitFor(() => expect(piped.readableLength).toBeGreaterThan(piped.readableHighWaterMark), { timeout: 10_000, interval: 20 });
    const out = await collect(piped as AsyncIterable<Buffer>);
    expect(out.length).toBe(big.length + 16 * Math.ceil(big.length / SEGMENT_SIZE) + out.indexOf('\n', out.indexOf('\n', out.indexOf('\n') + 1) + 1) + 1);
    await client.stop().catch(() => undefined);
  });
});
