/**
 * state.sqlite and one large value (issue 17): the table keeps values out of the key index,
 * files of the older layout are moved over with their data and etags, and a bulk get lets the
 * event loop turn (health probes keep answering) however many keys it reads.
 * The speed itself is measured in bench/state-stall.bench.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { factory } from '../../sidecar/src/components/state/sqlite/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { componentContext, spec } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'rt-sqlite-stall-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function open(file: string): Promise<StateStore> {
  const s = factory() as StateStore;
  await s.init(spec('state.sqlite', { connectionString: file }), componentContext);
  return s;
}

function tableSql(file: string, table = 'state'): string {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return (db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`).get(table) as { sql: string }).sql;
  } finally {
    db.close();
  }
}

describe('state.sqlite with large values', () => {
  it('keeps values out of the key index (a rowid table, value last)', async () => {
    const file = join(dir, 'layout.db');
    const s = await open(file);
    await s.close();
    const sql = tableSql(file);
    expect(sql).not.toMatch(/WITHOUT\s+ROWID/i);
    expect(sql.indexOf('value')).toBeGreaterThan(sql.indexOf('expires_at'));
  });

  it('moves a file of the older layout over, keeping values, etags and expiry', async () => {
    const file = join(dir, 'old.db');
    const db = new DatabaseSync(file);
    db.exec(`CREATE TABLE "state" (key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL, etag INTEGER NOT NULL, expires_at INTEGER) WITHOUT ROWID;
      CREATE INDEX "state_expires_at" ON "state" (expires_at) WHERE expires_at IS NOT NULL;
      CREATE TABLE "state_meta" (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL);
      INSERT INTO "state_meta" VALUES ('etag', 41);`);
    db.prepare('INSERT INTO "state" VALUES (?, ?, ?, ?)').run('a', Buffer.from('"old a"'), 40, null);
    db.prepare('INSERT INTO "state" VALUES (?, ?, ?, ?)').run('b', Buffer.from('"old b"'), 41, Date.now() + 3_600_000);
    db.close();

    const s = await open(file);
    try {
      expect(tableSql(file)).not.toMatch(/WITHOUT\s+ROWID/i);
      const a = await s.get('a');
      expect(Buffer.from(a!.value).toString()).toBe('"old a"');
      expect(a!.etag).toBe('40');
      const b = await s.get('b');
      expect(b!.etag).toBe('41');
      expect(b!.metadata?.ttlExpireTime).toBeDefined();
      // the etag counter moved over too: a new write never reuses an etag
      await s.set({ key: 'c', value: Buffer.from('1') });
      expect(Number((await s.get('c'))!.etag)).toBeGreaterThan(41);
    } finally {
      await s.close();
    }
    // opening again leaves the new layout as it is
    const again = await open(file);
    expect(Buffer.from((await again.get('a'))!.value).toString()).toBe('"old a"');
    await again.close();
  });

  it('lets the event loop turn while a bulk get reads 10,000 keys beside an 8 MB value', async () => {
    const s = await open(join(dir, 'big.db'));
    try {
      await s.set({ key: 'big', value: Buffer.alloc(8 * 1024 * 1024, 0x61) });
      let turns = 0;
      let spinning = true;
      const spin = () => {
        if (!spinning) return;
        turns++;
        setImmediate(spin);
      };
      setImmediate(spin);
      const keys = Array.from({ length: 10_000 }, (_, i) => (i === 5000 ? 'big' : `missing-${i}`));
      const items = await s.bulkGet(keys);
      spinning = false;
      expect(items.filter(Boolean)).toHaveLength(1);
      expect(items[5000]!.value.length).toBe(8 * 1024 * 1024);
      // other work ran between slices of the bulk get, not only after it
      expect(turns).toBeGreaterThan(10);
    } finally {
      await s.close();
    }
  });
});
