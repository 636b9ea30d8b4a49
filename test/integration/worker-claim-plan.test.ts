/**
 * FIND_DUE_WORK (the jobs that rows imply) reads its small partial indexes, not the orders and
 * attempts tables: with many open orders and attempts and no statistics yet (tables that grew
 * faster than autovacuum analyzed them), a plain statement would scan and sort every order on every
 * run, ~10 ms each with 100,000 orders (docs/performance.md, "Plans that stay right as tables grow").
 * Counted with pg_stat_xact_user_tables inside the run's transaction.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { findDueWork } from '../../src/store/jobs.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';
import { insertAttempts, insertOrders, rowsReadIn } from '../helpers/rows.ts';

const OPEN_ORDERS = 20_000;

describe('FIND_DUE_WORK with many open orders and no statistics', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    // No ANALYZE, and none by autovacuum while the test runs.
    await db.query('ALTER TABLE orders SET (autovacuum_enabled = off)');
    await db.query('ALTER TABLE attempts SET (autovacuum_enabled = off)');
    await insertOrders(db, { key: 'open', appId: 'app_claim', merchantId: 'mch_claim', status: 'PAYING', from: 1, to: OPEN_ORDERS });
    await insertAttempts(db, { key: 'open', from: 1, to: OPEN_ORDERS, state: 'ACCEPTED' });
    // One order past its window, one whose pending close was let go, one attempt whose creation
    // stalled: each part has something to find.
    await db.query(`UPDATE orders SET expire_at = now() - interval '1 second' WHERE id = 'ord_open_9'`);
    await db.query(
      `UPDATE orders SET close_pending = 'CLOSE_REQUESTED', close_held_until = now() - interval '1 second' WHERE id = 'ord_open_5'`,
    );
    await db.query(`UPDATE attempts SET state = 'PENDING', created_at = now() - interval '10 minutes' WHERE id = 'att_open_7'`);
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  test(`it reads a handful of orders and attempts, not ${OPEN_ORDERS}, and adds the jobs due`, async () => {
    const c = await db.connect();
    try {
      const now = new Date();
      const read = await rowsReadIn(c, () =>
        findDueWork(c, {
          now,
          aliveSince: new Date(now.getTime() - 4000),
          attemptStalledBefore: new Date(now.getTime() - 150_000),
          refundStalledBefore: new Date(now.getTime() - 60_000),
          limit: 200,
          kinds: { expire: 'EXPIRE_ORDER', close: 'FINISH_CLOSE', attempt: 'CHECK_ATTEMPT', refund: 'CHECK_REFUND' },
        }),
      );
      assert.ok(read.orders < 100, `${read.orders} order rows read`);
      assert.ok(read.attempts < 100, `${read.attempts} attempt rows read`);
      const jobs = await c.query<{ kind: string; subject_id: string }>('SELECT kind, subject_id FROM jobs ORDER BY kind');
      assert.deepEqual(jobs.rows, [
        { kind: 'CHECK_ATTEMPT', subject_id: 'att_open_7' },
        { kind: 'EXPIRE_ORDER', subject_id: 'ord_open_9' },
        { kind: 'FINISH_CLOSE', subject_id: 'ord_open_5' },
      ]);
    } finally {
      c.release();
    }
  });
});
