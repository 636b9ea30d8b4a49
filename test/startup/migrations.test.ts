/** Migrations: applied in order on start, recorded once, safe when two instances start at once. */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { createPool, migrate } from '../../src/store/db.ts';
import { createTestDatabase } from '../helpers/db.ts';

test('two instances migrating one fresh database at once apply each migration exactly once', async () => {
  const db = await createTestDatabase();
  const a = createPool(db.url, 2);
  const b = createPool(db.url, 2);
  try {
    const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
    const files = (await fs.readdir(path.resolve(import.meta.dirname, '../../migrations'))).filter((f) => f.endsWith('.sql'));
    assert.equal(ra.length + rb.length, files.length, 'each migration applied by exactly one of them');
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    const r = await c.query('SELECT version FROM schema_migrations ORDER BY version');
    await c.end();
    assert.deepEqual(
      r.rows.map((x) => x.version),
      files.map((f) => f.slice(0, -4)).sort(),
    );
    assert.deepEqual(await migrate(a), [], 'a restart applies nothing');
  } finally {
    await a.end();
    await b.end();
    await db.drop();
  }
});
