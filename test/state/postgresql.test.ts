import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { factory, qualifiedTable } from '../../sidecar/src/components/state/postgresql/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { requireService } from '../services/ci.ts';
import { dropStateTables, postgresTarget } from '../services/postgres.ts';
import { SQL_ETAG_RULES } from '../../sidecar/src/components/state/common.ts';
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
});

describe('state.postgresql metadata', () => {
  it('accepts table or schema.table and nothing that could inject SQL', async () => {
    expect(qualifiedTable('state').quoted).toBe('"state"');
    expect(qualifiedTable('app.state').quoted).toBe('"app"."state"');
    expect(() => qualifiedTable('a.b.c')).toThrow();
    expect(() => qualifiedTable('x"; drop table y')).toThrow(/tableName/);
    const s = factory() as StateStore;
    await expect(s.init(spec('state.postgresql', {}), componentContext)).rejects.toThrow(/connectionString is required/);
  });
});
