/**
 * A sidecar's workload identity, made at its start when mutual TLS is on (`--enable-mtls`,
 * RT_MTLS_ENABLED=true): certificates from the issuer at `--identity-issuer-address` (on a cluster
 * the operator's CA service, its serving certificate checked with RT_OPERATOR_CA_FILE, the pod's
 * projected token as proof), or standalone without an issuer address from the local CA under
 * RT_HOME (`<rt home>/identity/ca.crt` and `ca.key`, made on first use, readable by the user only).
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { SidecarOptions } from '../options.ts';
import { rtHome } from '../../../shared/rt-home.ts';
import { IdentityManager, type Signer } from './manager.ts';
import { CredentialBundleSource } from './credential-bundle.ts';
import { GrpcSigner, LocalSigner } from './signers.ts';
import { workloadIdProblem } from '../../../shared/spiffe.ts';
import { createRootCa, type SigningCa } from './x509.ts';

export const DEFAULT_TRUST_DOMAIN = 'cluster.local';
/** The projected service-account token a pod proves itself with (the operator's default too). */
const DEFAULT_TOKEN_FILE = '/var/run/secrets/rt.io/token';
/** Life of the local CA's certificates: renewed at 70%, so a laptop sees renewals daily. */
const LOCAL_TTL_MS = 24 * 3_600_000;

/** Undefined when mTLS is off. Settles after the first request for a certificate, whatever its outcome. */
export async function startIdentity(o: SidecarOptions, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<IdentityManager | undefined> {
  const m = o.mtls;
  if (!m) return undefined;
  const trustDomain = m.trustDomain || DEFAULT_TRUST_DOMAIN;
  let signer: Signer;
  // where the cluster serves PodCertificateRequests, the kubelet holds the key and rotates the certificate
  const bundleFile = env.RT_IDENTITY_CREDENTIAL_BUNDLE_FILE;
  if (bundleFile) {
    signer = new CredentialBundleSource(bundleFile, m.trustAnchorsFile);
  } else if (m.issuerAddress) {
    signer = new GrpcSigner({
      address: m.issuerAddress,
      // read at start: a CA file that cannot be read stops the sidecar with the path in the message
      caPem: m.issuerCaFile ? readFileSync(m.issuerCaFile) : undefined,
      tokenFile: m.tokenFile ?? (o.mode === 'kubernetes' ? DEFAULT_TOKEN_FILE : undefined),
    });
  } else if (o.mode === 'standalone') {
    const dir = join(rtHome(env), 'identity');
    const ca = await localCa(dir);
    signer = new LocalSigner({ trustDomain, ca, trustBundlePem: ca.certPem, ttlMs: LOCAL_TTL_MS }, `local CA ${dir}`);
  } else {
    throw new Error('--enable-mtls in kubernetes mode needs the issuer: --identity-issuer-address (env RT_IDENTITY_ISSUER_ADDRESS)');
  }
  const id = { trustDomain, namespace: o.namespace, appId: o.appId };
  const problem = workloadIdProblem(id);
  if (problem) throw new Error(`--enable-mtls: this sidecar cannot have a workload identity: ${problem}`);
  const manager = new IdentityManager({
    id,
    signer,
    log,
    trustAnchorsPem: m.trustAnchorsFile ? readFileSync(m.trustAnchorsFile, 'utf8') : undefined,
  });
  await manager.start();
  return manager;
}

/**
 * The local CA of `rt run --enable-mtls`: read, or made once. Two sidecars starting together may
 * both make one; each writes its own folder and renames it into place, and the loser reads the
 * winner's, so a key and a certificate that do not belong together are never read.
 */
export async function localCa(dir: string): Promise<SigningCa> {
  const read = (): SigningCa => ({ certPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(dir, 'ca.key'), 'utf8') });
  try {
    return read();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const ca = await createRootCa({ commonName: 'rt local identity root', ttlMs: 10 * 365 * 24 * 3_600_000 });
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  mkdirSync(tmp, { recursive: true, mode: 0o700 });
  writeFileSync(join(tmp, 'ca.key'), ca.keyPem, { mode: 0o600 });
  writeFileSync(join(tmp, 'ca.crt'), ca.certPem, { mode: 0o600 });
  try {
    renameSync(tmp, dir);
    return ca;
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    if (!['ENOTEMPTY', 'EEXIST'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
    return read();
  }
}
