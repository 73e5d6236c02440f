/**
 * Server host key verification: the fixed key of `hostPublicKey` (authorized_keys line form,
 * `ssh-ed25519 AAAA… comment`) or the entries of an OpenSSH `known_hosts` file that match the
 * server (`host`, `[host]:port`, wildcards, `!negations`, hashed `|1|salt|hash` entries and
 * `@revoked` markers; `@cert-authority` lines are skipped because the binding does not accept
 * host certificates).
 *
 * Keys are compared as their SSH wire blobs, in constant time.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Key types ssh2 can verify, and the host key algorithms that present each. */
const ALGORITHMS_BY_TYPE: Record<string, string[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
  'ssh-dss': ['ssh-dss'],
};

export interface HostKey {
  type: string;
  /** SSH wire-format public key blob. */
  blob: Buffer;
}

/** What the connection accepts: the keys, and the ones a known_hosts file revoked. */
export interface HostKeySet {
  keys: HostKey[];
  revoked: HostKey[];
}

/** Decodes `<type> <base64>` into a key, checking that the blob names the same type. */
export function decodeKey(type: string, b64: string): HostKey | undefined {
  if (!(type in ALGORITHMS_BY_TYPE)) return undefined;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return undefined;
  const blob = Buffer.from(b64, 'base64');
  if (blob.length < 4) return undefined;
  const n = blob.readUInt32BE(0);
  if (n + 4 > blob.length || blob.subarray(4, 4 + n).toString('latin1') !== type) return undefined;
  return { type, blob };
}

/**
 * Parses `hostPublicKey`: one or more lines `<type> <base64> [comment]` (a known_hosts line
 * with a leading host pattern is accepted too). Throws a message naming the problem.
 */
export function parseHostPublicKey(text: string): HostKey[] {
  const keys: HostKey[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const f = line.split(/\s+/);
    const i = f.findIndex((t) => t in ALGORITHMS_BY_TYPE);
    const key = i >= 0 && f[i + 1] ? decodeKey(f[i], f[i + 1]) : undefined;
    if (!key) {
      throw new Error(
        `hostPublicKey is not a public key line like "ssh-ed25519 AAAA…" (supported types: ${Object.keys(ALGORITHMS_BY_TYPE).join(', ')}); ` +
          'get it with: ssh-keyscan -p <port> <host>',
      );
    }
    keys.push(key);
  }
  if (keys.length === 0) throw new Error('hostPublicKey is empty');
  return keys;
}

/** The name known_hosts uses for a server: `host` on port 22, else `[host]:port`. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** The entries of a known_hosts text that apply to host:port. */
export function matchKnownHosts(text: string, host: string, port: number): HostKeySet {
  const name = knownHostsName(host, port).toLowerCase();
  const out: HostKeySet = { keys: [], revoked: [] };
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    let f = line.split(/\s+/);
    let revoked = false;
    if (f[0].startsWith('@')) {
      if (f[0] === '@revoked') revoked = true;
      else continue; // @cert-authority: host certificates are not supported
      f = f.slice(1);
    }
    if (f.length < 3) continue;
    const key = decodeKey(f[1], f[2]);
    if (!key) continue; // OpenSSH skips lines it cannot read, too
    if (!hostMatches(f[0], name)) continue;
    (revoked ? out.revoked : out.keys).push(key);
  }
  return out;
}

/** OpenSSH host list semantics: any negated match excludes, else any positive match includes. */
function hostMatches(patterns: string, name: string): boolean {
  if (patterns.startsWith('|1|')) return hashedMatches(patterns, name);
  let matched = false;
  for (const p of patterns.split(',')) {
    const negated = p.startsWith('!');
    const pattern = (negated ? p.slice(1) : p).toLowerCase();
    if (wildcard(pattern, name)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

function hashedMatches(entry: string, name: string): boolean {
  const [, , salt64, hash64] = entry.split('|');
  if (!salt64 || !hash64) return false;
  const expected = Buffer.from(hash64, 'base64');
  const actual = createHmac('sha1', Buffer.from(salt64, 'base64')).update(name).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** `*` any run, `?` any one character; the rest literal. */
function wildcard(pattern: string, s: string): boolean {
  if (!pattern.includes('*') && !pattern.includes('?')) return pattern === s;
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 's');
  return re.test(s);
}

/** Constant-time membership: every candidate is compared, whatever matched before. */
export function containsKey(keys: HostKey[], blob: Buffer): boolean {
  let found = false;
  for (const k of keys) {
    const same = k.blob.length === blob.length && timingSafeEqual(k.blob, blob);
    found = found || same;
  }
  return found;
}

/** Host key algorithms to offer so that the server presents a key we know (as OpenSSH does). */
export function algorithmsFor(keys: HostKey[]): string[] {
  const out: string[] = [];
  for (const k of keys) for (const a of ALGORITHMS_BY_TYPE[k.type] ?? []) if (!out.includes(a)) out.push(a);
  return out;
}

/** `ssh-ed25519 SHA256:…`, as ssh-keygen -l prints it: for error messages. */
export function fingerprint(blob: Buffer): string {
  let type = 'key';
  if (blob.length >= 4) {
    const n = blob.readUInt32BE(0);
    if (n + 4 <= blob.length) type = blob.subarray(4, 4 + n).toString('latin1');
  }
  return `${type} SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}
