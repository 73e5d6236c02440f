/**
 * Certificates and kubeconfigs for a test cluster, made with the openssl CLI: one CA that signs
 * the API server's serving certificate and every client certificate (admin, controllers, the
 * kubelet), and a service-account signing key pair.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface IssuedCert {
  certFile: string;
  keyFile: string;
  certPem: string;
  keyPem: string;
}

export interface ClusterPki {
  dir: string;
  caFile: string;
  caKeyFile: string;
  caPem: string;
  saKeyFile: string;
  saPubFile: string;
  /** A certificate signed by the CA: `client` for users and components, `server` for listeners. */
  issue(name: string, opts: { cn: string; orgs?: string[]; sans?: string[]; usage: 'client' | 'server' | 'both' }): IssuedCert;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

export function makeClusterPki(dir: string): ClusterPki {
  const f = (n: string) => join(dir, n);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-subj', '/CN=rt test cluster CA', '-days', '3',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature']);
  // service-account tokens are signed with RS256 by default: an RSA key
  openssl(dir, ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', f('sa.key')]);
  openssl(dir, ['pkey', '-in', f('sa.key'), '-pubout', '-out', f('sa.pub')]);
  let serial = 1;
  return {
    dir,
    caFile: f('ca.crt'),
    caKeyFile: f('ca.key'),
    caPem: readFileSync(f('ca.crt'), 'utf8'),
    saKeyFile: f('sa.key'),
    saPubFile: f('sa.pub'),
    issue(name, { cn, orgs = [], sans = [], usage }) {
      const subj = `${orgs.map((o) => `/O=${o}`).join('')}/CN=${cn}`;
      openssl(dir, ['req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', subj]);
      const eku = usage === 'client' ? 'clientAuth' : usage === 'server' ? 'serverAuth' : 'serverAuth,clientAuth';
      const ext = [`basicConstraints=CA:FALSE`, `keyUsage=critical,digitalSignature,keyEncipherment`, `extendedKeyUsage=${eku}`];
      if (sans.length) ext.push(`subjectAltName=${sans.join(',')}`);
      writeFileSync(f(`${name}.ext`), ext.join('\n') + '\n');
      openssl(dir, ['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-set_serial', String(Date.now() * 100 + serial++),
        '-out', f(`${name}.crt`), '-days', '3', '-extfile', f(`${name}.ext`)]);
      return { certFile: f(`${name}.crt`), keyFile: f(`${name}.key`), certPem: readFileSync(f(`${name}.crt`), 'utf8'), keyPem: readFileSync(f(`${name}.key`), 'utf8') };
    },
  };
}

/** A kubeconfig for one client certificate against one server. */
export function writeKubeconfig(file: string, server: string, caFile: string, user: string, cert: IssuedCert): string {
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: rt-test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${caFile}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    client-certificate: ${cert.certFile}`,
    `    client-key: ${cert.keyFile}`,
    'contexts:',
    '- name: rt-test',
    '  context:',
    '    cluster: rt-test',
    `    user: ${user}`,
    'current-context: rt-test',
    '',
  ].join('\n');
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}
