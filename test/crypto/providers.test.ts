/**
 * The local crypto providers with the format (components/crypto/, crypto/stream.ts):
 *  - documents made by the reference implementation (dapr/kit enc/v1) with real key wrapping,
 *    A256KW and RSA-OAEP-256 × AES-GCM and ChaCha20-Poly1305 (test/crypto/vectors/ref-*.enc),
 *    decrypt in rt with the same keys read by crypto.dapr.localstorage;
 *  - every cipher × key-wrap combination round-trips through both providers;
 *  - the reference's key checks (a JWK's alg / use / key_ops, key type and size), the algorithms
 *    refused (A*CBC-NOPAD, ECDH-ES), a wrong key;
 *  - localstorage keeps key names inside its folder (`..`, absolute paths, symlinks out);
 *  - crypto.dapr.jwks reads its set inline, as base64, from a file (again when it changes) and
 *    from an https URL served here with a certificate it must verify.
 */
import { createPublicKey, randomBytes, webcrypto } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile, cp } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { chunked, collect } from './chunks.ts';
import { factory as jwksFactory } from '../../sidecar/src/components/crypto/jwks/index.ts';
import { factory as localFactory } from '../../sidecar/src/components/crypto/localstorage/index.ts';
import type { CryptoProvider } from '../../sidecar/src/components/crypto/types.ts';
import type { ComponentSpec } from '../../sidecar/src/components/types.ts';
import { decrypt, encrypt } from '../../sidecar/src/crypto/stream.ts';

const VECTORS = join(import.meta.dirname, 'vectors');
const log = pino({ level: 'silent' });
const PLAIN = Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 7) % 251));

function spec(type: string, metadata: Record<string, string>): ComponentSpec {
  return { name: 'c', type, version: 'v1', metadata, secretKeys: [], initTimeoutMs: 10_000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test' };
}

async function open(type: 'local' | 'jwks', metadata: Record<string, string>): Promise<CryptoProvider> {
  const p = (type === 'local' ? localFactory() : jwksFactory()) as CryptoProvider;
  await p.init(spec(type === 'local' ? 'crypto.dapr.localstorage' : 'crypto.dapr.jwks', metadata), { appId: 'a', namespace: 'default', log });
  return p;
}

function roundTrip(p: CryptoProvider, keyName: string, keyWrapAlgorithm: string, cipher: string, plain = PLAIN): Promise<Buffer> {
  return (async () => {
    const enc = await collect(await encrypt(chunked(plain), { keyName, keyWrapAlgorithm, dataEncryptionCipher: cipher, wrapKey: (plaintextKey, algorithm, name) => p.wrapKey({ plaintextKey, algorithm, keyName: name }) }));
    return collect(await decrypt(chunked(enc), { unwrapKey: (wrappedKey, algorithm, name) => p.unwrapKey({ wrappedKey, algorithm, keyName: name }) }));
  })();
}

let dir: string;
let keys: string;
let local: CryptoProvider;
const aes = randomBytes(32);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-crypto-'));
  keys = join(dir, 'keys');
  await cp(join(VECTORS, 'keys'), keys, { recursive: true });
  const rsaPem = await readFile(join(keys, 'rsa.pem'));
  await writeFile(join(keys, 'rsa-public.pem'), createPublicKey(rsaPem).export({ type: 'spki', format: 'pem' }));
  await writeFile(join(keys, 'aes.b64'), `${aes.toString('base64')}\n`);
  await writeFile(join(keys, 'kw.json'), JSON.stringify({ kty: 'oct', k: aes.toString('base64url'), alg: 'A256KW', use: 'enc' }));
  await writeFile(join(keys, 'sig-only.json'), JSON.stringify({ kty: 'oct', k: aes.toString('base64url'), use: 'sig' }));
  await writeFile(join(keys, 'no-wrap.json'), JSON.stringify({ kty: 'oct', k: aes.toString('base64url'), key_ops: ['encrypt', 'decrypt'] }));
  await writeFile(join(keys, 'aes128.json'), JSON.stringify({ kty: 'oct', k: randomBytes(16).toString('base64url') }));
  await writeFile(join(keys, 'rsa.json'), JSON.stringify(createPublicKey(rsaPem).export({ format: 'jwk' })));
  await mkdir(join(keys, 'sub'));
  await writeFile(join(keys, 'sub', 'inner.b64'), aes.toString('base64'));
  await writeFile(join(dir, 'outside.b64'), aes.toString('base64'));
  await symlink(join(dir, 'outside.b64'), join(keys, 'escape'));
  await symlink(join(keys, 'aes.b64'), join(keys, 'alias'));
  local = await open('local', { path: keys });
});

afterAll(async () => {
  await local?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('documents made by the reference implementation, with real key wrapping', () => {
  for (const file of ['ref-aes-gcm-a256kw', 'ref-chacha20-poly1305-a256kw', 'ref-aes-gcm-rsa-oaep-256', 'ref-chacha20-poly1305-rsa-oaep-256']) {
    it(`${file}.enc decrypts with the key named in its header, read by crypto.dapr.localstorage`, async () => {
      const doc = await readFile(join(VECTORS, `${file}.enc`));
      const out = await collect(await decrypt(chunked(doc, 4096), { unwrapKey: (wrappedKey, algorithm, keyName) => local.unwrapKey({ wrappedKey, algorithm, keyName }) }));
      expect(out.equals(PLAIN)).toBe(true);
    });
  }
});

describe('every cipher × key-wrap combination round-trips', () => {
  for (const cipher of ['AES-GCM', 'CHACHA20-POLY1305']) {
    it(`${cipher}: A256KW (raw, base64, JWK with alg) and RSA-OAEP-256 (PEM private, JWK public can only wrap)`, async () => {
      for (const [key, alg] of [
        ['aes256.bin', 'A256KW'],
        ['aes.b64', 'AES'],
        ['kw.json', 'A256KW'],
        ['sub/inner.b64', 'A256KW'],
        ['alias', 'A256KW'],
        ['rsa.pem', 'RSA-OAEP-256'],
        ['rsa.pem', 'rsa'],
      ]) {
        expect((await roundTrip(local, key, alg, cipher)).equals(PLAIN), `${key} ${alg}`).toBe(true);
      }
    });
  }

  it('a public key wraps; unwrapping needs the private key (named instead of the one in the header)', async () => {
    const enc = await collect(
      await encrypt(chunked(PLAIN), { keyName: 'rsa-public.pem', keyWrapAlgorithm: 'RSA-OAEP-256', wrapKey: (plaintextKey, algorithm, keyName) => local.wrapKey({ plaintextKey, algorithm, keyName }) }),
    );
    await expect(decrypt(chunked(enc), { unwrapKey: (w, a, k) => local.unwrapKey({ wrappedKey: w, algorithm: a, keyName: k }) })).rejects.toThrow(/signature/);
    const out = await collect(await decrypt(chunked(enc), { keyName: 'rsa.pem', unwrapKey: (w, a, k) => local.unwrapKey({ wrappedKey: w, algorithm: a, keyName: k }) }));
    expect(out.equals(PLAIN)).toBe(true);
  });
});

describe("the reference's key checks and refusals", () => {
  const wrap = (keyName: string, algorithm: string) => local.wrapKey({ plaintextKey: randomBytes(32), algorithm, keyName });

  it('a JWK whose use, key_ops or alg does not allow it; a key of the wrong type or size', async () => {
    await expect(wrap('sig-only.json', 'A256KW')).rejects.toThrow(/cannot perform the 'wrapKey' operation/);
    await expect(wrap('no-wrap.json', 'A256KW')).rejects.toThrow(/cannot perform the 'wrapKey' operation/);
    await expect(wrap('kw.json', 'RSA-OAEP-256')).rejects.toThrow(/cannot be used with algorithm 'RSA-OAEP-256'/);
    await expect(wrap('aes128.json', 'A256KW')).rejects.toThrow(/A256KW needs a 256-bit symmetric key/);
    await expect(wrap('aes256.bin', 'RSA-OAEP-256')).rejects.toThrow(/needs an RSA key/);
    await expect(local.unwrapKey({ wrappedKey: randomBytes(256), algorithm: 'RSA-OAEP-256', keyName: 'rsa-public.pem' })).rejects.toThrow(/needs the private key/);
    await expect(local.unwrapKey({ wrappedKey: randomBytes(40), algorithm: 'A256KW', keyName: 'aes256.bin' })).rejects.toThrow(/failed to unwrap/);
  });

  it('A*CBC-NOPAD (named by the format, done by no local provider of the reference) and anything else are refused', async () => {
    await expect(wrap('aes256.bin', 'A256CBC-NOPAD')).rejects.toThrow(/unsupported algorithm 'A256CBC-NOPAD'/);
    await expect(wrap('aes256.bin', 'ECDH-ES+A256KW')).rejects.toThrow(/unsupported algorithm/);
  });

  it('key names stay inside the folder', async () => {
    for (const name of ['../outside.b64', '/etc/passwd', 'sub/../../outside.b64', 'a\0b']) await expect(wrap(name, 'A256KW'), name).rejects.toThrow(/invalid key name/);
    await expect(wrap('escape', 'A256KW')).rejects.toThrow(/leads outside the key folder/);
    await expect(wrap('missing', 'A256KW')).rejects.toThrow(/key 'missing' not found/);
    await expect(wrap('sub', 'A256KW')).rejects.toThrow(/not found/);
  });

  it('a path that is not a folder fails the start', async () => {
    await expect(open('local', { path: join(keys, 'aes.b64') })).rejects.toThrow(/is not a directory/);
    await expect(open('local', { path: join(dir, 'nope') })).rejects.toThrow(/could not stat path/);
  });
});

describe('crypto.dapr.jwks', () => {
  const set = (k: Buffer) => JSON.stringify({ keys: [{ kid: 'sym', kty: 'oct', k: k.toString('base64url') }, { kty: 'oct', k: 'AAAA' }] });

  it('inline JSON and base64 JSON: keys by kid', async () => {
    for (const jwks of [set(aes), Buffer.from(set(aes)).toString('base64')]) {
      const p = await open('jwks', { jwks });
      expect((await roundTrip(p, 'sym', 'A256KW', 'AES-GCM', Buffer.from('hi'))).toString()).toBe('hi');
      await expect(p.wrapKey({ plaintextKey: randomBytes(32), algorithm: 'A256KW', keyName: 'other' })).rejects.toThrow(/key 'other' not found in the JWKS/);
      await p.close();
    }
  });

  it('the JS SDK e2e suite\'s component (a symmetric key "symmetric256")', async () => {
    const p = await open('jwks', { jwks: JSON.stringify({ keys: [{ kid: 'symmetric256', kty: 'oct', k: 'RjJPhQzsDB5dvjQZ-85l_D_SBXWCBFx7IVsesenVvts' }] }) });
    expect((await roundTrip(p, 'symmetric256', 'AES', 'AES-GCM')).equals(PLAIN)).toBe(true);
    await p.close();
  });

  it('a file, read again when it changes', async () => {
    const file = join(dir, 'jwks.json');
    await writeFile(file, set(aes));
    const p = await open('jwks', { jwks: file });
    const enc = await collect(await encrypt(chunked(PLAIN), { keyName: 'sym', keyWrapAlgorithm: 'A256KW', wrapKey: (plaintextKey, algorithm, keyName) => p.wrapKey({ plaintextKey, algorithm, keyName }) }));
    await writeFile(file, set(randomBytes(32)) + '\n');
    await expect(decrypt(chunked(enc), { unwrapKey: (w, a, k) => p.unwrapKey({ wrappedKey: w, algorithm: a, keyName: k }) })).rejects.toThrow(/signature/);
    await p.close();
  });

  it('not a set, a bad key in it, or plain http: the start fails saying so', async () => {
    await expect(open('jwks', { jwks: 'nonsense' })).rejects.toThrow(/not a URL, the path of a local file, or a JSON value/);
    await expect(open('jwks', { jwks: JSON.stringify({ keys: [{ kid: 'x', kty: 'RSA', n: '!' }] }) })).rejects.toThrow(/key 0 \("x"\)/);
    await expect(open('jwks', { jwks: 'http://127.0.0.1:1/jwks' })).rejects.toThrow(/must be https/);
  });

  describe('from an https URL', () => {
    let server: Server;
    let url: string;
    let caPem: string;
    let served = set(aes);
    /** JWKS answers sent, for waits on the component's refreshes. */
    let fetches = 0;

    beforeAll(async () => {
      x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
      const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
      const pair = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
      const cert = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: '01',
        name: 'CN=127.0.0.1',
        notBefore: new Date(Date.now() - 60_000),
        notAfter: new Date(Date.now() + 3_600_000),
        keys: pair,
        signingAlgorithm: alg,
        extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: '127.0.0.1' }])],
      });
      caPem = cert.toString('pem');
      const keyDer = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', pair.privateKey));
      const keyPem = `-----BEGIN PRIVATE KEY-----\n${keyDer.toString('base64')}\n-----END PRIVATE KEY-----\n`;
      server = createServer({ key: keyPem, cert: caPem }, (req, res) => {
        if (req.url !== '/jwks.json') {
          res.writeHead(404).end();
          return;
        }
        res.setHeader('content-type', 'application/json');
        res.end(served, () => fetches++);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `https://127.0.0.1:${(server.address() as { port: number }).port}/jwks.json`;
    });

    afterAll(async () => {
      server?.closeAllConnections();
      await new Promise((r) => server?.close(r));
    });

    it('fetched with the certificate verified: trusted through caCertificate, refused otherwise', async () => {
      const p = await open('jwks', { jwks: url, caCertificate: caPem });
      expect((await roundTrip(p, 'sym', 'A256KW', 'CHACHA20-POLY1305', Buffer.from('over https'))).toString()).toBe('over https');
      await p.close();
      await expect(open('jwks', { jwks: url })).rejects.toThrow(/failed to fetch the JWKS from https:\/\/127\.0\.0\.1:\d+\/jwks\.json: self-signed certificate/);
      await expect(open('jwks', { jwks: url.replace('jwks.json', 'nothing'), caCertificate: caPem })).rejects.toThrow(/answered 404/);
    });

    it('fetched again every minRefreshInterval; a failed fetch keeps the last set', async () => {
      served = set(aes);
      const p = await open('jwks', { jwks: url, caCertificate: caPem, minRefreshInterval: '1s' });
      const other = randomBytes(32);
      served = set(other);
      const check = (await open('jwks', { jwks: set(other) })) as CryptoProvider;
      const wrapOne = () => p.wrapKey({ plaintextKey: Buffer.alloc(32, 1), algorithm: 'A256KW', keyName: 'sym' });
      // the next refresh takes the new set: a key wrapped with it unwraps with the other key
      let wrapped = await wrapOne();
      await vi.waitFor(
        async () => {
          wrapped = await wrapOne();
          expect(await check.unwrapKey({ wrappedKey: wrapped, algorithm: 'A256KW', keyName: 'sym' })).toEqual(Buffer.alloc(32, 1));
        },
        { timeout: 5_000, interval: 50 },
      );
      served = 'not json';
      // two answers later, the first failed refresh has been handled: the last good set stays
      const seen = fetches;
      await vi.waitFor(() => expect(fetches).toBeGreaterThanOrEqual(seen + 2), { timeout: 5_000, interval: 50 });
      expect(await wrapOne()).toEqual(wrapped);
      await p.close();
      await check.close();
    });
  });
});
