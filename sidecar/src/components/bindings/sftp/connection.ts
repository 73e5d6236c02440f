/**
 * One SSH connection with one SFTP channel, shared by every call of a component.
 *
 * - Opened lazily and kept; concurrent callers share the connect in progress. SFTP requests
 *   carry ids, so many calls run on the channel at once.
 * - A connection the server dropped (restart, idle timeout, network) is noticed through the
 *   client's close/error events or SSH keepalives; the next call reconnects. A call that fails
 *   because its connection died under it is retried once on a fresh connection.
 * - Connecting is bounded (CONNECT_TIMEOUT_MS covers TCP, handshake and authentication), so a
 *   server that is down gives a clear error quickly instead of a hanging request.
 */
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { Client, ConnectConfig, SFTPWrapper } from 'ssh2';
import { ApiError } from '../../../http/errors.ts';
import { algorithmsFor, containsKey, fingerprint, knownHostsName, matchKnownHosts, type HostKey } from './hostkeys.ts';
import type { SftpMetadata } from './metadata.ts';
import type { Ssh2Module } from './ssh2.ts';

export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * A peer that stops answering (crashed host, frozen server, dropped route) is detected after
 * about KEEPALIVE_MS × (KEEPALIVE_COUNT + 1); the calls waiting on it then fail or are retried.
 */
export const KEEPALIVE_MS = 5_000;
export const KEEPALIVE_COUNT = 3;
/** Request sizes when the server does not tell its limits (the SFTP draft's safe minimum). */
const DEFAULT_IO_LEN = 32 * 1024;
/** A channel window when ssh2 does not show the server's (OpenSSH's session window). */
const DEFAULT_SEND_WINDOW = 2 * 1024 * 1024;

export interface Session {
  client: Client;
  sftp: SFTPWrapper;
  alive: boolean;
  /** Largest data length of one READ / WRITE request this server accepts. */
  maxReadLen: number;
  maxWriteLen: number;
  /** The server's window for data we send on the SFTP channel, when it opened (bytes). */
  sendWindow: number;
}

/** An SFTP status answer (no such file, permission denied …): a real answer, not a lost connection. */
export function isStatusError(e: unknown): e is Error & { code: number } {
  return typeof (e as { code?: unknown } | null)?.code === 'number';
}

/** Errors ssh2 and Node give requests whose connection went away. */
function isConnectionLoss(e: unknown): boolean {
  const err = e as { message?: unknown; code?: unknown } | null;
  if (typeof err?.code === 'string' && ['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED'].includes(err.code)) return true;
  return typeof err?.message === 'string' && /No response from server|connection is closed|Not connected|Keepalive timeout/i.test(err.message);
}

export class SftpConnection {
  private readonly ssh2: Ssh2Module;
  private readonly md: SftpMetadata;
  private readonly log: Logger;
  private session: Session | undefined;
  private connecting: Promise<Session> | undefined;
  private closed = false;
  /** Temporary upload files left behind by a broken connection; removed after the next connect. */
  private readonly orphans = new Set<string>();

  constructor(ssh2: Ssh2Module, md: SftpMetadata, log: Logger) {
    this.ssh2 = ssh2;
    this.md = md;
    this.log = log;
  }

  /** Runs `op` on a live session; on a connection-level failure, once more on a new one. */
  async run<T>(op: (s: Session) => Promise<T>): Promise<T> {
    const s = await this.acquire();
    try {
      return await op(s);
    } catch (e) {
      if (e instanceof ApiError || isStatusError(e) || this.closed || !(isConnectionLoss(e) || !s.alive)) throw e;
      this.log.info({ server: this.where() }, `SFTP call failed on a broken connection (${(e as Error).message}); reconnecting once`);
      this.drop(s);
      return await op(await this.acquire());
    }
  }

  /** The live session, connecting when there is none. */
  async acquire(): Promise<Session> {
    if (this.closed) throw new Error('the SFTP binding is closed');
    if (this.session?.alive) return this.session;
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** Remembers a file to remove once a connection works again (see uploadBase64). */
  forget(path: string): void {
    this.orphans.add(path);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting?.catch(() => undefined);
    if (this.session) this.drop(this.session);
  }

  private drop(s: Session): void {
    s.alive = false;
    if (this.session === s) this.session = undefined;
    s.client.end();
    // end() waits for the server; a dead peer never answers
    setTimeout(() => s.client.destroy(), 1000).unref();
  }

  private where(): string {
    return `${this.md.host}:${this.md.port}`;
  }

  private async connect(): Promise<Session> {
    const verify = await this.hostVerification();
    const config: ConnectConfig = {
      host: this.md.host,
      port: this.md.port,
      username: this.md.username,
      password: this.md.password,
      privateKey: this.md.privateKey,
      passphrase: this.md.privateKeyPassphrase,
      readyTimeout: CONNECT_TIMEOUT_MS,
      keepaliveInterval: KEEPALIVE_MS,
      keepaliveCountMax: KEEPALIVE_COUNT,
      tryKeyboard: false,
      hostVerifier: verify.check,
      algorithms: verify.algorithms.length ? { serverHostKey: verify.algorithms as NonNullable<ConnectConfig['algorithms']>['serverHostKey'] } : undefined,
    };
    const client = new this.ssh2.Client();
    const session = await new Promise<Session>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error & { level?: string }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.destroy();
        reject(new Error(this.explain(err, verify.rejected())));
      };
      // a connect that stalls after the handshake (e.g. the sftp subsystem never answers)
      const timer = setTimeout(() => fail(new Error('timeout')), CONNECT_TIMEOUT_MS + 1000);
      client.on('error', fail);
      client.on('close', () => fail(new Error('the server closed the connection')));
      client.on('ready', () => {
        client.sftp((err, sftp) => {
          clearTimeout(timer);
          if (err) return fail(new Error(`the server refused the sftp subsystem: ${err.message}`));
          if (settled) return;
          settled = true;
          const limits = sftp as unknown as { _maxReadLen?: unknown; _maxWriteLen?: unknown; outgoing?: { window?: unknown } };
          const window = limits.outgoing?.window;
          resolve({
            client,
            sftp,
            alive: true,
            maxReadLen: typeof limits._maxReadLen === 'number' && limits._maxReadLen > 0 ? limits._maxReadLen : DEFAULT_IO_LEN,
            maxWriteLen: typeof limits._maxWriteLen === 'number' && limits._maxWriteLen > 0 ? limits._maxWriteLen : DEFAULT_IO_LEN,
            sendWindow: typeof window === 'number' && window > 0 ? window : DEFAULT_SEND_WINDOW,
          });
        });
      });
      client.connect(config);
      // SFTP requests are small writes that must not wait for the previous one's ACK (Nagle
      // with the peer's delayed ACK costs 40 ms per pipelined round otherwise)
      client.setNoDelay(true);
    });

    const dead = (why: string) => () => {
      if (!session.alive) return;
      session.alive = false;
      if (this.session === session) this.session = undefined;
      if (!this.closed) this.log.info({ server: this.where() }, `SFTP connection lost (${why}); the next call reconnects`);
    };
    client.removeAllListeners('error').removeAllListeners('close');
    client.on('error', (e: Error) => dead(e.message)());
    client.on('close', dead('closed'));
    client.on('end', dead('ended by the server'));
    session.sftp.on('close', () => {
      dead('sftp channel closed')();
      client.end();
    });
    session.sftp.on('error', (e: Error) => dead(e.message)());
    if (this.closed) {
      this.drop(session);
      throw new Error('the SFTP binding is closed');
    }
    this.session = session;
    this.log.debug({ server: this.where(), user: this.md.username }, 'SFTP connection established');
    for (const path of [...this.orphans]) {
      this.orphans.delete(path);
      session.sftp.unlink(path, () => undefined); // best effort; it may be gone already
    }
    return session;
  }

  /** The host key check for this connect; known_hosts is re-read so rotated keys apply. */
  private async hostVerification(): Promise<{ check: (key: Buffer) => boolean; algorithms: string[]; rejected: () => string | undefined }> {
    const policy = this.md.hostKeys;
    if (policy.kind === 'insecure') return { check: () => true, algorithms: [], rejected: () => undefined };
    let keys: HostKey[] = [...policy.fixed];
    let revoked: HostKey[] = [];
    if (policy.knownHostsFile) {
      let text: string;
      try {
        text = await readFile(policy.knownHostsFile, 'utf8');
      } catch (e) {
        throw new Error(`cannot read knownHostsFile "${policy.knownHostsFile}": ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
      const set = matchKnownHosts(text, this.md.host, this.md.port);
      keys = keys.concat(set.keys);
      revoked = set.revoked;
      if (keys.length === 0) {
        throw new Error(
          `knownHostsFile "${policy.knownHostsFile}" has no entry for ${knownHostsName(this.md.host, this.md.port)}; ` +
            `add one, e.g. ssh-keyscan -p ${this.md.port} ${this.md.host} >> ${policy.knownHostsFile}`,
        );
      }
    }
    let presented: Buffer | undefined;
    let reason: string | undefined;
    const source = [policy.fixed.length ? 'hostPublicKey' : '', policy.knownHostsFile ? `knownHostsFile "${policy.knownHostsFile}"` : ''].filter(Boolean).join(' or ');
    return {
      algorithms: algorithmsFor(keys),
      check: (key: Buffer) => {
        presented = key;
        if (containsKey(revoked, key)) {
          reason = `the server presented ${fingerprint(key)}, which ${source} marks @revoked`;
          return false;
        }
        if (containsKey(keys, key)) return true;
        reason = `the server presented ${fingerprint(key)}, which does not match ${source}`;
        return false;
      },
      rejected: () => (presented ? reason : undefined),
    };
  }

  /** A message a person can act on; never contains credentials. */
  private explain(err: Error & { level?: string; code?: string }, hostKeyProblem: string | undefined): string {
    const where = this.where();
    if (hostKeyProblem) return `host key verification failed for ${where}: ${hostKeyProblem}`;
    if (err.code === 'ECONNREFUSED') return `cannot connect to the SFTP server at ${where}: connection refused (is it running?)`;
    if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') return `cannot resolve the SFTP server host "${this.md.host}"`;
    if (err.level === 'client-timeout' || err.message === 'timeout') {
      return `the SFTP server at ${where} did not complete the connection within ${CONNECT_TIMEOUT_MS / 1000} s`;
    }
    if (err.level === 'client-authentication') {
      const tried = [this.md.password !== undefined ? 'password' : '', this.md.privateKey !== undefined ? 'publickey' : ''].filter(Boolean).join(', ');
      return `authentication as "${this.md.username}" failed at ${where} (tried: ${tried}); check username, password, privateKey and the server's authorized keys`;
    }
    return `cannot connect to the SFTP server at ${where}: ${err.message}`;
  }
}
