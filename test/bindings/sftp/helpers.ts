/** Shared pieces of the SFTP binding suites: a real sshd, component specs, calls, reads. */
import { Writable } from 'node:stream';
import { Readable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { requireService } from '../../services/ci.ts';
import { sshdUnavailable, type SshdServer } from '../../services/sshd.ts';
import { SftpBinding } from '../../../sidecar/src/components/bindings/sftp/index.ts';
import type { BindingResponse, ComponentSpec } from '../../../sidecar/src/components/types.ts';

export const sshdAvailable = requireService('sshd', sshdUnavailable() === undefined, sshdUnavailable() ?? '');

/** Metadata for password login with the server's ed25519 host key pinned. */
export function baseMetadata(s: SshdServer): Record<string, string> {
  return { rootPath: s.root, address: s.address, username: s.username, password: s.password, hostPublicKey: s.hostKeys.ed25519 };
}

export function spec(metadata: Record<string, string>, name = 'files'): ComponentSpec {
  return { name, type: 'bindings.sftp', version: 'v1', metadata, secretKeys: [], initTimeoutMs: 30_000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test' };
}

/** A logger whose lines are kept, to assert on them (and that secrets never show up). */
export function capturingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

export async function initBinding(metadata: Record<string, string>, log: Logger = pino({ level: 'silent' })): Promise<SftpBinding> {
  const b = new SftpBinding();
  try {
    await b.init(spec(metadata), { appId: 'test', namespace: 'default', listenAddress: '127.0.0.1', log });
  } catch (e) {
    await b.close();
    throw e;
  }
  return b;
}

export async function bytesOf(res: BindingResponse): Promise<Buffer> {
  if (res.data === undefined) return Buffer.alloc(0);
  if (res.data instanceof Readable) {
    const chunks: Buffer[] = [];
    for await (const c of res.data) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }
  return Buffer.from(res.data);
}

export async function jsonOf(res: BindingResponse): Promise<unknown> {
  return JSON.parse((await bytesOf(res)).toString('utf8'));
}

export function op(operation: string, metadata: Record<string, string> = {}, data?: unknown) {
  return { operation, metadata, data };
}

/** Deterministic bytes covering every byte value. */
export function binary(size: number, seed = 1): Buffer {
  const b = Buffer.allocUnsafe(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

/** A resources-folder Component file for bindings.sftp. */
export function componentYaml(name: string, md: Record<string, string>): string {
  const lines = Object.entries(md).map(([k, v]) => `    - name: ${k}\n      value: ${JSON.stringify(v)}`);
  return `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: bindings.sftp\n  version: v1\n  metadata:\n${lines.join('\n')}\n`;
}
