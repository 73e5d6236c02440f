/**
 * A real Kubernetes control plane: etcd (Debian's etcd-server), kube-apiserver and
 * kube-controller-manager built from the pinned release, with certificates made for the run.
 * The API server serves https://127.0.0.1:<free port> (or the host's address on the node's veth,
 * with `podNetwork`), authorizes with Node,RBAC, runs the
 * mutating and validating admission webhooks, and accepts service-account tokens for the
 * audiences `<issuer>` and `rt.io/operator`.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { startEtcd, type EtcdTarget } from '../etcd.ts';
import { freePort } from '../net.ts';
import { ensureKubeBinaries, ensureKubectlAndHelm } from './binaries.ts';
import { makeClusterPki, writeKubeconfig, type ClusterPki, type IssuedCert } from './pki.ts';
import { createNodeNetwork, type NodeNetwork } from './network.ts';
import { pollUntil, startProcess, type ClusterProcess } from './processes.ts';
import { makeRunDir } from './run-dir.ts';

export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const OPERATOR_AUDIENCE = 'rt.io/operator';
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ControlPlane {
  dir: string;
  /** Admin kubeconfig (client certificate in group system:masters). */
  kubeconfig: string;
  server: string;
  ca: { caFile: string; caPem: string };
  pki: ClusterPki;
  admin: IssuedCert;
  binDir: string;
  kubectlBin: string;
  helmBin: string;
  processes: ClusterProcess[];
  etcd: EtcdTarget;
  /** The node's network namespace, veth and ranges, when started with `podNetwork`. */
  network?: NodeNetwork;
  /** The API server's audit log (JSON lines), when started with `audit`: writes to rt.io objects and Leases. */
  auditLog?: string;
}

/** What the audit log records: who changed rt.io objects and Leases, and when (no bodies). */
const AUDIT_POLICY = {
  apiVersion: 'audit.k8s.io/v1',
  kind: 'Policy',
  omitStages: ['RequestReceived'],
  rules: [
    { level: 'Metadata', verbs: ['create', 'update', 'patch', 'delete'], resources: [{ group: 'rt.io' }, { group: 'coordination.k8s.io', resources: ['leases'] }] },
    { level: 'None' },
  ],
};

function runTool(bin: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<CommandResult> {
  return import('node:child_process').then(
    ({ spawn }) =>
      new Promise((resolve, reject) => {
        const p = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        p.once('error', reject);
        p.once('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
        p.stdin.end(input ?? '');
      }),
  );
}

export function kubectlRunner(cp: ControlPlane) {
  return (args: string[], opts: { input?: string; namespace?: string; kubeconfig?: string } = {}) =>
    runTool(cp.kubectlBin, [...(opts.namespace ? ['-n', opts.namespace] : []), ...args], { KUBECONFIG: opts.kubeconfig ?? cp.kubeconfig }, opts.input);
}

export function helmRunner(cp: ControlPlane) {
  return (args: string[], opts: { input?: string } = {}) =>
    runTool(cp.helmBin, args, { KUBECONFIG: cp.kubeconfig, HELM_CACHE_HOME: join(cp.dir, 'helm', 'cache'), HELM_CONFIG_HOME: join(cp.dir, 'helm', 'config'), HELM_DATA_HOME: join(cp.dir, 'helm', 'data') }, opts.input);
}

/** One HTTPS call to the API server as the admin; JSON in, JSON (or text) out. */
export function apiRequest(cp: ControlPlane, method: string, path: string, body?: unknown, cert: IssuedCert = cp.admin): Promise<{ status: number; body: unknown; text: string }> {
  const url = new URL(path, cp.server);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: cp.ca.caPem,
        cert: cert.certPem,
        key: cert.keyPem,
        headers: payload ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' } : {},
        timeout: 30_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text });
        });
      },
    );
    req.once('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.once('error', reject);
    req.end(payload);
  });
}

/** A raw watch over HTTPS as the admin, one JSON event per line; `close()` drops the connection as a network fault would. */
export function apiWatch<E = { type: string; object: unknown }>(cp: ControlPlane, path: string, onEvent: (e: E) => void): { close(): void } {
  const req = request(new URL(path, cp.server), { ca: cp.ca.caPem, cert: cp.admin.certPem, key: cp.admin.keyPem }, (res) => {
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) onEvent(JSON.parse(line) as E);
      }
    });
    res.on('error', () => {});
  });
  req.on('error', () => {});
  req.end();
  return { close: () => req.destroy() };
}

/**
 * `podNetwork`: first make the node's network (network.ts); the API server then listens on the
 * host's end of the veth, where pods reach it through the `kubernetes` Service, and advertises
 * that address, so the endpoint reconciler keeps the Service's endpoints as on any cluster.
 * Without it, everything is on 127.0.0.1 (pods then need `hostNetwork`).
 */
/** Feature gates of the API server, controller manager and kubelet alike. */
export const FEATURE_GATES = 'PodCertificateRequest=true';

export async function startControlPlane(opts: { controllers?: boolean; podNetwork?: boolean; audit?: boolean; log?: (s: string) => void } = {}): Promise<ControlPlane> {
  const log = opts.log ?? (() => {});
  const [binDir, tools] = await Promise.all([ensureKubeBinaries(log), ensureKubectlAndHelm()]);
  const dir = makeRunDir();
  const processes: ClusterProcess[] = [];
  let etcd: EtcdTarget | undefined;
  let network: NodeNetwork | undefined;
  const cleanup = async () => {
    for (const p of [...processes].reverse()) await p.stop();
    await etcd?.stop();
    // last: while the API server ran, a route into the node kept its Service traffic on this machine
    await network?.remove();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (opts.podNetwork) network = await createNodeNetwork(dir, log);
    const address = network?.hostAddress ?? '127.0.0.1';
    const pki = makeClusterPki(dir);
    mkdirSync(join(dir, 'etcd'), { mode: 0o700 });
    etcd = await startEtcd({ dataDir: join(dir, 'etcd') });
    if (!etcd.available) throw new Error(`etcd for the control plane: ${etcd.why}`);
    const port = await freePort();
    const server = `https://${address}:${port}`;
    const serving = pki.issue('apiserver', {
      cn: 'kube-apiserver',
      usage: 'server',
      sans: [
        ...new Set(['IP:127.0.0.1', `IP:${address}`, `IP:${network?.apiServiceAddress ?? '10.96.0.1'}`]),
        'DNS:localhost',
        'DNS:kubernetes',
        'DNS:kubernetes.default',
        'DNS:kubernetes.default.svc',
        'DNS:kubernetes.default.svc.cluster.local',
      ],
    });
    const kubeletClient = pki.issue('apiserver-kubelet-client', { cn: 'kube-apiserver-kubelet-client', orgs: ['system:masters'], usage: 'client' });
    const admin = pki.issue('admin', { cn: 'rt-test-admin', orgs: ['system:masters'], usage: 'client' });
    const kubeconfig = writeKubeconfig(join(dir, 'admin.kubeconfig'), server, pki.caFile, 'admin', admin);
    const auditLog = opts.audit ? join(dir, 'audit.log') : undefined;
    if (auditLog) writeFileSync(join(dir, 'audit-policy.json'), JSON.stringify(AUDIT_POLICY));
    const apiserver = startProcess(dir, 'kube-apiserver', join(binDir, 'kube-apiserver'), [
      `--etcd-servers=${etcd.endpoints.map((e) => `http://${e}`).join(',')}`,
      `--bind-address=${address}`,
      `--advertise-address=${address}`,
      `--secure-port=${port}`,
      // a loopback advertise address is refused by the default endpoint reconciler
      ...(network ? [] : ['--endpoint-reconciler-type=none']),
      // the node's InternalIP (its Hostname would be looked up in the machine's DNS); without a
      // pod network the kubelet reports the machine's own interface, which is never dialled:
      // ExternalDNS, which the node has not, leaves `kubectl logs` with "no preferred addresses"
      `--kubelet-preferred-address-types=${network ? 'InternalIP' : 'ExternalDNS'}`,
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${serving.certFile}`,
      `--tls-private-key-file=${serving.keyFile}`,
      `--client-ca-file=${pki.caFile}`,
      `--kubelet-client-certificate=${kubeletClient.certFile}`,
      `--kubelet-client-key=${kubeletClient.keyFile}`,
      `--kubelet-certificate-authority=${pki.caFile}`,
      `--service-account-key-file=${pki.saPubFile}`,
      `--service-account-signing-key-file=${pki.saKeyFile}`,
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--api-audiences=${SERVICE_ACCOUNT_ISSUER},${OPERATOR_AUDIENCE}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook',
      `--service-cluster-ip-range=${network?.serviceCidr ?? '10.96.0.0/16'}`,
      '--allow-privileged=true',
      '--profiling=false',
      // PodCertificateRequests (beta in 1.35, off by default): rt's identity signer is tested on them
      `--feature-gates=${FEATURE_GATES}`,
      '--runtime-config=certificates.k8s.io/v1beta1/podcertificaterequests=true',
      ...(auditLog ? [`--audit-log-path=${auditLog}`, `--audit-policy-file=${join(dir, 'audit-policy.json')}`, '--audit-log-mode=blocking'] : []),
      '--v=1',
    ]);
    processes.push(apiserver);
    const cp: ControlPlane = { dir, kubeconfig, server, ca: { caFile: pki.caFile, caPem: pki.caPem }, pki, admin, binDir, kubectlBin: tools.kubectl, helmBin: tools.helm, processes, etcd, network, auditLog };
    await pollUntil(
      'kube-apiserver /readyz ok',
      async () => {
        if (apiserver.exited) throw new Error('exited');
        const r = await apiRequest(cp, 'GET', '/readyz');
        return r.status === 200;
      },
      120_000,
      () => `kube-apiserver ${apiserver.exited ? 'exited' : 'is still starting'}; its log ends:\n${apiserver.tail()}`,
    );
    if (apiserver.exited) throw new Error(`kube-apiserver exited: ${apiserver.tail()}`);
    if (opts.controllers !== false) {
      const cm = pki.issue('controller-manager', { cn: 'system:kube-controller-manager', usage: 'client' });
      const cmKubeconfig = writeKubeconfig(join(dir, 'controller-manager.kubeconfig'), server, pki.caFile, 'system:kube-controller-manager', cm);
      processes.push(
        startProcess(dir, 'kube-controller-manager', join(binDir, 'kube-controller-manager'), [
          `--kubeconfig=${cmKubeconfig}`,
          `--authentication-kubeconfig=${cmKubeconfig}`,
          `--authorization-kubeconfig=${cmKubeconfig}`,
          '--bind-address=127.0.0.1',
          `--secure-port=${await freePort()}`,
          `--cert-dir=${join(dir, 'controller-manager-certs')}`,
          `--service-account-private-key-file=${pki.saKeyFile}`,
          `--root-ca-file=${pki.caFile}`,
          '--use-service-account-credentials=true',
          // no pod network: no node CIDRs to hand out
          '--controllers=*,-nodeipam',
          '--leader-elect=false',
          '--profiling=false',
          `--feature-gates=${FEATURE_GATES}`,
        ]),
      );
    }
    return cp;
  } catch (e) {
    await cleanup();
    throw e;
  }
}

export async function stopControlPlane(cp: ControlPlane): Promise<void> {
  for (const p of [...cp.processes].reverse()) await p.stop();
  await cp.etcd.stop();
  await cp.network?.remove();
  rmSync(cp.dir, { recursive: true, force: true });
}
