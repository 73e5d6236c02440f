import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { parseKeywordValues, postgresConnectionConfig } from '../../sidecar/src/components/state/postgresql/connection.ts';
import { factory, qualifiedTable } from '../../sidecar/src/components/state/postgresql/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { requireService } from '../services/ci.ts';
import { dropStateTables, postgresTarget } from '../services/postgres.ts';
import { SQL_ETAG_RULES } from '../../sidecar/src/components/state/common.ts';
import fc from 'fast-check';
import { describeStateStoreConformance } from '../conformance/state-store.ts';
import { componentContext, spec } from './helpers.ts';

const target = await postgresTarget();
const available = requireService('PostgreSQL', target.available, `nothing answers at ${target.host}:${target.port} (set RT_TEST_POSTGRES_URL)`);
const tables: string[] = [];

async function open(extra: Record<string, string> = {}): Promise<StateStore> {
  const tableName = `rt_state_test_${randomBytes(4).toString('hex')}`;
  tables.push(tableName);
  const s = factory() as StateStore;
  await s.init(spec('state.postgresql', { connectionString: target.url, tableName, ...extra }), componentContext);
  return s;
}

afterAll(async () => {
  if (available) await dropStateTables(target.url, tables);
});

describe.skipIf(!available)('state.postgresql against a real PostgreSQL', () => {
  describeStateStoreConformance('state.postgresql', () => open(), (s) => s.close(), SQL_ETAG_RULES);

  it('two stores opening one table at once both start and share data', async () => {
    const tableName = `rt_state_test_${randomBytes(4).toString('hex')}`;
    tables.push(tableName);
    const md = { connectionString: target.url, tableName };
    const [a, b] = [factory() as StateStore, factory() as StateStore];
    await Promise.all([a.init(spec('state.postgresql', md), componentContext), b.init(spec('state.postgresql', md), componentContext)]);
    await a.set({ key: 'shared', value: Buffer.from('"x"') });
    expect(Buffer.from((await b.get('shared'))!.value).toString()).toBe('"x"');
    await Promise.all([a.close(), b.close()]);
  });

  it("takes the reference docs' key=value connection string (host=… user=… dbname=…) and reference metadata names", async () => {
    const u = new URL(target.url);
    const kv = `host=${target.host} port=${target.port} user=${decodeURIComponent(u.username) || 'postgres'}${u.password ? ` password='${decodeURIComponent(u.password)}'` : ''} dbname=${u.pathname.slice(1) || 'postgres'} sslmode=disable connect_timeout=5`;
    const s = await open({ connectionString: kv, cleanupIntervalInSeconds: '60', timeoutInSeconds: '10', metadataTableName: 'unused' });
    await s.set({ key: 'kv', value: Buffer.from('1') });
    expect(Buffer.from((await s.get('kv'))!.value).toString()).toBe('1');
    await s.close();
  });
});

describe('state.postgresql metadata', () => {
  it('accepts table or schema.table and nothing that could inject SQL', async () => {
    expect(qualifiedTable('state').quoted).toBe('"state"');
    expect(qualifiedTable('app.state').quoted).toBe('"app"."state"');
    expect(() => qualifiedTable('a.b.c')).toThrow();
    expect(() => qualifiedTable('x"; drop table y')).toThrow(/tableName/);
    const s = factory() as StateStore;
    await expect(s.init(spec('state.postgresql', {}), componentContext)).rejects.toThrow(/metadata field "connectionString" is required/);
  });

  it('reads both connection string forms', () => {
    expect(postgresConnectionConfig('postgres://u:p@h:1/db')).toEqual({ connectionString: 'postgres://u:p@h:1/db' });
    expect(postgresConnectionConfig("host=127.0.0.1 user=postgres dbname=postgres password='a b\\'c' port = 5433")).toEqual({
      host: '127.0.0.1',
      user: 'postgres',
      database: 'postgres',
      password: "a b'c",
      port: 5433,
      ssl: false,
    });
    expect(postgresConnectionConfig('host=db sslmode=require').ssl).toEqual({ rejectUnauthorized: false });
    expect(() => postgresConnectionConfig('host=db port=x')).toThrow(/port "x"/);
    expect(() => postgresConnectionConfig('host=db bogus=1')).toThrow(/unknown keyword "bogus"/);
    expect(() => postgresConnectionConfig("host='db")).toThrow(/not closed/);
    expect(() => postgresConnectionConfig('just words')).toThrow(/neither a postgres:\/\/ URL nor "key=value" pairs/);
  });

  it('key=value lists round-trip whatever the values hold', () => {
    const quote = (v: string) => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
    fc.assert(
      fc.property(fc.dictionary(fc.stringMatching(/^[a-z_][a-z0-9_]{0,10}$/), fc.string()), (pairs) => {
        const text = Object.entries(pairs)
          .map(([k, v]) => `${k}=${quote(v)}`)
          .join(' ');
        expect(parseKeywordValues(text)).toEqual(pairs);
      }),
    );
  });
});
