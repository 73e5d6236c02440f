/**
 * The `connectionString` of state.postgresql in both forms the reference store's docs show: a
 * `postgres://` URL, or libpq's keyword/value list (`host=127.0.0.1 user=postgres dbname=x`,
 * values optionally in single quotes with `\'` and `\\` escapes). pg reads only the URL form
 * itself; the keyword form becomes a pg client config here.
 */
import { readFileSync } from 'node:fs';
import type { Pool, PoolConfig } from 'pg';

type ClientConfig = Pick<PoolConfig, 'connectionString' | 'host' | 'port' | 'user' | 'password' | 'database' | 'ssl' | 'connectionTimeoutMillis' | 'application_name' | 'options'>;

/**
 * A pg pool on a `connectionString` of either form (pg loaded now, not before a PostgreSQL
 * component starts), with a bound on each query. An idle client that loses its connection goes
 * to `onError` rather than crashing the sidecar.
 */
export async function openPostgresPool(connectionString: string, opts: { max: number; queryTimeout: number; onError: (e: Error) => void }): Promise<Pool> {
  const connection = postgresConnectionConfig(connectionString);
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionTimeoutMillis: 5000, ...connection, max: opts.max, query_timeout: opts.queryTimeout });
  pool.on('error', opts.onError);
  return pool;
}

/** libpq keywords with no effect on the node client: accepted rather than refused. */
const IGNORED = new Set(['target_session_attrs', 'client_encoding', 'pool_max_conns', 'pool_min_conns', 'gssencmode', 'krbsrvname', 'sslcompression', 'channel_binding', 'keepalives', 'keepalives_idle', 'keepalives_interval', 'keepalives_count', 'search_path']);

export function postgresConnectionConfig(text: string): ClientConfig {
  const t = text.trim();
  if (/^postgres(ql)?:\/\//i.test(t)) return { connectionString: t };
  const kv = parseKeywordValues(t);
  const out: ClientConfig = {};
  let sslmode: string | undefined;
  const tls: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  for (const [k, v] of Object.entries(kv)) {
    switch (k) {
      case 'host':
      case 'hostaddr':
        out.host = v.split(',')[0];
        break;
      case 'port': {
        const port = Number(v.split(',')[0]);
        if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`connectionString: port "${v}" is not a port number`);
        out.port = port;
        break;
      }
      case 'user':
        out.user = v;
        break;
      case 'password':
        out.password = v;
        break;
      case 'dbname':
      case 'database':
        out.database = v;
        break;
      case 'connect_timeout': {
        const s = Number(v);
        if (!Number.isFinite(s) || s < 0) throw new Error(`connectionString: connect_timeout "${v}" is not a number of seconds`);
        if (s > 0) out.connectionTimeoutMillis = s * 1000;
        break;
      }
      case 'application_name':
        out.application_name = v;
        break;
      case 'options':
        out.options = v;
        break;
      case 'sslmode':
        sslmode = v;
        break;
      case 'sslrootcert':
        tls.ca = readPem(k, v);
        break;
      case 'sslcert':
        tls.cert = readPem(k, v);
        break;
      case 'sslkey':
        tls.key = readPem(k, v);
        break;
      default:
        if (!IGNORED.has(k)) throw new Error(`connectionString: unknown keyword "${k}" (use host, port, user, password, dbname, sslmode, sslrootcert, sslcert, sslkey, connect_timeout, application_name)`);
    }
  }
  out.ssl = sslConfig(sslmode, tls);
  return out;
}

/** sslmode as libpq has it; `prefer`/`allow` (TLS when the server offers it) connect without TLS here. */
function sslConfig(mode: string | undefined, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): ClientConfig['ssl'] {
  switch (mode ?? 'prefer') {
    case 'disable':
    case 'allow':
    case 'prefer':
      return false;
    case 'require':
      // libpq: with a root certificate, require behaves like verify-ca
      return tls.ca ? { ...tls, checkServerIdentity: () => undefined } : { ...tls, rejectUnauthorized: false };
    case 'verify-ca':
      return { ...tls, checkServerIdentity: () => undefined };
    case 'verify-full':
      return { ...tls };
    default:
      throw new Error(`connectionString: sslmode "${mode}" must be disable, allow, prefer, require, verify-ca or verify-full`);
  }
}

function readPem(keyword: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Error(`connectionString: ${keyword} ${file}: ${(e as Error).message}`);
  }
}

/** `a=1 b='two words' c=it\'s` → {a: '1', b: 'two words', c: "it's"}; spaces around `=` allowed. */
export function parseKeywordValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  const n = text.length;
  const skipSpace = () => {
    while (i < n && /\s/.test(text[i])) i++;
  };
  while (true) {
    skipSpace();
    if (i >= n) break;
    const start = i;
    while (i < n && /[A-Za-z0-9_]/.test(text[i])) i++;
    const key = text.slice(start, i);
    skipSpace();
    if (!key || text[i] !== '=') throw new Error(`connectionString is neither a postgres:// URL nor "key=value" pairs (at "${text.slice(start, start + 20)}")`);
    i++;
    skipSpace();
    let value = '';
    if (text[i] === "'") {
      i++;
      let closed = false;
      while (i < n) {
        const c = text[i++];
        if (c === '\\' && i < n) value += text[i++];
        else if (c === "'") {
          closed = true;
          break;
        } else value += c;
      }
      if (!closed) throw new Error(`connectionString: the quoted value of ${key} is not closed`);
    } else {
      while (i < n && !/\s/.test(text[i])) {
        const c = text[i++];
        value += c === '\\' && i < n ? text[i++] : c;
      }
    }
    out[key.toLowerCase()] = value;
  }
  return out;
}
