/** bindings.sftp metadata parsing and known_hosts matching (no server needed). */
import { createHmac, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { containsKey, matchKnownHosts, parseHostPublicKey, decodeKey } from '../../../sidecar/src/components/bindings/sftp/hostkeys.ts';
import { parseAddress, parseMetadata } from '../../../sidecar/src/components/bindings/sftp/metadata.ts';

/** A syntactically valid ssh-ed25519 public key line (random key material). */
function edKey(seed = randomBytes(32)): string {
  const type = Buffer.from('ssh-ed25519');
  const blob = Buffer.concat([u32(type.length), type, u32(32), seed]);
  return `ssh-ed25519 ${blob.toString('base64')}`;
}
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

const base = { rootPath: '/upload/', address: 'sftp.example.com:2222', username: 'u', password: 'pw', hostPublicKey: edKey() };

describe('bindings.sftp metadata', () => {
  it('parses the contract fields', () => {
    const md = parseMetadata(base);
    expect(md).toMatchObject({ rootPath: '/upload', host: 'sftp.example.com', port: 2222, username: 'u', password: 'pw' });
    expect(md.hostKeys.kind).toBe('verify');
  });

  it('requires rootPath, address, username and a login method, naming them', () => {
    expect(() => parseMetadata({})).toThrow(/"rootPath", "address", "username" are required/);
    expect(() => parseMetadata({ ...base, username: ' ' })).toThrow(/"username" is required/);
    const { password: _pw, ...noLogin } = base;
    expect(() => parseMetadata(noLogin)).toThrow(/set "password" or "privateKey"/);
  });

  it('refuses to start without host validation and says how to fix it', () => {
    const { hostPublicKey: _k, ...md } = base;
    expect(() => parseMetadata(md)).toThrow(/set "hostPublicKey" .*ssh-keyscan -p 2222 sftp\.example\.com.* or "knownHostsFile"/);
    expect(parseMetadata({ ...md, insecureIgnoreHostKey: 'true' }).hostKeys.kind).toBe('insecure');
    expect(() => parseMetadata({ ...md, insecureIgnoreHostKey: 'maybe' })).toThrow(/metadata field "insecureIgnoreHostKey" "maybe" is not a boolean/);
    expect(() => parseMetadata({ ...md, knownHostsFile: '/no/such/known_hosts' })).toThrow(/does not exist/);
  });

  it('reads addresses with and without port, IPv6 in brackets', () => {
    expect(parseAddress('h')).toEqual({ host: 'h', port: 22 });
    expect(parseAddress('h:2022')).toEqual({ host: 'h', port: 2022 });
    expect(parseAddress('[::1]:2022')).toEqual({ host: '::1', port: 2022 });
    expect(parseAddress('[::1]')).toEqual({ host: '::1', port: 22 });
    expect(parseAddress('::1')).toEqual({ host: '::1', port: 22 });
    for (const bad of ['h:0', 'h:70000', 'h:x', ':22', 'a b:22']) expect(() => parseAddress(bad), bad).toThrow(/address/);
  });

  it('never puts secrets in its messages', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 4 }), fc.string({ minLength: 4 }), fc.constantFrom('garbage', undefined), (p, k, hostKey) => {
        const password = `PW-${p}`;
        const privateKey = `KEY-${k}`;
        try {
          parseMetadata({ ...base, password, privateKey, hostPublicKey: hostKey as string });
        } catch (e) {
          expect((e as Error).message).not.toContain(password);
          expect((e as Error).message).not.toContain(privateKey);
          return;
        }
        throw new Error('a privateKey that is neither key text nor a file must be refused');
      }),
      { numRuns: 200 },
    );
  });

  it('parses hostPublicKey lines and rejects what is not a key', () => {
    const k = edKey();
    expect(parseHostPublicKey(`${k} comment here`)).toHaveLength(1);
    expect(parseHostPublicKey(`[h]:22 ${k}\n${edKey()}`)).toHaveLength(2);
    expect(() => parseHostPublicKey('ssh-ed25519 notbase64!')).toThrow(/ssh-keyscan/);
    // the blob must name the type of the line
    expect(() => parseHostPublicKey(k.replace('ssh-ed25519', 'ssh-rsa'))).toThrow(/not a public key line/);
    expect(decodeKey('ssh-ed25519', 'AAAA')).toBeUndefined();
  });
});

describe('known_hosts matching', () => {
  const key = edKey();
  const blob = Buffer.from(key.split(' ')[1], 'base64');
  const matches = (text: string, host: string, port: number) => containsKey(matchKnownHosts(text, host, port).keys, blob);
  const hashed = (name: string) => {
    const salt = randomBytes(20);
    return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
  };

  it('uses "host" on port 22 and "[host]:port" elsewhere', () => {
    expect(matches(`example.com ${key}`, 'example.com', 22)).toBe(true);
    expect(matches(`example.com ${key}`, 'example.com', 2222)).toBe(false);
    expect(matches(`[example.com]:2222 ${key}`, 'example.com', 2222)).toBe(true);
    expect(matches(`[example.com]:2222 ${key}`, 'example.com', 22)).toBe(false);
  });

  it('handles host lists, wildcards, negation, case and comments', () => {
    expect(matches(`a.com,EXAMPLE.com ${key}`, 'example.com', 22)).toBe(true);
    expect(matches(`*.example.com ${key}`, 'sftp.example.com', 22)).toBe(true);
    expect(matches(`sftp?.example.com ${key}`, 'sftp1.example.com', 22)).toBe(true);
    expect(matches(`*.example.com,!bad.example.com ${key}`, 'bad.example.com', 22)).toBe(false);
    expect(matches(`# example.com ${key}\n\n`, 'example.com', 22)).toBe(false);
    expect(matches(`@cert-authority *.example.com ${key}`, 'x.example.com', 22)).toBe(false);
  });

  it('matches hashed entries (|1|salt|hmac) for both name forms', () => {
    expect(matches(`${hashed('example.com')} ${key}`, 'example.com', 22)).toBe(true);
    expect(matches(`${hashed('[example.com]:2222')} ${key}`, 'example.com', 2222)).toBe(true);
    expect(matches(`${hashed('other.com')} ${key}`, 'example.com', 22)).toBe(false);
  });

  it('collects @revoked keys apart', () => {
    const set = matchKnownHosts(`@revoked example.com ${key}`, 'example.com', 22);
    expect(set.keys).toHaveLength(0);
    expect(containsKey(set.revoked, blob)).toBe(true);
  });

  it('skips lines it cannot read', () => {
    expect(matches(`example.com ssh-ed25519 !!!\nexample.com\n${'x'.repeat(50)}\nexample.com ${key}`, 'example.com', 22)).toBe(true);
  });
});
