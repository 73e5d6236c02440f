import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { factory } from '../../sidecar/src/components/state/sqlite/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { SQL_ETAG_RULES } from '../../sidecar/src/components/state/common.ts';
import { describeStateStoreConformance } from '../conformance/state-store.ts';
import { componentContext, spec } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'rt-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function open(metadata: Record<string, string>): Promise<StateStore> {
  const s = factory() as StateStore;
  await s.init(spec('state.sqlite', metadata), componentContext);
  return s;
}

describeStateStoreConformance('state.sqlite (file)', () => open({ connectionString: join(dir, 'nested', 'folder', 'state.db') }), (s) => s.close(), SQL_ETAG_RULES);
describeStateStoreConformance('state.sqlite (:memory:)', () => open({ connectionString: ':memory:', tableName: 'other_table' }), (s) => s.close(), SQL_ETAG_RULES);

describe('state.sqlite specifics', () => {
  it('keeps data across reopen of the same file and never reuses an etag', async () => {
    const file = join(dir, 'reopen.db');
    const a = await open({ connectionString: `file:${file}` });
    await a.set({ key: 'k', value: Buffer.from('"v"') });
    const etag1 = (await a.get('k'))?.etag;
    await a.delete({ key: 'k' });
    await a.close();
    const b = await open({ connectionString: file });
    await b.set({ key: 'k', value: Buffer.from('"v2"') });
    const etag2 = (await b.get('k'))?.etag;
    expect(etag2).not.toBe(etag1);
    await b.close();
    const c = await open({ connectionString: file });
    expect(Buffer.from((await c.get('k'))!.value).toString()).toBe('"v2"');
    await c.close();
  });

  it('refuses to start without a connectionString or with an unsafe table name', async () => {
    await expect(open({})).rejects.toThrow(/metadata field "connectionString" is required/);
    await expect(open({ connectionString: ':memory:', tableName: 'x"; DROP TABLE y; --' })).rejects.toThrow(/tableName/);
  });
});
