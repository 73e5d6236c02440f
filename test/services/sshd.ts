/**
 * A real OpenSSH `sshd` for tests, on a free loopback port, with its own generated host keys,
 * a private config (no PAM, `internal-sftp`), and a temporary folder tree the test user owns.
 *
 * The test user `rt-sftp-test` is a system account without a login shell, created once per
 * machine (we run as root here and in CI); it logs in with a fixed password or with the keys
 * generated per server in `keys`. Host keys are per server, so every suite checks them for real.
 *
 * `stop()`/`start()` end the listener AND its per-connection children, as a crash or reboot
 * of the server would, so clients see their connection dropped (a plain SIGTERM to the
 * listener leaves established sessions running).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, waitForPort } from './net.ts';

const run = promisify(execFile);

export const SSHD_BIN = '/usr/sbin/sshd';
export const TEST_USER = 'rt-sftp-test';
/** Only our private sshd on loopback accepts passwords; the account has no shell. */
export const TEST_PASSWORD = 'rt-sftp-test-Pa55word';
export const KEY_PASSPHRASE = 'correct horse battery staple';

/** Why a real sshd cannot run here, or undefined when it can. */
export function sshdUnavailable(): string | undefined {
  if (!existsSync(SSHD_BIN)) return `${SSHD_BIN} is missing (Debian package openssh-server)`;
  if (!existsSync('/usr/bin/ssh-keygen')) return 'ssh-keygen is missing (Debian package openssh-client)';
  if (!existsSync('/usr/bin/sftp')) return 'the sftp client is missing (Debian package openssh-client)';
  if (userInfo().uid !== 0) return 'sshd must run as root to switch to the test user';
  return undefined;
}

export interface ClientKey {
  /** Private key file (OpenSSH format). */
  path: string;
  /** Its text. */
  privateKey: string;
  /** authorized_keys line. */
  publicKey: string;
  passphrase?: string;
}

export interface SshdServer {
  host: '127.0.0.1';
  port: number;
  /** `127.0.0.1:<port>`, the binding's `address`. */
  address: string;
  username: string;
  password: string;
  /** Temporary tree: `<dir>/root` is the binding's root, `<dir>/outside` is a sibling it must never touch. */
  dir: string;
  root: string;
  outside: string;
  /** Host public keys as authorized_keys lines (`ssh-ed25519 AAAA…`), by type. */
  hostKeys: { ed25519: string; ecdsa: string; rsa: string };
  /** A known_hosts file listing this server (`[127.0.0.1]:port` form, plain). */
  knownHostsFile: string;
  /** Client keys authorised for the test user. */
  keys: { rsa: ClientKey; ecdsa: ClientKey; ed25519: ClientKey; ed25519Encrypted: ClientKey; rsaPem: ClientKey };
  /** A key that is NOT authorised. */
  strangerKey: ClientKey;
  /** Freezes (SIGSTOP) the live sessions, not the listener: a server that stops answering. Returns a thaw function. */
  freezeSessions(): () => void;
  /** Gives files a test made as root to the test user (recursively), as the server's own files would be. */
  own(path: string): Promise<void>;
  /** sshd's stderr so far (debug aid for failing tests). */
  log(): string;
  /** Ends the listener and every session it spawned. */
  stop(): Promise<void>;
  /** Starts again on the same port with the same keys. */
  start(): Promise<void>;
  /** stop() + rm -rf of the temp tree. */
  close(): Promise<void>;
  /** Runs the real `sftp` client in batch mode (key auth, host key checked); resolves stdout. */
  sftpBatch(commands: string[]): Promise<string>;
}

export async function startSshd(): Promise<SshdServer> {
  const why = sshdUnavailable();
  if (why) throw new Error(why);
  await ensureTestUser();
  // sshd refuses to start without its privilege separation directory
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });

  const dir = await mkdtemp(join(tmpdir(), 'rt-sshd-'));
  await chmod(dir, 0o755);
  const root = join(dir, 'root');
  const outside = join(dir, 'outside');
  const etc = join(dir, 'etc');
  // readable by the test user: sshd reads authorized_keys as that user; private keys stay 0600
  await mkdir(etc, { mode: 0o755 });
  const { uid, gid } = await userIds(TEST_USER);
  for (const d of [root, outside]) {
    await mkdir(d);
    await chown(d, uid, gid);
  }

  const hostKey = async (type: string, bits?: string) => {
    const path = join(etc, `ssh_host_${type}_key`);
    await run('ssh-keygen', ['-q', '-t', type, ...(bits ? ['-b', bits] : []), '-N', '', '-C', `rt-test-host-${type}`, '-f', path]);
    return { path, pub: (await readFile(`${path}.pub`, 'utf8')).trim() };
  };
  const [hEd, hEc, hRsa] = await Promise.all([hostKey('ed25519'), hostKey('ecdsa', '256'), hostKey('rsa', '2048')]);

  const clientKey = async (name: string, type: string, opts: { passphrase?: string; pem?: boolean; bits?: string } = {}) => {
    const path = join(etc, `client_${name}`);
    const args = ['-q', '-t', type, '-N', opts.passphrase ?? '', '-C', `rt-test-${name}`, '-f', path];
    if (opts.bits) args.push('-b', opts.bits);
    if (opts.pem) args.push('-m', 'PEM');
    await run('ssh-keygen', args);
    return { path, privateKey: await readFile(path, 'utf8'), publicKey: (await readFile(`${path}.pub`, 'utf8')).trim(), passphrase: opts.passphrase };
  };
  const [rsa, ecdsa, ed25519, ed25519Encrypted, rsaPem, stranger] = await Promise.all([
    clientKey('rsa', 'rsa', { bits: '2048' }),
    clientKey('ecdsa', 'ecdsa', { bits: '256' }),
    clientKey('ed25519', 'ed25519'),
    clientKey('ed25519_enc', 'ed25519', { passphrase: KEY_PASSPHRASE }),
    clientKey('rsa_pem', 'rsa', { bits: '2048', pem: true, passphrase: KEY_PASSPHRASE }),
    clientKey('stranger', 'ed25519'),
  ]);
  const authorizedKeys = join(etc, 'authorized_keys');
  await writeFile(authorizedKeys, [rsa, ecdsa, ed25519, ed25519Encrypted, rsaPem].map((k) => k.publicKey).join('\n') + '\n', { mode: 0o644 });

  const port = await freePort();
  const knownHostsFile = join(etc, 'known_hosts');
  await writeFile(knownHostsFile, [hEd, hEc, hRsa].map((k) => `[127.0.0.1]:${port} ${k.pub}`).join('\n') + '\n');

  const config = join(etc, 'sshd_config');
  await writeFile(
    config,
    [
      `ListenAddress 127.0.0.1:${port}`,
      `HostKey ${hEd.path}`,
      `HostKey ${hEc.path}`,
      `HostKey ${hRsa.path}`,
      `PidFile ${join(etc, 'sshd.pid')}`,
      `AuthorizedKeysFile ${authorizedKeys}`,
      `AllowUsers ${TEST_USER}`,
      'PasswordAuthentication yes',
      'PubkeyAuthentication yes',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin no',
      'UsePAM no',
      'StrictModes no',
      'UseDNS no',
      'MaxStartups 100',
      'MaxSessions 100',
      'LogLevel VERBOSE',
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  // config errors show up here rather than as a timeout
  await run(SSHD_BIN, ['-t', '-f', config]);

  let proc: ChildProcess | undefined;
  let stderr = '';
  const start = async () => {
    const p = spawn(SSHD_BIN, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    proc = p;
    p.stderr?.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + d).slice(-64 * 1024);
    });
    try {
      await Promise.race([
        waitForPort('127.0.0.1', port, 15_000),
        new Promise((_, reject) => p.once('exit', (code) => reject(new Error(`sshd exited with ${code}: ${stderr}`)))),
      ]);
    } catch (e) {
      await stop();
      throw e;
    }
  };
  const stop = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.pid === undefined) return;
    // the listener's children are the live sessions: end them with it
    const pids = [...descendants(p.pid), p.pid];
    const exited = p.exitCode !== null ? Promise.resolve() : new Promise<void>((r) => p.once('exit', () => r()));
    for (const pid of pids) killQuietly(pid);
    await exited;
  };
  await start();
  // a worker that dies without its afterAll must not leave sshd listening
  const onExit = () => {
    if (proc?.pid) for (const pid of [...descendants(proc.pid), proc.pid]) killQuietly(pid);
  };
  process.once('exit', onExit);

  const server: SshdServer = {
    host: '127.0.0.1',
    port,
    address: `127.0.0.1:${port}`,
    username: TEST_USER,
    password: TEST_PASSWORD,
    dir,
    root,
    outside,
    hostKeys: { ed25519: hEd.pub, ecdsa: hEc.pub, rsa: hRsa.pub },
    knownHostsFile,
    keys: { rsa, ecdsa, ed25519, ed25519Encrypted, rsaPem },
    strangerKey: stranger,
    freezeSessions: () => {
      const pids = proc?.pid ? descendants(proc.pid) : [];
      for (const pid of pids) signalQuietly(pid, 'SIGSTOP');
      return () => {
        for (const pid of pids) signalQuietly(pid, 'SIGCONT');
      };
    },
    own: async (path) => {
      await run('chown', ['-R', `${uid}:${gid}`, path]);
    },
    log: () => stderr,
    stop,
    start,
    close: async () => {
      process.off('exit', onExit);
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
    sftpBatch: async (commands) => {
      const batch = join(etc, `batch-${process.pid}-${Math.random().toString(36).slice(2)}`);
      await writeFile(batch, commands.join('\n') + '\n');
      try {
        const { stdout } = await run(
          'sftp',
          [
            '-b', batch,
            '-P', String(port),
            '-i', ed25519.path,
            '-o', `UserKnownHostsFile=${knownHostsFile}`,
            '-o', 'StrictHostKeyChecking=yes',
            '-o', 'BatchMode=yes',
            '-o', 'IdentitiesOnly=yes',
            '-o', 'GlobalKnownHostsFile=/dev/null',
            `${TEST_USER}@127.0.0.1`,
          ],
          { maxBuffer: 16 * 1024 * 1024 },
        );
        return stdout;
      } finally {
        await rm(batch, { force: true });
      }
    },
  };
  return server;
}

/**
 * Creates the shell-less test account once, and (re)sets its password; serialised by flock on
 * /etc itself (a directory whose inode never changes, unlike /etc/passwd, which useradd replaces),
 * so no lock file is left behind.
 */
async function ensureTestUser(): Promise<void> {
  const script = [
    `id -u ${TEST_USER} >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ${TEST_USER}`,
    `echo '${TEST_USER}:${TEST_PASSWORD}' | chpasswd`,
  ].join(' && ');
  await run('flock', ['/etc', 'sh', '-c', script]);
}

async function userIds(name: string): Promise<{ uid: number; gid: number }> {
  const line = (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`user ${name} does not exist`);
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

function killQuietly(pid: number): void {
  signalQuietly(pid, 'SIGKILL');
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** Pids of every process below `pid` (from /proc), deepest last. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // the command name may hold spaces and parentheses: the ppid follows the last ')'
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // the process ended while we looked
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}
