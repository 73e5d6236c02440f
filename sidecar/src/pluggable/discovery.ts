/**
 * The socket folder: which sockets are there, what each serves (gRPC reflection), and waiting
 * for a socket that is not there yet. One SocketDirectory per sidecar.
 */
import { readdir as readdirCb, stat as statCb } from 'node:fs';
import { extname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { listServices } from './reflection.ts';

export interface SocketInfo {
  /** File name without extension: the `<name>` in `state.<name>`. */
  name: string;
  path: string;
  /** Full gRPC service names the socket serves. */
  services: Set<string>;
}

// node:fs's callback forms: every sidecar lists this folder at start, and node:fs/promises (with
// its file handles, watchers and streams) is ~1 MB of RSS that an idle sidecar otherwise never loads
const readdir = promisify(readdirCb);
const stat = promisify(statCb);

/** How long one socket may take to answer reflection at start. */
export const REFLECTION_TIMEOUT_MS = 3000;
const POLL_MS = 100;

/** gRPC target of a socket path. */
export function socketAddress(path: string): string {
  return `unix:${path}`;
}

/** Component name of a socket file: its name without the (last) extension. */
export function socketName(file: string): string {
  const ext = extname(file);
  return ext ? file.slice(0, -ext.length) : file;
}

/** Socket files in the folder (other files are ignored); none when the folder is missing. */
export async function listSocketFiles(folder: string): Promise<{ name: string; path: string }[]> {
  let files: string[];
  try {
    files = await readdir(folder);
  } catch {
    return [];
  }
  const out: { name: string; path: string }[] = [];
  for (const f of files.sort()) {
    const path = join(folder, f);
    const s = await stat(path).catch(() => undefined);
    if (s?.isSocket()) out.push({ name: socketName(f), path });
  }
  return out;
}

export async function inspectSocket(name: string, path: string, timeoutMs = REFLECTION_TIMEOUT_MS): Promise<SocketInfo> {
  const services = await listServices(socketAddress(path), timeoutMs);
  return { name, path, services: new Set(services) };
}

export class SocketDirectory {
  readonly folder: string;
  private readonly log: Logger;
  private readonly known = new Map<string, SocketInfo>();

  constructor(folder: string, log: Logger) {
    this.folder = folder;
    this.log = log;
  }

  /** Lists the folder and asks every socket what it serves. A socket that does not answer is skipped. */
  async discoverAll(): Promise<SocketInfo[]> {
    const files = await listSocketFiles(this.folder);
    const found = await Promise.all(
      files.map(async ({ name, path }) => {
        try {
          return await inspectSocket(name, path);
        } catch (e) {
          this.log.warn({ socket: path }, `pluggable component socket ${path} did not answer gRPC reflection (${(e as Error).message}); skipped`);
          return undefined;
        }
      }),
    );
    for (const s of found) if (s) this.known.set(s.name, s);
    return found.filter((s): s is SocketInfo => s !== undefined);
  }

  get(name: string): SocketInfo | undefined {
    return this.known.get(name);
  }

  /**
   * The socket of a component name, waiting until `deadline` for it to appear and answer.
   * Throws a message naming the socket path when it does not.
   */
  async locate(name: string, deadline: number): Promise<SocketInfo> {
    const cached = this.known.get(name);
    if (cached) return cached;
    let lastError: string | undefined;
    let path: string | undefined;
    for (;;) {
      const file = (await listSocketFiles(this.folder)).find((f) => f.name === name);
      if (file) {
        path = file.path;
        try {
          const info = await inspectSocket(name, file.path, Math.max(100, Math.min(REFLECTION_TIMEOUT_MS, deadline - Date.now())));
          this.known.set(name, info);
          return info;
        } catch (e) {
          lastError = (e as Error).message;
        }
      }
      if (Date.now() + POLL_MS > deadline) break;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    const expected = path ?? join(this.folder, `${name}.sock`);
    const why = lastError ? `the socket ${expected} exists but does not answer (${lastError})` : `the socket ${expected} does not exist`;
    throw new Error(`${why}. A pluggable component must be started before the runtime: start the component so that it listens on ${expected}, then start rt`);
  }
}
