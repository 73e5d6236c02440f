/**
 * Where the API server is and how to authenticate to it: a kubeconfig file (its current context:
 * server, CA, client certificate or bearer token) or the in-cluster service account. Our own
 * loader, because @kubernetes/client-node's KubeConfig pulls in its generated API models (~60 MB
 * of resident memory, see bench/results/operator.md) for what is a few fields of YAML.
 * exec and auth-provider plugins are not supported: give the operator or the injector a token or a certificate.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse } from 'yaml';

export interface KubeAccess {
  /** https://host:port (no trailing slash) */
  server: string;
  ca?: string;
  cert?: string;
  key?: string;
  /** false only with insecure-skip-tls-verify */
  rejectUnauthorized: boolean;
  servername?: string;
  /** The bearer token for the next request (re-read from its file: projected tokens rotate). */
  token(): string | undefined;
}

const IN_CLUSTER_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How long a token read from a file is used before it is read again. */
const TOKEN_REREAD_MS = 60_000;

type Named<T> = { name: string } & T;
interface KubeconfigFile {
  'current-context'?: string;
  contexts?: Named<{ context?: { cluster?: string; user?: string } }>[];
  clusters?: Named<{ cluster?: Record<string, unknown> }>[];
  users?: Named<{ user?: Record<string, unknown> }>[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** The named entries of a kubeconfig list (contexts, clusters, users); anything else is skipped. */
const entries = <T>(v: unknown): Named<T>[] => (Array.isArray(v) ? v.filter((e): e is Named<T> => isObject(e) && typeof e.name === 'string') : []);

export function loadKubeconfig(file: string): KubeAccess {
  const where = (s: string) => `kubeconfig ${file}: ${s}`;
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, 'utf8'), { logLevel: 'error' });
  } catch (e) {
    throw new Error(where(`not YAML (${(e as Error).message.split('\n')[0]})`));
  }
  if (!isObject(doc)) throw new Error(where('not a kubeconfig'));
  const kc = doc as KubeconfigFile;
  const ctxName = kc['current-context'];
  const contexts = entries<{ context?: { cluster?: string; user?: string } }>(kc.contexts);
  const ctx = (contexts.find((c) => c.name === ctxName) ?? (contexts.length === 1 ? contexts[0] : undefined))?.context;
  if (!isObject(ctx)) throw new Error(where(`no context "${String(ctxName ?? '')}"`));
  const cluster = entries<{ cluster?: Record<string, unknown> }>(kc.clusters).find((c) => c.name === ctx.cluster)?.cluster;
  if (!isObject(cluster) || typeof cluster.server !== 'string') throw new Error(where(`cluster "${String(ctx.cluster ?? '')}" has no server`));
  const found = entries<{ user?: Record<string, unknown> }>(kc.users).find((u) => u.name === ctx.user)?.user;
  const user = isObject(found) ? found : {};
  if (user.exec || user['auth-provider']) throw new Error(where(`user "${ctx.user}" authenticates with an exec or auth-provider plugin, which rt does not run: give it a token or a client certificate`));
  const base = dirname(file);
  const pem = (data: unknown, path: unknown) => {
    if (typeof data === 'string') return Buffer.from(data, 'base64').toString('utf8');
    if (typeof path !== 'string') return undefined;
    try {
      return readFileSync(isAbsolute(path) ? path : resolve(base, path), 'utf8');
    } catch (e) {
      throw new Error(where(`cannot read ${path}: ${(e as Error).message}`));
    }
  };
  const tokenFile = typeof user.tokenFile === 'string' ? resolve(base, user.tokenFile) : undefined;
  return {
    server: cluster.server.replace(/\/+$/, ''),
    ca: pem(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert: pem(user['client-certificate-data'], user['client-certificate']),
    key: pem(user['client-key-data'], user['client-key']),
    rejectUnauthorized: cluster['insecure-skip-tls-verify'] !== true,
    servername: typeof cluster['tls-server-name'] === 'string' ? cluster['tls-server-name'] : undefined,
    token: typeof user.token === 'string' ? () => user.token as string : tokenFile ? fileToken(tokenFile) : () => undefined,
  };
}

/** The pod's own service account, as every in-cluster client finds it. */
export function loadInCluster(env = process.env): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): pass --kubeconfig');
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: readFileSync(`${IN_CLUSTER_DIR}/ca.crt`, 'utf8'),
    rejectUnauthorized: true,
    token: fileToken(`${IN_CLUSTER_DIR}/token`),
  };
}

function fileToken(path: string): () => string {
  let token = '';
  let readAt = 0;
  return () => {
    if (Date.now() - readAt > TOKEN_REREAD_MS) {
      token = readFileSync(path, 'utf8').trim();
      readAt = Date.now();
    }
    return token;
  };
}
