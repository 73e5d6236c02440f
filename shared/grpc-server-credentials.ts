/**
 * gRPC server credentials for rt's control plane (the operator, the scheduler) that read their
 * PEM material again when it changes, and ask for a client certificate the way each server needs:
 *
 * - `request`: the TLS handshake asks for a client certificate but goes on without one
 *   (`requestCert` without `rejectUnauthorized`); a certificate that verifies against `ca` marks
 *   the socket authorized, and grpc-js then hands it to the call (`call.getAuthContext()`). The
 *   operator takes a workload certificate this way as an alternative to its bearer token.
 * - `require`: no connection without a client certificate from `ca` (the scheduler on a cluster).
 * - `none`: server-side TLS only.
 *
 * grpc-js's own `createSsl(…, checkClientCertificate)` ties requesting to requiring, and its
 * certificate-provider credentials are experimental; this subclass gives the constructor options
 * itself and pushes a new secure context to every bound port (`setSecureContext`) when the
 * files change. Kubernetes swaps a mounted Secret's files through a symlink, so the files are
 * compared by content, polled.
 */
import { readFileSync } from 'node:fs';
import type { SecureContextOptions } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';

export type ClientCertificateMode = 'none' | 'request' | 'require';

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** The roots client certificates are verified against (one or more PEM certificates). */
  ca?: Buffer;
}

/** Where the material comes from: files (re-read while serving), or fixed buffers. */
export type TlsSource = { certFile: string; keyFile: string; caFile?: string } | TlsMaterial;

export interface ReloadingCredentialsOptions {
  clientCertificate: ClientCertificateMode;
  /** How often the files are compared (default 5 s). */
  pollMs?: number;
  log?: Logger;
}

function read(source: TlsSource): TlsMaterial {
  if ('cert' in source) return source;
  return { cert: readFileSync(source.certFile), key: readFileSync(source.keyFile), ca: source.caFile ? readFileSync(source.caFile) : undefined };
}

const same = (a: TlsMaterial, b: TlsMaterial) => a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca && b.ca ? a.ca.equals(b.ca) : a.ca === b.ca);

function context(m: TlsMaterial): SecureContextOptions {
  return { cert: m.cert, key: m.key, ...(m.ca ? { ca: m.ca } : {}) };
}

/** Server credentials that read their files again when they change (see the head of this file). */
export interface ReloadingServerCredentials extends grpc.ServerCredentials {
  /** Compares the files with what is served; a change becomes the secure context of every bound port. */
  reload(): boolean;
}

type ReloadingCtor = new (source: TlsSource, opts: ReloadingCredentialsOptions) => ReloadingServerCredentials;
let Reloading: ReloadingCtor | undefined;

/**
 * Made at the first call: a class that extends grpc-js's would read grpc-js when this module
 * loads, and the sidecar bundles this module (its embedded scheduler) without serving gRPC at
 * start (grpc-js loads on first use: images/bundle.ts).
 */
export function reloadingServerCredentials(source: TlsSource, opts: ReloadingCredentialsOptions): ReloadingServerCredentials {
  Reloading ??= reloadingClass();
  return new Reloading(source, opts);
}

function reloadingClass(): ReloadingCtor {
  return class Reloading extends grpc.ServerCredentials {
    private readonly source: TlsSource;
    private readonly pollMs: number;
    private readonly log: Logger | undefined;
    private current: TlsMaterial;
    private timer: NodeJS.Timeout | undefined;
    private bound = 0;

    /** Reads the material now: a missing or unreadable file fails here, not at the first client. */
    constructor(source: TlsSource, opts: ReloadingCredentialsOptions) {
      const material = read(source);
      if (opts.clientCertificate !== 'none' && !material.ca) throw new Error('a client certificate can only be checked against a CA (trust bundle)');
      super(
        {
          requestCert: opts.clientCertificate !== 'none',
          rejectUnauthorized: opts.clientCertificate === 'require',
          minVersion: 'TLSv1.2',
        },
        context(material),
      );
      this.source = source;
      this.current = material;
      this.pollMs = opts.pollMs ?? 5000;
      this.log = opts.log;
    }

    /** Compares the files with what is served; a change becomes the secure context of every bound port. */
    reload(): boolean {
      if ('cert' in this.source) return false;
      let next: TlsMaterial;
      try {
        next = read(this.source);
      } catch (e) {
        // mid-swap or removed: keep serving what was read last
        this.log?.warn(`TLS files cannot be read, serving the previous ones: ${(e as Error).message}`);
        return false;
      }
      if (same(next, this.current)) return false;
      this.current = next;
      this.updateSecureContextOptions(context(next));
      this.log?.info('TLS certificate, key or trust bundle changed: new connections use the new ones');
      return true;
    }

    override _addWatcher(watcher: Parameters<grpc.ServerCredentials['_addWatcher']>[0]): void {
      super._addWatcher(watcher);
      if (this.bound++ === 0 && !('cert' in this.source)) {
        this.timer = setInterval(() => this.reload(), this.pollMs);
        this.timer.unref();
      }
    }

    override _removeWatcher(watcher: Parameters<grpc.ServerCredentials['_removeWatcher']>[0]): void {
      super._removeWatcher(watcher);
      if (--this.bound === 0) clearInterval(this.timer);
    }

    _equals(other: grpc.ServerCredentials): boolean {
      return other === this;
    }
  };
}

type AuthContext = ReturnType<grpc.ServerUnaryCall<unknown, unknown>['getAuthContext']>;

/** The peer certificate of a call when the client presented one that verified against the server's CA. */
export function verifiedPeerCertificate(call: { getAuthContext(): AuthContext }): AuthContext['sslPeerCertificate'] {
  // grpc-js gives the certificate only on an authorized socket (verified against `ca`)
  return call.getAuthContext().sslPeerCertificate;
}
