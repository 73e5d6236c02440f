/**
 * bindings.sftp login and server validation against a real OpenSSH sshd: password and every
 * key type (plain and encrypted), host keys pinned or from known_hosts (plain, hashed,
 * revoked), and that secrets never reach the logs or error messages.
 */
import { execFile } from 'node:child_process';
import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_PASSPHRASE, startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, bytesOf, capturingLogger, initBinding, op, sshdAvailable } from './helpers.ts';

const run = promisify(execFile);

describe.skipIf(!sshdAvailable)('bindings.sftp authentication and host keys (real sshd)', () => {
  let s: SshdServer;
  beforeAll(async () => {
    s = await startSshd();
  });
  afterAll(async () => {
    await s?.close();
  });

  /** Logs in with `md`, writes and reads back one file, closes. */
  async function roundTrip(md: Record<string, string>, name: string): Promise<void> {
    const b = await initBinding(md);
    try {
      await b.invoke(op('create', { fileName: `auth/${name}.txt` }, Buffer.from(name).toString('base64')));
      expect((await bytesOf(await b.invoke(op('get', { fileName: `auth/${name}.txt` })))).toString()).toBe(name);
    } finally {
      await b.close();
    }
  }

  const keyLogin = (key: { privateKey: string; passphrase?: string }) => {
    const md: Record<string, string> = { ...baseMetadata(s), privateKey: key.privateKey };
    delete md.password;
    if (key.passphrase) md.privateKeyPassphrase = key.passphrase;
    return md;
  };

  it('logs in with a password', async () => {
    await roundTrip(baseMetadata(s), 'password');
    expect(s.log()).toMatch(/Accepted password for rt-sftp-test/);
  });

  it('logs in with RSA, ECDSA and Ed25519 keys (OpenSSH format)', async () => {
    for (const k of ['rsa', 'ecdsa', 'ed25519'] as const) await roundTrip(keyLogin(s.keys[k]), `key-${k}`);
    expect(s.log()).toMatch(/Accepted publickey for rt-sftp-test .* RSA /);
    expect(s.log()).toMatch(/Accepted publickey for rt-sftp-test .* ECDSA /);
    expect(s.log()).toMatch(/Accepted publickey for rt-sftp-test .* ED25519 /);
  });

  it('logs in with encrypted keys and their passphrase (OpenSSH Ed25519, PEM RSA)', async () => {
    await roundTrip(keyLogin(s.keys.ed25519Encrypted), 'enc-ed25519');
    await roundTrip(keyLogin(s.keys.rsaPem), 'enc-rsa-pem');
  });

  it('reads privateKey from a file path, and accepts a key written on one line with \\n escapes', async () => {
    await roundTrip({ ...keyLogin(s.keys.ed25519), privateKey: s.keys.ed25519.path }, 'key-file');
    await roundTrip({ ...keyLogin(s.keys.ecdsa), privateKey: s.keys.ecdsa.privateKey.trim().replace(/\n/g, '\\n') }, 'key-escaped');
  });

  it('tells what is wrong with a key, without echoing it', async () => {
    const noPass = keyLogin(s.keys.ed25519Encrypted);
    delete noPass.privateKeyPassphrase;
    await expect(initBinding(noPass)).rejects.toThrow(/privateKey is encrypted: set privateKeyPassphrase/);
    await expect(initBinding({ ...noPass, privateKeyPassphrase: 'wrong passphrase' })).rejects.toThrow(/privateKeyPassphrase is wrong/);
    const garbage = '-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----';
    const e = await initBinding({ ...keyLogin(s.keys.ed25519), privateKey: garbage }).catch((x: Error) => x);
    expect(e).toBeInstanceOf(Error);
    expect((e as Error).message).toMatch(/privateKey cannot be read/);
    expect((e as Error).message).not.toContain('bm90IGEga2V5');
    await expect(initBinding({ ...keyLogin(s.keys.ed25519), privateKey: 'no key here' })).rejects.toThrow(/PEM or OpenSSH private key/);
  });

  it('refuses a wrong password and a key the server does not know; secrets stay out of logs and messages', async () => {
    const { log, lines } = capturingLogger();
    const wrong = await initBinding({ ...baseMetadata(s), password: 'not-the-password-123' }, log).catch((x: Error) => x);
    expect((wrong as Error).message).toMatch(/authentication as "rt-sftp-test" failed/);
    expect((wrong as Error).message).not.toContain('not-the-password-123');
    const stranger = await initBinding({ ...keyLogin(s.strangerKey) }, log).catch((x: Error) => x);
    expect((stranger as Error).message).toMatch(/authentication .* failed .*tried: publickey/);
    // a successful session logs too; none of it may carry a secret
    await (await initBinding({ ...keyLogin(s.keys.ed25519Encrypted), password: s.password }, log)).close();
    const all = lines.join('\n') + (wrong as Error).message + (stranger as Error).message;
    for (const secret of [s.password, 'not-the-password-123', KEY_PASSPHRASE, s.keys.ed25519Encrypted.privateKey.split('\n')[1]]) {
      expect(all).not.toContain(secret);
    }
  });

  it('verifies the server against hostPublicKey of each type (the server is asked for that key type)', async () => {
    for (const t of ['ed25519', 'ecdsa', 'rsa'] as const) await roundTrip({ ...baseMetadata(s), hostPublicKey: s.hostKeys[t] }, `host-${t}`);
  });

  it('refuses a server whose host key is not the pinned one, naming the presented key', async () => {
    const md = { ...baseMetadata(s), hostPublicKey: s.strangerKey.publicKey };
    const logins = () => (s.log().match(/Accepted /g) ?? []).length;
    const before = logins();
    const e = (await initBinding(md).catch((x: Error) => x)) as Error;
    expect(e.message).toMatch(/host key verification failed for 127\.0\.0\.1:\d+: the server presented ssh-ed25519 SHA256:\S+, which does not match hostPublicKey/);
    expect(logins()).toBe(before); // refused before sending any credential
  });

  it('accepts the server through a known_hosts file, plain or hashed, and honours @revoked', async () => {
    const md = { ...baseMetadata(s), knownHostsFile: s.knownHostsFile };
    delete (md as Record<string, string>).hostPublicKey;
    await roundTrip(md, 'known-hosts');

    const hashed = join(s.dir, 'known_hosts_hashed');
    await copyFile(s.knownHostsFile, hashed);
    await run('ssh-keygen', ['-q', '-H', '-f', hashed]);
    await roundTrip({ ...md, knownHostsFile: hashed }, 'known-hosts-hashed');

    const revoked = join(s.dir, 'known_hosts_revoked');
    await writeFile(revoked, `@revoked [127.0.0.1]:${s.port} ${s.hostKeys.ed25519}\n[127.0.0.1]:${s.port} ${s.hostKeys.ed25519}\n`);
    await expect(initBinding({ ...md, knownHostsFile: revoked })).rejects.toThrow(/marks @revoked/);
  });

  it('refuses a server whose known_hosts entry holds another key, or that has no entry', async () => {
    const md = { ...baseMetadata(s) } as Record<string, string>;
    delete md.hostPublicKey;
    const other = join(s.dir, 'known_hosts_other');
    await writeFile(other, `[127.0.0.1]:${s.port} ${s.strangerKey.publicKey}\n`);
    await expect(initBinding({ ...md, knownHostsFile: other })).rejects.toThrow(/host key verification failed.*does not match knownHostsFile/);
    const port22 = join(s.dir, 'known_hosts_port22');
    await writeFile(port22, `127.0.0.1 ${s.hostKeys.ed25519}\n`);
    await expect(initBinding({ ...md, knownHostsFile: port22 })).rejects.toThrow(/has no entry for \[127\.0\.0\.1\]:\d+; add one, e\.g\. ssh-keyscan/);
  });

  it('will not start without a way to verify the server, and says how to fix it; insecureIgnoreHostKey opts out', async () => {
    const md = { ...baseMetadata(s) } as Record<string, string>;
    delete md.hostPublicKey;
    await expect(initBinding(md)).rejects.toThrow(/set "hostPublicKey" .* or "knownHostsFile" .*"insecureIgnoreHostKey": "true"/);
    await expect(initBinding({ ...md, insecureIgnoreHostKey: 'false' })).rejects.toThrow(/cannot be verified/);
    const { log, lines } = capturingLogger();
    const b = await initBinding({ ...md, insecureIgnoreHostKey: 'true' }, log);
    await b.close();
    expect(lines.join('\n')).toMatch(/NOT verified/);
  });
});
