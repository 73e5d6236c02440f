/**
 * Metadata of a `bindings.sftp` component: parsed and checked once at init, so that every
 * mistake is reported when the sidecar starts, with a message that says how to fix it.
 * Secret values (password, privateKey, privateKeyPassphrase) never appear in messages.
 */
import { existsSync, readFileSync } from 'node:fs';
import { anyOf, decodeMetadata, defineMetadata } from '../../metadata/decode.ts';
import { normalizeRoot } from './paths.ts';
import { parseHostPublicKey, type HostKey } from './hostkeys.ts';

/**
 * How the server is validated. `insecureIgnoreHostKey: "true"` skips validation even when keys
 * are configured (the contract says it skips it); otherwise the presented key must be one of
 * `hostPublicKey`'s or match the known_hosts file (either suffices when both are set).
 */
export type HostKeyPolicy = { kind: 'verify'; fixed: HostKey[]; knownHostsFile?: string } | { kind: 'insecure' };

export interface SftpMetadata {
  rootPath: string;
  host: string;
  port: number;
  username: string;
  password?: string;
  /** Private key text (PEM or OpenSSH); read from a file when the metadata held a path. */
  privateKey?: string;
  privateKeyPassphrase?: string;
  hostKeys: HostKeyPolicy;
}

export const METADATA = defineMetadata(
  'bindings.sftp',
  {
    rootPath: { type: 'string', required: true, doc: 'the folder every operation stays within' },
    address: { type: 'string', required: true, doc: 'host:port, e.g. sftp.example.com:22' },
    username: { type: 'string', required: true },
    password: { type: 'string', secret: true },
    privateKey: { type: 'string', secret: true },
    privateKeyPassphrase: { type: 'string', secret: true },
    hostPublicKey: { type: 'string' },
    knownHostsFile: { type: 'string' },
    insecureIgnoreHostKey: { type: 'boolean', default: false },
  },
  [anyOf(['password', 'privateKey'], 'the binding needs a way to log in')],
);

/** Parses the component's metadata; throws an Error whose message names the field to fix. */
export function parseMetadata(raw: Record<string, string>): SftpMetadata {
  const md = decodeMetadata(METADATA, raw);
  const { host, port } = parseAddress(md.address.trim());
  // one of them is set (the declaration's rule)
  const password = md.password;
  const privateKey = readPrivateKey(md.privateKey);

  const hostPublicKey = md.hostPublicKey;
  const knownHostsFile = md.knownHostsFile;
  if (knownHostsFile !== undefined && !existsSync(knownHostsFile)) throw new Error(`knownHostsFile "${knownHostsFile}" does not exist`);
  const fixed = hostPublicKey !== undefined ? parseHostPublicKey(hostPublicKey) : [];
  let hostKeys: HostKeyPolicy;
  if (md.insecureIgnoreHostKey) {
    hostKeys = { kind: 'insecure' };
  } else if (fixed.length || knownHostsFile !== undefined) {
    hostKeys = { kind: 'verify', fixed, knownHostsFile };
  } else {
    throw new Error(
      `the server's host key cannot be verified: set "hostPublicKey" (a key line such as "ssh-ed25519 AAAA…", ` +
        `e.g. from \`ssh-keyscan -p ${port} ${host}\` without the leading host name) or "knownHostsFile" ` +
        '(an OpenSSH known_hosts file); only for tests, "insecureIgnoreHostKey": "true" skips the check',
    );
  }

  return { rootPath: normalizeRoot(md.rootPath), host, port, username: md.username, password, privateKey, privateKeyPassphrase: md.privateKeyPassphrase, hostKeys };
}

/** `host`, `host:port`, `[v6]` or `[v6]:port`; the port defaults to 22. */
export function parseAddress(address: string): { host: string; port: number } {
  let host: string;
  let portText: string | undefined;
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(address);
  if (v6) {
    host = v6[1];
    portText = v6[2];
  } else if ((address.match(/:/g) ?? []).length > 1) {
    host = address; // a bare IPv6 address
  } else {
    const i = address.lastIndexOf(':');
    host = i >= 0 ? address.slice(0, i) : address;
    portText = i >= 0 ? address.slice(i + 1) : undefined;
  }
  if (!host || /\s/.test(host)) throw new Error(`"address" "${address}" must be host:port, e.g. sftp.example.com:22`);
  let port = 22;
  if (portText !== undefined) {
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
      throw new Error(`"address" "${address}" has an invalid port; use host:port with a port from 1 to 65535`);
    }
    port = Number(portText);
  }
  return { host, port };
}

/**
 * The key text; a value that is not key text but names an existing file is read from it (keys
 * mounted from a Kubernetes Secret). Single-line values with literal `\n` are unescaped, since
 * YAML and env files often carry keys that way.
 */
function readPrivateKey(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  const text = v.trim();
  if (text.startsWith('-----BEGIN')) return text.includes('\n') ? `${text}\n` : `${text.replace(/\\n/g, '\n')}\n`;
  if (!text.includes('\n') && existsSync(text)) {
    try {
      return readFileSync(text, 'utf8');
    } catch (e) {
      throw new Error(`privateKey names the file "${text}", which cannot be read: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  // never echo the value: it may be a key
  throw new Error('privateKey must be a PEM or OpenSSH private key ("-----BEGIN … PRIVATE KEY-----") or the path of a file holding one');
}
