/**
 * Confinement of request `fileName`s to the component's `rootPath`.
 *
 * Paths on an SFTP server are POSIX paths whatever the sidecar's OS, so everything here uses
 * `node:path/posix`. Confinement is lexical: the name is normalised and must stay below the
 * root, so nothing outside it is ever opened, listed, written or removed. (A symbolic link
 * placed inside the root by someone with shell access to the server is followed by the server;
 * the binding itself cannot create links.)
 */
import { posix } from 'node:path';
import { malformed } from '../../../http/errors.ts';

/** Longest fileName accepted (PATH_MAX on Linux). */
export const MAX_FILE_NAME = 4096;

/** Normalises a configured rootPath: no trailing slash (except `/` itself). */
export function normalizeRoot(rootPath: string): string {
  const n = posix.normalize(rootPath);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

export interface Resolved {
  /** Path sent to the server. */
  remote: string;
  /** Normalised path relative to the root; `.` is the root itself. */
  relative: string;
}

/**
 * Resolves `fileName` below `root`. Throws a 400 ApiError (nothing has been touched yet) when
 * the name is absolute, holds a NUL byte, is too long, or climbs out of the root with `..`.
 * `allowRoot` lets `list` name the root itself (`.` or `dir/..`).
 */
export function resolveInRoot(root: string, fileName: string, opts: { allowRoot?: boolean; what?: string } = {}): Resolved {
  const what = opts.what ?? 'fileName';
  if (fileName.includes('\0')) throw malformed(`metadata.${what} must not contain NUL bytes`);
  if (fileName.length > MAX_FILE_NAME) throw malformed(`metadata.${what} is longer than ${MAX_FILE_NAME} characters`);
  if (fileName.startsWith('/')) {
    throw malformed(`metadata.${what} "${fileName}" is absolute; give a path relative to the binding's rootPath`);
  }
  const relative = posix.normalize(fileName);
  if (relative === '..' || relative.startsWith('../')) {
    throw malformed(`metadata.${what} "${fileName}" points outside the binding's rootPath; ".." may not climb above it`);
  }
  const rel = relative.endsWith('/') && relative.length > 1 ? relative.slice(0, -1) : relative;
  if (rel === '.' && !opts.allowRoot) {
    throw malformed(`metadata.${what} "${fileName}" names the rootPath itself, not a file below it`);
  }
  const remote = rel === '.' ? root : root === '/' ? `/${rel}` : `${root}/${rel}`;
  return { remote, relative: rel };
}

/** True when `remote` is `root` or lies below it (the invariant resolveInRoot keeps). */
export function isWithinRoot(root: string, remote: string): boolean {
  if (remote === root) return true;
  return root === '/' ? remote.startsWith('/') : remote.startsWith(`${root}/`);
}
