/**
 * A throwaway certificate authority for loopback TLS tests (Azure stand-ins, the scheduler), made with the openssl
 * CLI: a CA certificate and one server certificate for localhost / 127.0.0.1 / ::1.
 * `trust()` adds the CA to this process's default trust store (node:tls
 * setDefaultCACertificates), which fetch, undici and node:https all use; for a child process
 * pass `caFile` as NODE_EXTRA_CA_CERTS.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';

export interface TestCa {
  dir: string;
  caFile: string;
  caPem: string;
  /** Server key and certificate (PEM), valid for localhost, 127.0.0.1 and ::1. */
  key: string;
  cert: string;
  /** Makes this process trust the CA for every TLS client that uses the defaults. */
  trust(): void;
  /** Removes the files (the trust setting stays for the life of the process). */
  remove(): void;
}

export function makeTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'rt-test-ca-'));
  const f = (n: string) => join(dir, n);
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-subj', '/CN=rt loopback test CA', '-days', '2',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  run(['req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost']);
  writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  run(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.crt'), '-days', '2', '-extfile', f('ext.cnf')]);
  const caPem = readFileSync(f('ca.crt'), 'utf8');
  return {
    dir,
    caFile: f('ca.crt'),
    caPem,
    key: readFileSync(f('server.key'), 'utf8'),
    cert: readFileSync(f('server.crt'), 'utf8'),
    trust() {
      const current = getCACertificates('default');
      if (!current.includes(caPem)) setDefaultCACertificates([...current, caPem]);
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
